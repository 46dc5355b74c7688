"""Which weights a role uses in a round, and which old weights may be deleted.

Round r samples with the newest finished checkpoint of the role from before round r; a role
that was never trained (the Guide always; the Conjecturer in the frozen ablation) uses its
base weights: `checkpoints/init/<role>` for `tiny-random` (built by the init phase), otherwise
the configured hub id or path, loaded as is. A checkpoint counts once its completion marker
exists (models/tiny.py: written last). Retention keeps the last `keep_last` rounds and every `keep_every`-th.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sgsbatch.config import TINY_RANDOM, Config
from sgsbatch.models.tiny import is_complete
from sgsbatch.paths import RunPaths

ROLES = ("solver", "conjecturer", "guide")


def base_weights(cfg: Config, paths: RunPaths, role: str) -> str:
    name: str = getattr(cfg.models, role)
    return str(paths.checkpoint(None, role)) if name == TINY_RANDOM else name


def weights_for(cfg: Config, paths: RunPaths, role: str, r: int) -> str:
    """The weights `role` samples with in round r."""
    for prev in range(r - 1, -1, -1):
        ck = paths.checkpoint(prev, role)
        if is_complete(ck):
            return str(ck)
    return base_weights(cfg, paths, role)


def retained(cfg: Config, r: int, newest: int) -> bool:
    keep = cfg.checkpoints
    return newest - r < keep.keep_last or (keep.keep_every > 0 and (r + 1) % keep.keep_every == 0)


def prune(cfg: Config, paths: RunPaths, newest: int) -> list[Path]:
    """Delete round checkpoints the retention policy drops; returns what was deleted."""
    deleted: list[Path] = []
    root = paths.checkpoints_dir()
    if not root.exists():
        return deleted
    for d in sorted(root.glob("r[0-9]*")):
        r = int(d.name[1:])
        if r < newest and not retained(cfg, r, newest):
            shutil.rmtree(d)
            deleted.append(d)
    return deleted
