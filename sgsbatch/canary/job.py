"""One canary job: the checks of one job shape's components, run where that shape's phases run.

`run_job` is what `sgsbatch canary` submits (through submitit, with the phases' own Slurm
options) or, with `--local`, calls here. Each generating role's check runs in a process of its
own (its engine's memory and processes end with it, as in a run). A check that raises, or whose
process dies, becomes one failed row naming the component; the others still run. On the second and later nodes of a multi-node train shape only
the training ranks start (they join the first node's rendezvous); the first node reports.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sgsbatch.canary.rows import Row, failed
from sgsbatch.canary.shapes import ShapeJob
from sgsbatch.config.schema import Config

FIXES = {
    "environment": "the install on the compute nodes (./setup.sh --gpu from the lock)",
    "generation:solver": "models.solver / generation.*",
    "generation:conjecturer": "models.conjecturer / generation.*",
    "guide": "models.guide / generation.*",
    "verification": "verification.* (./setup.sh --lean builds the Lean project)",
    "search": "search.* and verification.* on the solve nodes (./setup.sh --lean there)",
    "training": "train.* / slurm.train.*",
}


def _targets(cfg: Config) -> list[Any]:
    from sgsbatch.logic.data import load_targets

    loaded = load_targets(cfg.data.source, fmt=cfg.data.format, split=cfg.data.split, limit=cfg.canary.targets)
    if not loaded.targets:
        raise ValueError(f"{cfg.data.source} holds no usable targets")
    return list(loaded.targets)


def _isolated(config_toml: str, job: ShapeJob, name: str, workdir: str, targets: list[Any]) -> list[Row]:
    """`_component` in a fresh process: an engine's GPU memory and processes go with it (a run
    loads each role in a process of its own too), and a crash is one failed row, not the job."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        rows: list[Row] = pool.submit(_component_from_text, config_toml, job, name, workdir, targets).result()
    return rows


def _component_from_text(config_toml: str, job: ShapeJob, name: str, workdir: str, targets: list[Any]) -> list[Row]:
    from sgsbatch.config.loading import from_toml_text

    return _component(from_toml_text(config_toml, "canary"), job, name, Path(workdir), targets)


def _component(cfg: Config, job: ShapeJob, name: str, workdir: Path, targets: list[Any]) -> list[Row]:
    threads = max(1, job.shape.cpus)
    if name == "environment":
        from sgsbatch.canary.environment import check_environment

        return check_environment(job.shape.gpus, f"slurm.{job.phases[0]}.gpus")
    if name.startswith("generation:"):
        from sgsbatch.canary.generation import check_role

        return check_role(cfg, name.split(":", 1)[1], targets, threads)[0]
    if name == "guide":
        from sgsbatch.canary.generation import check_guide

        return check_guide(cfg, targets, threads)
    if name == "verification":
        from sgsbatch.canary.lean import check_verification

        return check_verification(cfg, cfg.phase_resources("verify").cpus)
    if name == "search":
        from sgsbatch.canary.search import check_search

        return check_search(cfg)
    if name == "training":
        from sgsbatch.canary.training import check_training

        return check_training(cfg, targets, workdir / "training")
    raise ValueError(f"unknown canary component {name!r}; valid: {', '.join(FIXES)}")


def run_job(config_toml: str, job: ShapeJob, workdir: str) -> list[dict[str, Any]]:
    """Every check of `job`'s components; rows as dicts (they travel back through submitit's pickle)."""
    from sgsbatch.config.loading import from_toml_text
    from sgsbatch.scheduling.ranks import is_first_task

    cfg = from_toml_text(config_toml, "canary")
    work = Path(workdir)
    first = is_first_task(os.environ)
    needs_targets = any(c.startswith("generation:") or c in ("guide", "training") for c in job.components)
    rows: list[Row] = []
    targets: list[Any] = []
    if needs_targets:
        try:
            targets = _targets(cfg)
        except Exception as e:  # unreadable from this node: every check that needs prompts fails with it
            return [failed("data", "targets readable on the node", e, "data.source: a path the compute nodes "
                                                                      "can read, or a dataset in their cache").as_dict()]
    for name in job.components:
        if not first and name != "training":
            continue
        t0 = time.perf_counter()
        try:
            if name.startswith("generation:") or name == "guide":  # engines: one process each
                got = _isolated(config_toml, job, name, workdir, targets)
            else:
                got = _component(cfg, job, name, work, targets)
        except Exception as e:  # one broken component must not hide the others' results
            got = [failed(name, "runs", e, FIXES.get(name, name))]
        print(f"canary {job.name}: {name} done in {time.perf_counter() - t0:.1f} s", flush=True)
        rows += got
    label = job.shape.label
    return [{**r.as_dict(), "shape": f"{job.name} ({label})"} for r in rows]
