"""Which weights a role uses in a round, and which old weights may be deleted.

Round r samples with the role's weights after round r-1 (an error if they are missing); a role
that is never trained (the Guide always; the Conjecturer in the frozen ablation) uses its
base weights: `checkpoints/init/<role>` for `tiny-random` (built by the init phase), otherwise
the configured hub id or path, loaded as is. A checkpoint counts once its completion marker
exists (run/checkpoint.py: written last). Retention keeps the last `keep_last` rounds and every `keep_every`-th,
and a round whose held-out evaluation job has not finished.
A role's carried optimizer states (train.optimizer = "carry", backends/optimizer_state.py): the newest
published one before round r is what round r starts from; only the newest is kept once a round ends.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sgsbatch.config.schema import TINY_RANDOM, Config
from sgsbatch.run.checkpoint import is_complete
from sgsbatch.run.paths import RunPaths

ROLES = ("solver", "conjecturer", "guide")


def base_weights(cfg: Config, paths: RunPaths, role: str) -> str:
    name: str = getattr(cfg.models, role)
    return str(paths.checkpoint(None, role)) if name == TINY_RANDOM else name


def trained_every_round(cfg: Config, role: str) -> bool:
    if role == "solver":
        return cfg.solver.train
    return role == "conjecturer" and cfg.conjecturer.enabled and cfg.conjecturer.train


def weights_for(cfg: Config, paths: RunPaths, role: str, r: int) -> str:
    """The weights `role` samples with (or trains from) in round r.

    A role trained every round needs exactly round r-1's weights: a missing checkpoint is an
    error, never a silent fallback to older weights.
    """
    if r == 0 or not trained_every_round(cfg, role):
        return base_weights(cfg, paths, role)
    ck = paths.checkpoint(r - 1, role)
    if not is_complete(ck):
        raise FileNotFoundError(f"{role} weights after round {r - 1} are missing or incomplete at {ck}; "
                                f"round {r} cannot start without them: restore that directory (with its "
                                f"SGSBATCH_COMPLETE marker), then `sgsbatch resume`")
    return str(ck)


def retained(cfg: Config, r: int, newest: int) -> bool:
    keep = cfg.checkpoints
    return newest - r < keep.keep_last or (keep.keep_every > 0 and (r + 1) % keep.keep_every == 0)


def awaiting_evaluation(cfg: Config, paths: RunPaths, r: int) -> bool:
    """An evaluation job was submitted for round r's weights (eval/r000N/job.json) and a set it evaluates has
    no completion marker yet: a queued or running job (or one that failed: `sgsbatch eval RUN --round r`
    completes it, and the next prune deletes the weights). An unreadable record counts as waiting."""
    record = paths.eval_job(r)
    if not record.is_file():
        return False
    try:
        only = json.loads(record.read_text()).get("set")
    except (OSError, ValueError, AttributeError):
        return True
    names = [only] if isinstance(only, str) else list(cfg.eval.sets)
    return any(not paths.eval_done(r, name).is_file() for name in names)


def prune(cfg: Config, paths: RunPaths, newest: int) -> list[Path]:
    """Delete round checkpoints the retention policy drops, except those an evaluation job still needs
    (`awaiting_evaluation`); returns what was deleted."""
    deleted: list[Path] = []
    root = paths.checkpoints_dir()
    if not root.exists():
        return deleted
    for d in sorted(root.glob("r[0-9]*")):
        r = int(d.name[1:])
        if r < newest and not retained(cfg, r, newest) and not awaiting_evaluation(cfg, paths, r):
            shutil.rmtree(d)
            deleted.append(d)
    return deleted


def optimizer_state_for(paths: RunPaths, role: str, r: int) -> Path | None:
    """The newest published optimizer state of `role` saved before round r (None: none, a fresh AdamW).
    Older than r - 1 when the role had nothing to train since; the trainer checks it belongs to the
    weights it starts from (backends/optimizer_state.state_matches)."""
    root = paths.optimizer_states(role)
    if not root.is_dir():
        return None
    done = [d for d in root.glob("r[0-9]*") if d.name[1:].isdigit() and int(d.name[1:]) < r and is_complete(d)]
    return max(done, key=lambda d: int(d.name[1:]), default=None)


def prune_optimizer_states(paths: RunPaths, keep_newest: bool = True) -> list[Path]:
    """Delete each role's optimizer states but its newest published one (all of them with `keep_newest`
    false: train.optimizer = "fresh"), and staging leftovers; at a round's end, when no training runs.
    Returns what was deleted."""
    deleted: list[Path] = []
    root = paths.checkpoints_dir() / "optimizer"
    if not root.is_dir():
        return deleted
    for role_dir in sorted(d for d in root.iterdir() if d.is_dir()):
        newest = optimizer_state_for(paths, role_dir.name, 1 << 30) if keep_newest else None
        for d in sorted(role_dir.iterdir()):
            if d.is_dir() and d != newest:
                shutil.rmtree(d, ignore_errors=True)
                deleted.append(d)
    return deleted
