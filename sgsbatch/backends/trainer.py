"""The DeepSpeed trainer used by the train phase and by warm-up (REINFORCE-1/2, CISPO, the GRPO family).

Covered: loading HF weights, `deepspeed.initialize` with a torch AdamW client optimizer
(constant LR, no scheduler; fresh, or carried from the role's last round: backends/optimizer_state.py),
gradient clipping, ZeRO stage from settings; on CPU a gloo process group of world size 1 on a free port; under a multi-rank launch (WORLD_SIZE > 1) each
optimizer step's examples (or CISPO groups) are sharded across ranks, ranks short of work run
zero-weight dummy micro-batches so collectives stay in lockstep. One epoch, deterministic
order (seeded shuffle; CISPO keeps groups whole, never split across optimizer steps).
Preemption: after each optimizer step `should_stop()` is polled; if true, a DeepSpeed checkpoint
plus progress file go to `state_dir` and `TrainingInterrupted` is raised; the same call later
resumes and ends with bitwise-identical weights. Progress: rank 0 logs one line per optimizer step
(step, loss, completion tokens, step time) and every rank calls `on_step(TrainStep)` after it (the
step's statistics, gradient norm and learning rate: backends/train_steps.py).
Collectives: `collective_timeout_s` is the process group's timeout (NCCL with
TORCH_NCCL_ASYNC_ERROR_HANDLING=1, or gloo): a rank waiting that long for a dead or hung peer fails
instead of waiting for the time limit. Export: HF weights + tokenizer into `out_dir`
atomically, with the `TrainResult` stored beside them (a finished `out_dir` is not retrained;
loading, carrying and exporting weights live in backends/weights.py).

Objectives (reinforce, cispo, grpo, dr_grpo, dapo, gspo): backends/objectives.py, the loss of
each example from this module's forward pass; per-step factors in backends/batches.py.

KL and old log-probs: with `kl_beta > 0` (the GRPO family) the reference policy's logprobs, and with
`old_logprobs = "recompute"` the starting weights' own, are computed once per call before the first
update (backends/reference.py), also on resume, from the same weights on disk.

Not covered: LR schedules, an entropy term (the spec has none), multi-node tests.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from sgsbatch.backends.batches import (
    OBJECTIVES,
    Example,
    TrainResult,
    TrainSettings,
    fingerprint,
    group_indices,
    loss_scales,
    plan_steps,
    rank_shares,
    step_lr,
)
from sgsbatch.backends.objectives import STATS, example_loss, result_stats, scaled_sum
from sgsbatch.backends.optimizer_state import carry_in, save_state
from sgsbatch.backends.reference import (
    autocast_for,
    needs_old,
    needs_ref,
    rank_examples,
    reference_scores,
    same_weights,
    score,
    with_scores,
)
from sgsbatch.backends.reference import completion_logits as _completion_logits
from sgsbatch.backends.train_steps import (
    TrainStep,
    computes_grad_norm,
    deepspeed_grad_norm,
    module_grad_norm,
    step_report,
)
from sgsbatch.backends.weights import (
    carry_weights,
    export_weights,
    load_for_training,
    resolve_weights,
    stored_result,
)
from sgsbatch.run.token_arrays import Ids

__all__ = ["OBJECTIVES", "Example", "TrainResult", "TrainSettings", "TrainStep", "TrainingInterrupted", "batch_loss",
           "completion_logprobs", "group_indices", "loss_scales", "plan_steps", "train"]
log = logging.getLogger(__name__)
PROGRESS = "progress.json"
STEP_SLEEP_ENV = "SGSBATCH_TRAIN_STEP_SLEEP_S"  # test aid: seconds to wait after each optimizer step


class TrainingInterrupted(Exception):
    """Raised after a resumable checkpoint was saved because `should_stop()` returned true;
    `checkpoint_s` is how long that save took (the canary compares it with signal_delay_s)."""

    def __init__(self, message: str, checkpoint_s: float = 0.0) -> None:
        super().__init__(message)
        self.checkpoint_s = checkpoint_s


def completion_logprobs(model: Any, prompt_ids: Ids, completion_ids: Ids) -> Any:
    """log p(completion token t | prefix) under `model`, one value per completion token."""
    import torch

    logits, target = _completion_logits(model, prompt_ids, completion_ids)
    return torch.log_softmax(logits, dim=-1).gather(1, target)[:, 0]


def _example_loss(model: Any, ex: Example, scale: float, settings: TrainSettings) -> tuple[Any, list[float]]:
    """The example's loss term and its statistics (objectives.STATS, no gradient)."""
    logits, target = _completion_logits(model, ex.prompt_ids, ex.completion_ids)
    return example_loss(logits, target, ex, scale, settings)


