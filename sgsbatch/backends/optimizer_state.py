"""A role's AdamW state carried from one round's training to its next (`train.optimizer = "carry"`).

The SGS reference starts a fresh AdamW every round ("fresh", the default); the GRPO family's papers and
TRL/verl run one optimizer through the whole training ("carry"). With "carry" the trainer saves the
DeepSpeed engine's state (Adam's moments and step counts, ZeRO's fp32 master partitions, and the
module, which DeepSpeed always writes) at the end of a role's training and loads it before the first
update of the role's next trained round, so two rounds train exactly as one uninterrupted run over
both rounds' steps would.

Covered: saving (`save_state`: every rank writes its ZeRO partition into one staging directory next to
the destination, rank 0 publishes it with the checkpoint marker, run/checkpoint.py, so a reader never
sees a partial state), loading (`load_state`: the settings' betas and weight decay win over the saved
ones), whether a state belongs to the weights a call starts from (`state_matches`: the weights it was
saved with, or weights carried unchanged from them through rounds with nothing to train) and was saved by
as many ranks (`ranks_differ`: otherwise a fresh AdamW, logged), and its size
(`optimizer_state_bytes`, `carried_state_bytes`). Not covered: where states live and which are kept
(run/paths.py, round/checkpoints.py), the mid-round stop/resume checkpoint (backends/trainer.py).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from sgsbatch.backends.batches import TrainSettings
from sgsbatch.run.checkpoint import is_complete, publish_dir, read_marker

log = logging.getLogger(__name__)
TAG = "state"  # the DeepSpeed checkpoint tag inside a state directory
KIND = "optimizer"  # the marker's kind


def has_master(zero_stage: int, bf16: bool, keep_fp32_master: bool) -> bool:
    """True when the trainer's optimizer keeps an fp32 master copy of the weights beside the module:
    ZeRO stages 1 and 2 always do (their fp32 partitions, backends/trainer._ds_config), stage 0 does when it
    trains in bf16 (DeepSpeed's bf16 optimizer; with keep_fp32_master the module itself is fp32)."""
    return zero_stage > 0 or (bf16 and not keep_fp32_master)


def optimizer_state_bytes(n_params: int, *, zero_stage: int, bf16: bool, keep_fp32_master: bool) -> int:
    """Bytes of a role's optimizer state for `n_params` parameters, summed over ranks: Adam's two fp32
    moments (8 per parameter) plus the fp32 master (4) when `has_master`."""
    return n_params * (8 + (4 if has_master(zero_stage, bf16, keep_fp32_master) else 0))


def carried_state_bytes(n_params: int, *, zero_stage: int, bf16: bool, keep_fp32_master: bool) -> int:
    """Bytes one carried state takes on disk: `optimizer_state_bytes` plus the module copy DeepSpeed writes
    with it (2 per parameter in bf16, 4 in fp32). During a role's training the previous round's state and
    the new one both exist until the round ends (round/checkpoints.prune_optimizer_states)."""
    module = 2 if bf16 and not keep_fp32_master else 4
    return optimizer_state_bytes(n_params, zero_stage=zero_stage, bf16=bf16,
                                 keep_fp32_master=keep_fp32_master) + n_params * module


def save_state(engine: Any, out_dir: Path, weights: Path, steps: int, rank: int) -> None:
    """Publish the engine's state as `out_dir` (every rank calls this; collective). `weights` is the
    directory the same training exports its weights to, recorded so that the next round can check the
    state belongs to the weights it starts from. A state already at `out_dir` (an earlier try of the same
    round) is replaced only once the new one is complete in its staging directory."""
    import torch.distributed as dist

    tmp = out_dir.parent / f".{out_dir.name}.staging"  # one name on every rank: they write into it together
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()
    engine.save_checkpoint(str(tmp), tag=TAG)
    dist.barrier()
    if rank == 0:
        shutil.rmtree(out_dir, ignore_errors=True)
        publish_dir(tmp, out_dir, {"kind": KIND, "weights": str(Path(weights).resolve()), "steps": steps,
                                   "tag": TAG, "ranks": dist.get_world_size()})
    dist.barrier()


def load_state(engine: Any, state_dir: Path, settings: TrainSettings) -> None:
    """Load a published state into `engine` (module, Adam's moments and step counts, fp32 masters); the
    param groups then take `settings`' betas and weight decay (the LR is set before every step)."""
    assert is_complete(state_dir), f"{state_dir} is not a published optimizer state"
    path, _ = engine.load_checkpoint(str(state_dir), tag=TAG, load_optimizer_states=True,
                                     load_lr_scheduler_states=False)
    if path is None:
        raise FileNotFoundError(f"the optimizer state {state_dir} could not be loaded (DeepSpeed found no "
                                f"checkpoint tagged {TAG!r}); delete that directory to start this round's "
                                "optimizer fresh, then resume")
    for group in engine.optimizer.param_groups:
        group["betas"], group["weight_decay"] = settings.betas, settings.weight_decay


def state_matches(state_dir: Path, model_dir: Path) -> bool:
    """True when the state at `state_dir` was saved by the training that produced `model_dir`, or
    `model_dir` was carried unchanged (a round with nothing to train) from those weights."""
    want = read_marker(state_dir).get("weights")
    d, seen = Path(model_dir), set()
    while str(d.resolve()) not in seen:
        if str(d.resolve()) == want:
            return True
        seen.add(str(d.resolve()))
        if not is_complete(d):
            return False
        marker = read_marker(d)
        if marker.get("kind") != "carried" or "source" not in marker:
            return False
        d = Path(marker["source"])
    return False


def ranks_differ(state_dir: Path, ranks: int) -> int | None:
    """The rank count a published state was saved by, when it is not `ranks` (ZeRO's partitions are per rank
    and DeepSpeed no longer re-shards them: `elastic_checkpoint` is unsupported); None when they agree or
    the state predates the record."""
    saved = read_marker(state_dir).get("ranks")
    return int(saved) if saved is not None and int(saved) != ranks else None


def carry_in(engine: Any, state_dir: Path, model_dir: Path, settings: TrainSettings, name: str,
             ranks: int = 1) -> bool:
    """Load the carried state at `state_dir` into `engine` when it is published, belongs to `model_dir`'s
    weights (`state_matches`) and was saved by as many ranks as this training has (`ranks_differ`: a run
    whose train.gpus or nodes changed); otherwise the engine keeps its fresh AdamW, said in the log. True
    if loaded."""
    if not is_complete(state_dir):
        log.info("train %s: no carried optimizer state at %s: a fresh AdamW", name, state_dir)
        return False
    if not state_matches(state_dir, model_dir):
        log.warning("train %s: the optimizer state %s was saved with other weights than %s: a fresh AdamW",
                    name, state_dir, model_dir)
        return False
    saved = ranks_differ(state_dir, ranks)
    if saved is not None:
        log.warning("train %s: the optimizer state %s was saved by %d ranks, this training has %d (ZeRO's "
                    "partitions do not re-shard): a fresh AdamW", name, state_dir, saved, ranks)
        return False
    load_state(engine, state_dir, settings)
    log.info("train %s: optimizer state carried from %s", name, state_dir)
    return True
