"""Disk used by a run and its projection to the planned rounds.

Used: the bytes of `checkpoints/` (carried optimizer states included, projected as they are now), `rounds/` and the database (with its `-wal` file), walked by
run/paths.tree_bytes (symlinks not followed). Projected to `run.rounds`: checkpoints by the retention rule
of round/checkpoints.py (rounds kept at the end x the largest round's checkpoints), the database
linearly per completed round, round directories by a compacted round's size (`disk_usage`). Read by `status` (views/progress.py) and judged
against `alerts.disk_budget_gb` (round/alarms.py). `free_space` is what is left on the file system holding the run directory, and `full_disk` the
one line `status` (and so `watch`, `--wait` and the notifications) gives a stalled run when that
is below `alerts.min_free_mb`. Not covered: `launch --dry-run`'s projection
from the configured checkpoint size (ops/progress.projection_text), other runs sharing the disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sgsbatch.config.schema import Config
from sgsbatch.errors import free_space as fs_free
from sgsbatch.errors import human_bytes
from sgsbatch.round.checkpoints import retained
from sgsbatch.round.compaction import is_compacted
from sgsbatch.run.paths import RunPaths, tree_bytes


def disk_usage(cfg: Config, paths: RunPaths, rounds_completed: int) -> dict[str, Any]:
    """Bytes used by checkpoints, shard files and the database, and their projection to cfg.run.rounds.

    Checkpoints by the retention rule; the database linearly per completed round; round directories
    by what a round costs once compacted (round/compaction.py: the mean of the compacted ones) for
    all but the rounds still whole (the last one or two, larger until compacted; as many as training reads,
    `solver.window_rounds()`, plus the round running, at a whole round's mean size: Expert Iteration's window,
    DAPO's re-sampling window, whichever holds more than now), or linearly per
    completed round while none is compacted (early, or `records.keep_sample_tokens`)."""
    ck_root = paths.checkpoints_dir()
    per_round = [tree_bytes(d) for d in sorted(ck_root.glob("r[0-9]*"))] if ck_root.exists() else []
    ck_init = tree_bytes(ck_root / "init")
    ck_opt = tree_bytes(ck_root / "optimizer")  # carried optimizer states: each role's newest only
    ckpt = ck_init + sum(per_round) + ck_opt
    round_dirs = sorted((paths.root / "rounds").glob("r[0-9]*"))
    compacted = [tree_bytes(d) for d in round_dirs if is_compacted(paths, int(d.name[1:]))]
    whole = tree_bytes(paths.root / "rounds") - sum(compacted)
    rounds_b = whole + sum(compacted)
    db = tree_bytes(paths.db) + tree_bytes(Path(str(paths.db) + "-wal"))
    used = {"checkpoints": ckpt, "rounds": rounds_b, "database": db}
    planned = cfg.run.rounds
    ck_each = max(per_round) if per_round else 0
    kept = sum(retained(cfg, r, planned - 1) for r in range(planned))
    left = planned - rounds_completed
    if compacted:
        n_whole = len(round_dirs) - len(compacted)
        held = max(n_whole, min(planned, cfg.solver.window_rounds() + 1))  # the most ever whole at once
        extra = (held - n_whole) * (whole / n_whole if n_whole else 0.0)
        rounds_end = whole + extra + sum(compacted) / len(compacted) * max(planned - held, len(compacted))
    else:
        rounds_end = rounds_b + (rounds_b / rounds_completed * left if rounds_completed else 0.0)
    db_end = db + (db / rounds_completed * left if rounds_completed else 0.0)
    projected = ck_init + ck_opt + kept * ck_each + rounds_end + db_end
    return {"used_bytes": used, "total_bytes": sum(used.values()), "projected_bytes": int(projected),
            "checkpoints_kept_at_end": kept, "checkpoint_bytes_each": ck_each, "planned_rounds": planned}


def free_space(paths: RunPaths) -> dict[str, Any] | None:
    """{"path", "free_bytes", "total_bytes"} of the file system holding the run directory; None if unknown."""
    got = fs_free(str(paths.root))
    return None if got is None else {"path": str(paths.root), "free_bytes": got[0], "total_bytes": got[1]}


def full_disk(cfg: Config, free: dict[str, Any] | None) -> str | None:
    """The line for a disk with less free than `alerts.min_free_mb` (`free`: `free_space`), else None."""
    if free is None or free["free_bytes"] >= cfg.alerts.min_free_mb * 1e6:
        return None
    return (f"the disk is full: {human_bytes(free['free_bytes'])} free of {human_bytes(free['total_bytes'])} on the "
            f"file system holding {free['path']} (under alerts.min_free_mb {cfg.alerts.min_free_mb:g}); free space "
            f"there (or move the runs directory to a larger disk)")