def batch_loss(model: Any, examples: Sequence[Example], objective: str, clip_max: float = 4.0,
               settings: TrainSettings | None = None) -> Any:
    """The loss of one optimizer step holding all of `examples` (pure torch; for tests and checks)."""
    settings = settings or TrainSettings(objective=objective, cispo_clip_max=clip_max)
    return scaled_sum(examples, settings, lambda i: _example_loss(model, examples[i], 1.0, settings)[0])


# ----------------------------------------------------------------------------- distributed


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1 (two trainings may share a node)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _init_distributed(on_gpu: bool, timeout_s: float | None = None) -> None:
    """Join the ranks the launcher started (RANK/WORLD_SIZE set), or a world of one; collectives
    fail after `timeout_s` (None: DeepSpeed's default) instead of waiting for a lost peer forever."""
    import deepspeed
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if on_gpu:
        import torch

        # NCCL's watchdog aborts a collective that outlives the timeout and ends the process
        os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if "WORLD_SIZE" not in os.environ:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(free_port())
        os.environ["RANK"] = "0"
        os.environ["WORLD_SIZE"] = "1"
        os.environ["LOCAL_RANK"] = "0"
    kwargs = {} if timeout_s is None else {"timeout": timedelta(seconds=timeout_s)}
    deepspeed.init_distributed(dist_backend="nccl" if on_gpu else "gloo", verbose=False, **kwargs)


