"""sgsbatch: SGS (Self-Guided Self-Play) for Lean 4 as a SLURM-native batch system.

Heavy libraries (torch, transformers, deepspeed, vllm) are imported only inside the
code that needs them, so importing this package and `sgsbatch --help` stay instant.
"""

__version__ = "0.1.0"
