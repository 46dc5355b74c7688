"""`sgsbatch canary CONFIG`: one Slurm job per job shape, then one table and a kept result.

Each job (shapes.py) is submitted with its phases' own Slurm options (scheduling/slurm.py's
`_parameters_for`: partition, account, QOS, GPUs, CPUs, memory, nodes, extra options), a time
limit of `canary.time_min` and no requeue, as `canary.<run name>.<phases>`; all are submitted at
once and waited for. A job Slurm refuses or that dies becomes a failed `slurm` row with the
reason and where its log is. With `local=True` the jobs run here, one after another (a
workstation, or a site check without Slurm). The result is kept (record.py) and returned.
Job logs stay in `<runs_dir>/.canary/work/<time>/slurm/`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sgsbatch.canary.job import run_job
from sgsbatch.canary.record import canary_dir, save
from sgsbatch.canary.rows import failed
from sgsbatch.canary.shapes import ShapeJob, shape_jobs
from sgsbatch.config.schema import Config


def slurm_parameters(cfg: Config, job: ShapeJob) -> dict[str, Any]:
    """submitit's parameters for `job`: its first phase's (all its phases share them), one task."""
    from sgsbatch.scheduling.slurm import _parameters_for

    params = _parameters_for(cfg, 0, job.phases[0], 1, None)
    params.pop("array_parallelism", None)
    extra = dict(params["additional_parameters"])  # type: ignore[call-overload]
    extra.pop("requeue", None)
    params.update(job_name=f"canary.{cfg.run.name}.{job.name}", time=job.time_min, additional_parameters=extra)
    return params


def run_canary(cfg: Config, *, local: bool = False, echo: Callable[[str], None] = print) -> dict[str, Any]:
    from sgsbatch.config.loading import to_toml
    from sgsbatch.run import environment

    jobs = shape_jobs(cfg)
    root = canary_dir(cfg.run.runs_dir).resolve() / "work" / time.strftime("%Y%m%d-%H%M%S")
    text = to_toml(cfg)
    rows: list[dict[str, Any]] = []
    ids: list[str] = []
    if local:
        for j in jobs:
            echo(f"canary {j.name}: {', '.join(j.components)} (here, not on Slurm)")
            rows += run_job(text, j, str(root / j.name))
    else:
        rows, ids = _on_slurm(cfg, jobs, text, root, echo)
    return save(cfg.run.runs_dir, cfg, rows, environment.capture(), ids)


def _on_slurm(cfg: Config, jobs: list[ShapeJob], text: str, root: Path,
              echo: Callable[[str], None]) -> tuple[list[dict[str, Any]], list[str]]:
    import submitit

    from sgsbatch.scheduling.slurm import clean_env, python_command

    rows: list[dict[str, Any]] = []
    handles: list[tuple[ShapeJob, Any]] = []
    for j in jobs:
        ex = submitit.SlurmExecutor(folder=root / "slurm" / "%j", max_num_timeout=0, python=python_command())
        ex.update_parameters(**slurm_parameters(cfg, j))
        keys = "/".join(f"slurm.{p}" for p in j.phases)
        try:
            with clean_env():
                handle = ex.submit(run_job, text, j, str(root / j.name))
        except Exception as e:  # sbatch's refusal (a missing partition, an account without access, ...)
            rows.append({**failed("slurm", f"{j.name} job submitted", e,
                                  f"{keys}.partition / account / qos / gpus / mem (sgsbatch preflight CONFIG "
                                  "shows the site's limits)").as_dict(), "shape": f"{j.name} ({j.shape.label})"})
            continue
        echo(f"canary {j.name}: job {handle.job_id} ({j.shape.label}; {', '.join(j.components)}; "
             f"time limit {j.time_min} min)")
        handles.append((j, handle))
    for j, handle in handles:
        try:
            rows += handle.result()
        except Exception as e:  # the job failed, was cancelled or timed out: its log says why
            rows.append({**failed("slurm", f"{j.name} job {handle.job_id} ran", e,
                                  f"read {handle.paths.stdout}; canary.time_min ({j.time_min}) if it timed out")
                         .as_dict(), "shape": f"{j.name} ({j.shape.label})"})
        echo(f"canary {j.name}: job {handle.job_id} ended")
    return rows, [h.job_id for _, h in handles]