def _ds_config(settings: TrainSettings, world: int) -> dict[str, Any]:
    if settings.zero_stage not in (0, 1, 2):
        raise ValueError(f"zero_stage {settings.zero_stage} is not supported (0, 1, 2): ZeRO-3 partitions the "
                         "weights and the export does not gather them")
    return {
        "train_micro_batch_size_per_gpu": settings.micro_batch_size,
        "gradient_accumulation_steps": 1,  # boundaries are set by hand (variable step sizes)
        "train_batch_size": settings.micro_batch_size * world,
        "gradient_clipping": settings.grad_clip,
        "zero_optimization": {"stage": settings.zero_stage},
        # keep_fp32_master: fp32 weights and optimizer, bf16 autocast in the forward (ours)
        "bf16": {"enabled": settings.bf16 and not settings.keep_fp32_master},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


# ----------------------------------------------------------------------------- training


def train(
    model_dir: Path | str,
    out_dir: Path,
    examples: Sequence[Example],
    settings: TrainSettings,
    *,
    state_dir: Path,
    should_stop: Callable[[], bool] = lambda: False,
    on_step: Callable[[TrainStep], None] = lambda step: None,
    collective_timeout_s: float | None = None,
    optimizer_in: Path | None = None,
    optimizer_out: Path | None = None,
) -> TrainResult:
    """Train one epoch over `examples` from `model_dir`; export to `out_dir` (see module docs).

    `model_dir` may be a hub id only when there is nothing to train (the weights are carried).
    `collective_timeout_s` applies to the process group this call creates (the first call of a process).
    `optimizer_in`: a carried optimizer state (backends/optimizer_state.py) to start from instead of a fresh
    AdamW, used when it belongs to `model_dir`'s weights; a mid-call resume from `state_dir` wins over it.
    `optimizer_out`: where to publish the optimizer state at the end, before the weights are exported.
    """
    out_dir, state_dir = Path(out_dir), Path(state_dir)
    stored = stored_result(out_dir)
    if stored is not None:
        return stored
    if not examples:
        result = TrainResult(steps=0, sequences=0, target_tokens=0, mean_loss=0.0)
        if int(os.environ.get("RANK", "0")) == 0:
            carry_weights(model_dir, out_dir, result)
        return result
    if any(len(ex.prompt_ids) == 0 or len(ex.completion_ids) == 0 for ex in examples):
        raise ValueError("every example needs a non-empty prompt and completion")
    run = _Epoch(resolve_weights(model_dir), out_dir, examples, settings, state_dir, collective_timeout_s)
    try:
        run.score()
        done = run.resume(optimizer_in)
        run.steps_from(done, should_stop, on_step)
        return run.publish(optimizer_out)
    finally:
        _free(run.engine, run.on_gpu)


class _Epoch:
    """One `train` call's state: the DeepSpeed engine over the policy, its examples with their scores, the
    optimizer steps planned; one method per stage (score, resume, the steps, publish)."""

    def __init__(self, model_dir: Path, out_dir: Path, examples: Sequence[Example], settings: TrainSettings,
                 state_dir: Path, collective_timeout_s: float | None) -> None:
        import torch

        self.model_dir, self.out_dir, self.settings, self.state_dir = model_dir, out_dir, settings, state_dir
        self.examples = examples
        self.steps = plan_steps(examples, settings)
        self.on_gpu = torch.cuda.is_available()
        if not self.on_gpu:
            os.environ.setdefault("DS_ACCELERATOR", "cpu")  # before the first `import deepspeed`
        if settings.threads is not None:
            torch.set_num_threads(settings.threads)
        import deepspeed
        import torch.distributed as dist

        _init_distributed(self.on_gpu, collective_timeout_s)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(settings.seed)
        device = torch.device("cuda", torch.cuda.current_device()) if self.on_gpu else torch.device("cpu")
        self.fp = fingerprint(model_dir, examples, settings)  # of the examples as given (scores recomputed on resume)
        self.mine = (rank_examples(examples, self.steps, settings, self.rank, self.world)
                     if needs_old(settings) or needs_ref(settings) else [])
        # the reference's logprobs first, its copy freed before the policy loads (backends/reference.py)
        reference = resolve_weights(settings.kl_reference) if needs_ref(settings) and settings.kl_reference else None
        if needs_ref(settings) and reference is None:
            raise ValueError("kl_beta > 0 needs kl_reference (the reference policy's weights)")
        self.shared_ref = reference is not None and needs_old(settings) and same_weights(reference, model_dir)
        self.ref = (reference_scores(reference, examples, self.mine, settings, device)
                    if reference and not self.shared_ref else None)
        model = load_for_training(model_dir, settings, device)
        model.config.use_cache = False
        if settings.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        model.train()
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=settings.lr, betas=settings.betas, weight_decay=settings.weight_decay
        )
        self.engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer,
                                               config=_ds_config(settings, self.world))
        self.loss_sum, self.stats = 0.0, [0.0] * len(STATS)

    def score(self) -> None:
        """pi_old (the weights this call starts from, before any update or checkpoint) and the reference's
        log-probs attached to the examples, as the objective needs them."""
        if needs_old(self.settings):
            t0 = time.monotonic()
            old = score(self.engine.module, self.examples, self.mine, self.settings)
            log.info("train %s: old log-probs of %d examples recomputed in %.1f s", self.out_dir.name,
                     len(self.mine), time.monotonic() - t0)
            self.examples = with_scores(self.examples, old, old if self.shared_ref else self.ref)
        elif self.ref is not None:
            self.examples = with_scores(self.examples, None, self.ref)
        log.info("train %s: rank %d of %d, %d examples (fingerprint %s), %d optimizer steps", self.out_dir.name,
                 self.rank, self.world, len(self.examples), self.fp[:16], len(self.steps))

    def resume(self, optimizer_in: Path | None) -> int:
        """The optimizer steps already done: from this call's own checkpoint in `state_dir` when it is of the
        same call (fingerprint), else 0 (a carried optimizer state loaded, if given)."""
        done = 0
        progress_file = self.state_dir / PROGRESS
        if progress_file.is_file():
            progress = json.loads(progress_file.read_text())
            if progress.get("fingerprint") == self.fp:
                self.engine.load_checkpoint(str(self.state_dir), tag=progress["tag"])
                done, self.loss_sum = int(progress["steps"]), float(progress["loss_sum"])
                self.stats = [float(x) for x in progress.get("stats", self.stats)]
                log.info("resuming %s at optimizer step %d/%d", self.out_dir.name, done, len(self.steps))
            else:  # a checkpoint of some other call (other data, settings or weights): start afresh
                _clear_state(self.state_dir)
        if done == 0 and optimizer_in is not None:
            carry_in(self.engine, Path(optimizer_in), self.model_dir, self.settings, self.out_dir.name,
                     ranks=self.world)
        return done

    def steps_from(self, done: int, should_stop: Callable[[], bool], on_step: Callable[[TrainStep], None]) -> None:
        """The optimizer steps after `done`; a stop agreed by every rank saves a checkpoint and raises
        TrainingInterrupted."""
        sleep_s = float(os.environ.get(STEP_SLEEP_ENV, "0") or 0)
        total = len(self.steps)
        for step_no in range(done, total):
            on_step(self._step(step_no))
            if sleep_s:
                time.sleep(sleep_s)
            finished = step_no + 1
            if finished < total and _agree_stop(should_stop(), self.engine.device):
                t0 = time.monotonic()
                _save_progress(self.engine, self.state_dir, self.fp, finished, self.loss_sum, self.stats, self.rank)
                save_s = time.monotonic() - t0
                log.info("checkpoint of step %d saved in %.1f s", finished, save_s)
                raise TrainingInterrupted(f"stopped after optimizer step {finished}/{total}", save_s)

    def _step(self, step_no: int) -> TrainStep:
        t0 = time.monotonic()
        settings, engine = self.settings, self.engine
        for group in engine.optimizer.param_groups:  # the warm-up (solver.lr_warmup_steps), or lr as set
            group["lr"] = step_lr(settings, step_no + 1)
        lr = float(engine.get_lr()[0])  # before the step: the LR this step uses
        (step_loss, *step_stats), grad_norm = _optimizer_step(engine, self.examples, self.steps[step_no], settings,
                                                              self.rank, self.world)
        report = step_report(step_no + 1, len(self.steps), step_loss, step_stats, len(self.steps[step_no]),
                             time.monotonic() - t0, settings.objective, grad_norm, lr, ref_kl=needs_ref(settings))
        self.loss_sum += step_loss
        self.stats = [a + b for a, b in zip(self.stats, step_stats, strict=True)]
        if self.rank == 0:
            log.info("train %s: optimizer step %d/%d loss %.6g tokens %d step %.2f s", self.out_dir.name,
                     step_no + 1, len(self.steps), step_loss, report.tokens, report.step_s)
        return report

    def publish(self, optimizer_out: Path | None) -> TrainResult:
        """The result; the optimizer state (if asked) then the weights written, this call's checkpoint cleared."""
        import torch.distributed as dist

        result = TrainResult(len(self.steps), len(self.examples), sum(len(ex.completion_ids) for ex in self.examples),
                             mean_loss=self.loss_sum / len(self.steps), objective=self.settings.objective,
                             **result_stats(self.stats))
        if optimizer_out is not None:  # before the weights: complete weights imply their optimizer state
            save_state(self.engine, Path(optimizer_out), self.out_dir, len(self.steps), self.rank)
        if self.rank == 0:
            export_weights(self.engine.module, self.model_dir, self.out_dir, result, self.settings)
            _clear_state(self.state_dir)
        dist.barrier()
        return result


