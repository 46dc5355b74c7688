"""The DeepSpeed trainer used by the train phase and by warm-up (REINFORCE-1/2 and CISPO).

Covered: loading HF weights, `deepspeed.initialize` with a torch AdamW client optimizer
(constant LR, no scheduler), gradient clipping, ZeRO stage from settings; on CPU a gloo
process group of world size 1 on a free port; under a multi-rank launch (WORLD_SIZE > 1) each
optimizer step's examples (or CISPO groups) are sharded across ranks, ranks short of work run
zero-weight dummy micro-batches so collectives stay in lockstep. One epoch, deterministic
order (seeded shuffle; CISPO keeps groups whole, never split across optimizer steps).
Preemption: after each optimizer step `should_stop()` is polled; if true, a DeepSpeed checkpoint
plus progress file go to `state_dir` and `TrainingInterrupted` is raised; the same call later
resumes and ends with bitwise-identical weights. Export: HF weights + tokenizer into `out_dir`
atomically, with the `TrainResult` stored beside them (a finished `out_dir` is not retrained).

Objectives (per optimizer step S, T_x = completion tokens of sequence x, NLL per token):
- reinforce: loss = sum_{x in S} weight_x * sum_t NLL_{x,t} / sum_{x in S} T_x
- cispo: loss = mean over groups g in S of A_g * sum_{x in g, t} w_{x,t} NLL_{x,t} / T_g with
  w = clamp(exp(logp_train - logp_sampler), 0, cispo_clip_max), detached; A_g = `weight`.

Not covered: LR schedules, KL/entropy terms (the spec has none), multi-node tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import socket
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sgsbatch.run.checkpoint import is_complete, publish_dir, read_marker, staging_dir

OBJECTIVES = ("reinforce", "cispo")
PROGRESS = "progress.json"
RESULT = "train_result.json"


@dataclass(frozen=True)
class TrainSettings:
    lr: float = 3e-6
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    batch_size: int = 32  # sequences per optimizer step
    micro_batch_size: int = 1
    zero_stage: int = 2
    bf16: bool = False
    gradient_checkpointing: bool = False
    seed: int = 0
    objective: str = "reinforce"  # "reinforce" | "cispo"
    cispo_clip_max: float = 4.0
    threads: int | None = None


@dataclass
class Example:
    prompt_ids: list[int]
    completion_ids: list[int]
    weight: float  # REINFORCE weight, or the group's advantage A for CISPO
    group: int | None = None
    sampler_logprobs: list[float] | None = None


@dataclass
class TrainResult:
    steps: int
    sequences: int
    target_tokens: int
    mean_loss: float


class TrainingInterrupted(Exception):
    """Raised after a resumable checkpoint was saved because `should_stop()` returned true."""


# ----------------------------------------------------------------------------- pure logic


def plan_steps(examples: Sequence[Example], settings: TrainSettings) -> list[list[int]]:
    """Example indices of each optimizer step, in order (deterministic from settings.seed).

    reinforce: shuffled examples in chunks of batch_size. cispo: shuffled whole groups packed
    greedily up to batch_size sequences (a group larger than batch_size is a step on its own).
    """
    if settings.objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {settings.objective!r}; valid: {', '.join(OBJECTIVES)}")
    rng = random.Random(settings.seed)
    if settings.objective == "reinforce":
        order = list(range(len(examples)))
        rng.shuffle(order)
        bs = settings.batch_size
        return [order[i : i + bs] for i in range(0, len(order), bs)]
    groups = group_indices(examples)
    rng.shuffle(groups)
    steps: list[list[int]] = []
    current: list[int] = []
    for g in groups:
        if current and len(current) + len(g) > settings.batch_size:
            steps.append(current)
            current = []
        current = current + g
    if current:
        steps.append(current)
    return steps


def group_indices(examples: Sequence[Example]) -> list[list[int]]:
    """Indices grouped by `Example.group` in first-seen order; group None = a group of its own."""
    by_key: dict[Any, list[int]] = {}
    for i, ex in enumerate(examples):
        key = ("solo", i) if ex.group is None else ("group", ex.group)
        by_key.setdefault(key, []).append(i)
    return list(by_key.values())


def loss_scales(examples: Sequence[Example], step: Sequence[int], objective: str) -> dict[int, float]:
    """Per-example factor c_x so that the step loss = sum_x c_x * sum_t (w_t) NLL_{x,t}."""
    if objective == "reinforce":
        total = sum(len(examples[i].completion_ids) for i in step)
        return {i: examples[i].weight / max(total, 1) for i in step}
    groups = group_indices([examples[i] for i in step])
    scales: dict[int, float] = {}
    for g in groups:
        members = [step[j] for j in g]
        tokens = sum(len(examples[i].completion_ids) for i in members)
        for i in members:
            scales[i] = examples[i].weight / max(tokens, 1) / len(groups)
    return scales


def completion_logprobs(model: Any, prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> Any:
    """log p(completion token t | prefix) under `model`, one value per completion token."""
    import torch

    ids = torch.tensor([list(prompt_ids) + list(completion_ids)], dtype=torch.long, device=model.device)
    logits = model(input_ids=ids, use_cache=False).logits[0, len(prompt_ids) - 1 : -1].float()
    target = ids[0, len(prompt_ids) :]
    return torch.log_softmax(logits, dim=-1).gather(1, target[:, None])[:, 0]


def sequence_loss(logp: Any, example: Example, scale: float, objective: str, clip_max: float) -> Any:
    """scale * sum_t NLL_t (reinforce) or scale * sum_t w_t NLL_t with detached clamped w (cispo)."""
    import torch

    nll = -logp
    if objective == "cispo":
        if example.sampler_logprobs is None or len(example.sampler_logprobs) != len(example.completion_ids):
            raise ValueError("cispo needs sampler_logprobs, one per completion token")
        old = torch.tensor(example.sampler_logprobs, dtype=logp.dtype, device=logp.device)
        w = torch.exp(logp.detach() - old).clamp(0.0, clip_max)
        return scale * (w * nll).sum()
    return scale * nll.sum()


def batch_loss(model: Any, examples: Sequence[Example], objective: str, clip_max: float = 4.0) -> Any:
    """The loss of one optimizer step holding all of `examples` (pure torch; for tests and checks)."""
    step = list(range(len(examples)))
    scales = loss_scales(examples, step, objective)
    total: Any = 0.0
    for i in step:
        ex = examples[i]
        logp = completion_logprobs(model, ex.prompt_ids, ex.completion_ids)
        total = total + sequence_loss(logp, ex, scales[i], objective, clip_max)
    return total


def fingerprint(model_dir: Path, examples: Sequence[Example], settings: TrainSettings) -> str:
    """Identifies a training call, so a checkpoint is only resumed by the same call."""
    h = hashlib.sha256()
    h.update(str(Path(model_dir).resolve()).encode())
    h.update(json.dumps(asdict(settings), sort_keys=True).encode())
    for ex in examples:
        h.update(json.dumps(asdict(ex)).encode())
    return h.hexdigest()


# ----------------------------------------------------------------------------- distributed


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1 (two trainings may share a node)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _init_distributed(on_gpu: bool) -> None:
    import deepspeed
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if on_gpu:
        import torch

        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if "WORLD_SIZE" not in os.environ:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(free_port())
        os.environ["RANK"] = "0"
        os.environ["WORLD_SIZE"] = "1"
        os.environ["LOCAL_RANK"] = "0"
    deepspeed.init_distributed(dist_backend="nccl" if on_gpu else "gloo", verbose=False)


def _ds_config(settings: TrainSettings, world: int) -> dict[str, Any]:
    return {
        "train_micro_batch_size_per_gpu": settings.micro_batch_size,
        "gradient_accumulation_steps": 1,  # boundaries are set by hand (variable step sizes)
        "train_batch_size": settings.micro_batch_size * world,
        "gradient_clipping": settings.grad_clip,
        "zero_optimization": {"stage": settings.zero_stage},
        "bf16": {"enabled": settings.bf16},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


# ----------------------------------------------------------------------------- training


def _copy_weights(model_dir: Path, out_dir: Path, result: TrainResult) -> None:
    tmp = staging_dir(out_dir)
    shutil.rmtree(tmp)
    shutil.copytree(model_dir, tmp, ignore=shutil.ignore_patterns("SGSBATCH_COMPLETE"))
    (tmp / RESULT).write_text(json.dumps(asdict(result)) + "\n")
    publish_dir(tmp, out_dir, {"kind": "trained", "result": asdict(result)})


def _stored_result(out_dir: Path) -> TrainResult | None:
    if not is_complete(out_dir):
        return None
    marker = read_marker(out_dir)
    if "result" not in marker:
        raise FileExistsError(f"{out_dir} exists and holds no training result")
    return TrainResult(**marker["result"])


def train(
    model_dir: Path,
    out_dir: Path,
    examples: Sequence[Example],
    settings: TrainSettings,
    *,
    state_dir: Path,
    should_stop: Callable[[], bool] = lambda: False,
) -> TrainResult:
    """Train one epoch over `examples` from `model_dir`; export to `out_dir` (see module docs)."""
    model_dir, out_dir, state_dir = Path(model_dir), Path(out_dir), Path(state_dir)
    stored = _stored_result(out_dir)
    if stored is not None:
        return stored
    steps = plan_steps(examples, settings)
    target_tokens = sum(len(ex.completion_ids) for ex in examples)
    if not examples:
        result = TrainResult(steps=0, sequences=0, target_tokens=0, mean_loss=0.0)
        _copy_weights(model_dir, out_dir, result)
        return result
    if any(not ex.prompt_ids or not ex.completion_ids for ex in examples):
        raise ValueError("every example needs a non-empty prompt and completion")
    import torch

    on_gpu = torch.cuda.is_available()
    if not on_gpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # before the first `import deepspeed`
    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    import deepspeed
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _init_distributed(on_gpu)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(settings.seed)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model.config.use_cache = False
    if settings.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=settings.lr, betas=settings.betas, weight_decay=settings.weight_decay
    )
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=_ds_config(settings, world))

    fp = fingerprint(model_dir, examples, settings)
    done_steps, loss_sum = 0, 0.0
    progress_file = state_dir / PROGRESS
    if progress_file.is_file():
        progress = json.loads(progress_file.read_text())
        if progress.get("fingerprint") == fp:
            engine.load_checkpoint(str(state_dir), tag=progress["tag"])
            done_steps, loss_sum = int(progress["steps"]), float(progress["loss_sum"])
        else:  # a checkpoint of some other call (other data, settings or weights): start afresh
            _clear_state(state_dir)

    for step_no in range(done_steps, len(steps)):
        loss_sum += _optimizer_step(engine, examples, steps[step_no], settings, rank, world)
        finished = step_no + 1
        if finished < len(steps) and _agree_stop(should_stop(), engine.device):
            _save_progress(engine, state_dir, fp, finished, loss_sum, rank)
            raise TrainingInterrupted(f"stopped after optimizer step {finished}/{len(steps)}")

    result = TrainResult(len(steps), len(examples), target_tokens, mean_loss=loss_sum / len(steps))
    if rank == 0:
        tmp = staging_dir(out_dir)
        engine.module.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(str(model_dir)).save_pretrained(tmp)
        (tmp / RESULT).write_text(json.dumps(asdict(result)) + "\n")
        publish_dir(tmp, out_dir, {"kind": "trained", "result": asdict(result)})
        _clear_state(state_dir)
    dist.barrier()
    return result


def _optimizer_step(
    engine: Any, examples: Sequence[Example], step: list[int], settings: TrainSettings, rank: int, world: int
) -> float:
    """One optimizer step over `step` (global example indices); returns the global step loss."""
    import torch
    import torch.distributed as dist

    scales = loss_scales(examples, step, settings.objective)
    if settings.objective == "cispo":
        units = [[step[j] for j in g] for g in group_indices([examples[i] for i in step])]
        local = [i for g in units[rank::world] for i in g]
        counts = [sum(len(g) for g in units[r::world]) for r in range(world)]
    else:
        local = step[rank::world]
        counts = [len(step[r::world]) for r in range(world)]
    mbs = settings.micro_batch_size
    n_micro = max(1, -(-max(counts) // mbs))
    local_loss = 0.0
    for m in range(n_micro):
        chunk = local[m * mbs : (m + 1) * mbs]
        engine.set_gradient_accumulation_boundary(m == n_micro - 1)
        loss: Any = None
        if chunk:
            for i in chunk:
                ex = examples[i]
                logp = completion_logprobs(engine.module, ex.prompt_ids, ex.completion_ids)
                term = sequence_loss(logp, ex, scales[i], settings.objective, settings.cispo_clip_max)
                loss = term if loss is None else loss + term
        else:  # dummy micro-batch keeps this rank's collectives in step with the others
            ex = examples[step[0]]
            loss = 0.0 * completion_logprobs(engine.module, ex.prompt_ids, ex.completion_ids).sum()
        local_loss += float(loss.detach())
        # ZeRO averages gradients over ranks: scale by world so the result is the global sum.
        engine.backward(loss * world, scale_wrt_gas=False)
        engine.step()
    total = torch.tensor([local_loss], dtype=torch.float64, device=engine.device)
    if world > 1:
        dist.all_reduce(total)
    return float(total[0])


def _agree_stop(flag: bool, device: Any) -> bool:
    """True on every rank when any rank's `should_stop()` said so."""
    import torch
    import torch.distributed as dist

    if dist.get_world_size() == 1:
        return flag
    t = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def _save_progress(engine: Any, state_dir: Path, fp: str, steps: int, loss_sum: float, rank: int) -> None:
    import torch.distributed as dist

    state_dir.mkdir(parents=True, exist_ok=True)
    tag = f"step{steps:06d}"
    engine.save_checkpoint(str(state_dir), tag=tag)
    dist.barrier()
    if rank == 0:
        tmp = state_dir / f".{PROGRESS}.tmp"
        data = {"fingerprint": fp, "tag": tag, "steps": steps, "loss_sum": loss_sum}
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
