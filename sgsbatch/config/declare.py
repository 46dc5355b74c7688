"""How a config key is declared (`key`, its range `Bound`) and the names the tables share (phases, selections,
limits, the GRPO family's published clip ranges). The tables are in config/run_keys.py, role_keys.py,
job_keys.py and projection_keys.py; config/schema.py puts them together as `Config`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, TypeVar

Executor = Literal["auto", "slurm", "local"]
PHASES: tuple[str, ...] = ("init", "conjecture", "solve", "verify", "guide", "train")
ROUND_PHASES: tuple[str, ...] = ("conjecture", "solve", "verify", "guide", "train")
ROLLOUT_JOB = "rollout"  # the colocated job of solver.colocated_steps rounds: a job kind, not a phase of a round
# every [slurm.<table>] with a job's resources: the phases and the run's watcher job (ops/watcher.py)
SLURM_TABLES: tuple[str, ...] = (*PHASES, "watcher")
TINY_RANDOM = "tiny-random"
# a run name is a directory name, a command-line word and part of Slurm job names
RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,99}")
# an evaluation set's name: part of metric names (eval/<name>/pass@<k>) and of a directory
EVAL_SET_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
SLURM_MEM = re.compile(r"[0-9]+[KMGT]?")
MAX_TASKS = 10_000  # tasks of one phase array (Slurm's MaxArraySize is 1001 unless raised)
MAX_CPUS, MAX_GPUS = 4096, 64  # per task (per node)
# head sizes vLLM 0.32's CPU attention accepts (vllm/v1/attention/backends/cpu_attn.py
# get_supported_head_sizes; tests/vllm/test_vllm_engine.py checks this copy against the installed vLLM)
VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
# The GRPO family's published clip ranges (eps_low, eps_high) of the importance ratio, used where
# solver.clip_low / clip_high are 0: grpo and dr_grpo PPO's 0.2 (arXiv 1707.06347; TRL GRPOConfig.epsilon,
# verl clip_ratio); dapo 0.2 / 0.28 (DAPO arXiv 2503.14476 §3.1 and its experiments); gspo 3e-4 / 4e-4 on
# the sequence ratio (GSPO arXiv 2507.18071 §5.1; verl examples/gspo_trainer clip_ratio_low/high)
PUBLISHED_CLIP: dict[str, tuple[float, float]] = {
    "grpo": (0.2, 0.2), "dr_grpo": (0.2, 0.2), "dapo": (0.2, 0.28), "gspo": (3e-4, 4e-4)}
# The reference's StatementSelectionMode (sgs/pipeline/config.py:18-24), its values as spelled there, plus
# "auto": the selection each objective has always had here (SolverConfig.selection_mode)
SELECTIONS: tuple[str, ...] = ("hard", "unsolved", "stp_improved_ei", "all_none_0_1", "all", "less_16_proofs")
# the selections that train on stored proofs of the last `solver.ei_rounds` rounds (Expert Iteration)
WINDOW_SELECTIONS: tuple[str, ...] = ("less_16_proofs", "stp_improved_ei")
T = TypeVar("T")


@dataclass(frozen=True)
class Bound:
    """A number key's range, declared with the key and checked by config/validation.py: `spec` is ">= 1",
    "> 0", "<= 64", "< 1", or an interval "[0, 1]", "(0, 1]", "[0, 1)"; `message` is what a config outside it
    is told (`{value}`: the value given)."""

    spec: str
    message: str
    # the spec parsed once: (limit, inclusive) below and above, None where it is open
    low: tuple[float, bool] | None = field(init=False, repr=False, compare=False)
    high: tuple[float, bool] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = _BOUND.fullmatch(self.spec)
        assert m, f"a bound is '>= N', '> N', '<= N', '< N' or an interval: {self.spec!r}"
        if m["op"]:
            x, op = float(m["x"]), m["op"]
            low, high = ((x, op == ">="), None) if op[0] == ">" else (None, (x, op == "<="))
        else:
            low, high = (float(m["lo"]), m["left"] == "["), (float(m["hi"]), m["right"] == "]")
        object.__setattr__(self, "low", low)  # a frozen dataclass: set once, here
        object.__setattr__(self, "high", high)

    def holds(self, value: float) -> bool:
        lo, hi = self.low, self.high
        return ((lo is None or (value >= lo[0] if lo[1] else value > lo[0]))
                and (hi is None or (value <= hi[0] if hi[1] else value < hi[0])))


_NUMBER = r"-?[0-9][0-9_.e+-]*"
_BOUND = re.compile(rf"(?P<op>>=|>|<=|<) (?P<x>{_NUMBER})|(?P<left>[\[(])(?P<lo>{_NUMBER}), (?P<hi>{_NUMBER})(?P<right>[\])])")


def key(default: T, text: str, bound: Bound | None = None) -> T:
    """A config key: its default, its help text (`sgsbatch config keys`) and, for a number, its range (`bound`),
    written once, here."""
    return field(default=default, metadata={"help": text, "bound": bound})