def _free(engine: Any, on_gpu: bool) -> None:
    """Release the engine's weights and optimizer before the next role loads its own."""
    destroy = getattr(engine, "destroy", None)
    if callable(destroy):
        destroy()
    del engine
    gc.collect()
    if on_gpu:
        import torch

        torch.cuda.empty_cache()


def _optimizer_step(
    engine: Any, examples: Sequence[Example], step: list[int], settings: TrainSettings, rank: int, world: int
) -> tuple[list[float], float | None]:
    """One optimizer step over `step` (global example indices); returns the global
    [step loss, *objectives.STATS] and the gradient norm before clipping (backends/train_steps.py)."""
    import torch
    import torch.distributed as dist

    scales = loss_scales(examples, step, settings.objective, settings.batch_size)
    shares = rank_shares(examples, step, settings.objective, world, settings.kl_beta)
    local = shares[rank]
    mbs = settings.micro_batch_size
    n_micro = max(1, -(-max(len(s) for s in shares) // mbs))
    acc = [0.0] * (1 + len(STATS))  # loss, then objectives.STATS
    norm: float | None = None
    for m in range(n_micro):
        chunk = local[m * mbs : (m + 1) * mbs]
        engine.set_gradient_accumulation_boundary(m == n_micro - 1)
        loss: Any = None
        with autocast_for(settings, engine.device):
            if chunk:
                for i in chunk:
                    term, stats = _example_loss(engine.module, examples[i], scales[i], settings)
                    loss = term if loss is None else loss + term
                    for k, v in enumerate(stats, start=1):
                        acc[k] += v
            else:  # dummy micro-batch keeps this rank's collectives in step with the others
                ex = examples[step[0]]
                loss = 0.0 * completion_logprobs(engine.module, ex.prompt_ids, ex.completion_ids).sum()
        acc[0] += float(loss.detach())
        # ZeRO averages gradients over ranks: scale by world so the result is the global sum.
        engine.backward(loss * world, scale_wrt_gas=False)
        if m == n_micro - 1 and not computes_grad_norm(engine):  # stage 0 fp32: the clip discards the norm
            norm = module_grad_norm(engine.module)
        engine.step()
    if computes_grad_norm(engine):
        norm = deepspeed_grad_norm(engine)
    total = torch.tensor(acc, dtype=torch.float64, device=engine.device)
    if world > 1:
        dist.all_reduce(total)
    return [float(x) for x in total], norm


def _agree_stop(flag: bool, device: Any) -> bool:
    """True on every rank when any rank's `should_stop()` said so."""
    import torch
    import torch.distributed as dist

    if dist.get_world_size() == 1:
        return flag
    t = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def _save_progress(engine: Any, state_dir: Path, fp: str, steps: int, loss_sum: float, stats: list[float],
                   rank: int) -> None:
    import torch.distributed as dist

    state_dir.mkdir(parents=True, exist_ok=True)
    tag = f"step{steps:06d}"
    engine.save_checkpoint(str(state_dir), tag=tag)
    dist.barrier()
    if rank == 0:
        tmp = state_dir / f".{PROGRESS}.tmp"
        data = {"fingerprint": fp, "tag": tag, "steps": steps, "loss_sum": loss_sum, "stats": stats}
        tmp.write_text(json.dumps(data) + "\n")
        os.replace(tmp, state_dir / PROGRESS)  # the commit point of the checkpoint
        for old in state_dir.glob("step*"):
            if old.is_dir() and old.name != tag:
                shutil.rmtree(old, ignore_errors=True)
    dist.barrier()


def _clear_state(state_dir: Path) -> None:
    if not state_dir.is_dir():
        return
    (state_dir / PROGRESS).unlink(missing_ok=True)
    for old in state_dir.glob("step*"):
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    for name in ("latest", "zero_to_fp32.py", "zero_to_torch.py"):
        (state_dir / name).unlink(missing_ok=True)
