"""Held-out evaluation's cost in `plan` (eval.every_rounds > 0): its jobs beside the chain, projected.

Each evaluation is one job of the solve phase's resources (scheduling/eval_jobs.py): it loads the Solver
(`model_load_s`), generates P problems x `eval.samples` samples of `projection.mean_tokens` tokens at
slurm.solve.gpus x the decode rate (round/projection.decode_tokens_per_s, given as `decode`), then checks
them on slurm.solve.cpus Lean cores at `lean_proofs_per_s` each after one `repl_start_s` (the job
generates first, then verifies). The run holds `run.rounds // eval.every_rounds` of them. They are never
on the chain's critical path: the run's days do not change; their GPU- and CPU-hours are the run's besides.
P counts each set's usable rows (views/plan.py reads the files); a set given by hub id is not downloaded: it
counts `eval.limit` problems when that is set, else it is listed as not counted. Not modelled: the queue
wait of the job (it waits beside the chain), prefill, retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sgsbatch.config.schema import Config


@dataclass(frozen=True)
class EvalPlan:
    evaluations: int  # jobs over the run
    every_rounds: int
    problems: int  # per evaluation, over the sets counted
    samples: int  # per evaluation
    gpus: int
    cpus: int
    job_s: float | None  # one job; None: no GPU (generation is not projected)
    gpu_hours: float | None  # all of the run's evaluations
    cpu_hours: float | None
    uncounted: tuple[str, ...] = ()  # sets given by hub id without eval.limit

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"uncounted": list(self.uncounted)}


def eval_plan(cfg: Config, figures: Any, decode: float, problems: int, uncounted: tuple[str, ...] = ()) -> EvalPlan | None:
    """The evaluations of a run of `cfg` over `problems` problems (see the module docstring); None when off.
    `figures`: round/projection.Figures (indexed by name)."""
    e = cfg.eval
    if e.every_rounds <= 0 or not e.sets:
        return None
    res = cfg.slurm.solve
    n, samples = cfg.run.rounds // e.every_rounds, problems * e.samples
    rate = res.gpus * decode
    if rate <= 0:
        return EvalPlan(n, e.every_rounds, problems, samples, res.gpus, res.cpus, None, None, None, uncounted)
    job_s = (figures["model_load_s"] + samples * cfg.projection.mean_tokens / rate + figures["repl_start_s"]
             + samples / (max(1, res.cpus) * figures["lean_proofs_per_s"]))
    return EvalPlan(n, e.every_rounds, problems, samples, res.gpus, res.cpus, job_s, n * res.gpus * job_s / 3600,
                    n * res.cpus * job_s / 3600, uncounted)
