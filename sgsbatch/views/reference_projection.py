"""The same run projected on the SGS reference implementation's layout, for `plan`'s comparison. Pure
arithmetic over a round's projection (views/projection.py calls it; views/plan.py prints it).

The layout (LukeBailey181/sgs: every phase of a round on one node, one after another): one node of
`slurm.train.gpus` GPUs and `slurm.train.cpus` CPUs (the train job's node, x `slurm.train.nodes`
= 1) held for the whole run. Per round:

* each generating phase (conjecture, solve, guide): an engine start (`model_load_s`) and the phase's
  tokens on all the node's GPUs at the same decode rate as sgsbatch's tasks;
* verification on the node's CPUs: the round's proofs at `lean_proofs_per_s` a core, plus a REPL start
  (`repl_start_s`) every `verification.max_proofs_per_process` proofs of a core; the GPUs wait;
* training: the train job as sgsbatch projects it (same node, same figures).

No queue waits (the node is held). GPU-hours = GPUs x the round's wall time (held throughout), so
the ratio to sgsbatch's GPU-hours is mostly what verification and a phase's idle GPUs cost there.

Not modelled: a search Solver (the reference has none: None), prefill, the reference's own engine
settings; a phase without a GPU figure makes the whole comparison None.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from sgsbatch.config.schema import Config

GENERATING = ("conjecture", "solve", "guide")


@dataclass(frozen=True)
class ReferencePlan:
    """A round and the run on the reference's one-node layout (module docstring)."""

    gpus: int
    cpus: int
    phase_s: dict[str, float]  # wall seconds a round, per phase
    rounds: int

    @property
    def round_s(self) -> float:
        return sum(self.phase_s.values())

    @property
    def run_days(self) -> float:
        return self.rounds * self.round_s / 86400

    @property
    def gpu_hours(self) -> float:
        """The run's: the node's GPUs held through every round."""
        return self.rounds * self.gpus * self.round_s / 3600

    @property
    def cpu_hours(self) -> float:
        return self.rounds * self.cpus * self.round_s / 3600

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "round_s": self.round_s, "run_days": self.run_days, "gpu_hours": self.gpu_hours,
                "cpu_hours": self.cpu_hours}


def reference_plan(cfg: Config, proj: Any, figures: Any, decode: float) -> ReferencePlan | None:
    """The reference layout's round for `proj` (a round/projection.Projection of `cfg`; `decode`: one
    GPU's tokens/s at the round's context), or None (a search Solver, or a phase not projected)."""
    if cfg.solver.mode == "search" or proj.not_projected:
        return None
    f, node = figures, cfg.slurm.train
    gpus, cpus = node.gpus * node.nodes, node.cpus * node.nodes
    if gpus <= 0 or cpus <= 0:
        return None
    phase_s: dict[str, float] = {}
    for ph in proj.phases:
        if ph.phase in GENERATING:
            phase_s[ph.phase] = f["model_load_s"] + ph.tokens / (gpus * decode)
        elif ph.phase == "verify":
            per_core = ph.items / cpus
            starts = max(1, math.ceil(per_core / cfg.verification.max_proofs_per_process))
            phase_s[ph.phase] = starts * f["repl_start_s"] + per_core / f["lean_proofs_per_s"]
        elif ph.phase == "train":
            assert ph.task_s is not None
            phase_s[ph.phase] = ph.task_s
    return ReferencePlan(gpus, cpus, phase_s, proj.rounds)
