"""Init phase (round 0 only, one task): make the base weights every role starts from.

For `tiny-random` roles: one small random model and tokenizer built offline from the run seed,
then a short supervised warm-up per role on formatted examples the project generates itself, so
that a fair share of samples is well-formed from round 0 on. Hub ids and paths are used as they
are (nothing to do here; vLLM and transformers load them directly in the phases).

Building is deterministic, so finished tiny models are kept in a content-addressed cache
(`models.tiny.cache_dir`; "" turns it off) keyed by the seed, the tiny config, the targets, the prompts and the
source of the code that builds them: a second CPU run with the same inputs copies bit-identical
weights instead of warming up again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

from sgsbatch.backends.trainer import TrainingInterrupted
from sgsbatch.config.schema import TINY_RANDOM, Config
from sgsbatch.logic.prompts import load_prompts
from sgsbatch.phases.task import Interrupted, Task
from sgsbatch.round.checkpoints import ROLES
from sgsbatch.round.results import run_targets

# The modules whose code decides the built weights, named as modules (not paths), so the key
# follows them wherever they live.
_BUILD_CODE = ("sgsbatch.models.tiny", "sgsbatch.models.warmup", "sgsbatch.backends.trainer",
               "sgsbatch.backends.batches", "sgsbatch.backends.weights", "sgsbatch.logic.prompts",
               "sgsbatch.logic.extraction", "sgsbatch.logic.review", "sgsbatch.run.checkpoint", __name__)


def cache_key(cfg: Config, targets: list[tuple[str, str, str]]) -> str:
    """Seed, tiny config, targets, prompts and tags, build code, and where it was built: a GPU-built model's numbers
    differ from a CPU-built one's, so neither is reused for the other."""
    import torch

    device = f"cuda:{torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "cpu"
    built = [device, "float32", torch.__version__]
    h = hashlib.sha256()
    prompts = dataclasses.asdict(load_prompts(cfg.prompts))  # the texts: a template file may change under its name
    h.update(json.dumps([cfg.run.seed, dataclasses.asdict(cfg.models.tiny), targets, built, prompts],
                        sort_keys=True).encode())
    for name in _BUILD_CODE:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, f"build module {name} not found"
        h.update(Path(spec.origin).read_bytes())
    return h.hexdigest()[:24]


def _copy_in(src: Path, dst: Path) -> None:
    from sgsbatch.run.checkpoint import publish_dir, read_marker, staging_dir

    tmp = staging_dir(dst)
    shutil.rmtree(tmp)
    shutil.copytree(src, tmp)
    (tmp / "SGSBATCH_COMPLETE").unlink()
    publish_dir(tmp, dst, {**read_marker(src), "copied_from": str(src)})


def run(task: Task) -> None:
    if task.shard.is_done():
        return
    from sgsbatch.models.tiny import build_tiny_random
    from sgsbatch.models.warmup import corpus_for_tokenizer, warm_up, warmup_examples
    from sgsbatch.run.checkpoint import is_complete

    cfg, paths = task.cfg, task.paths
    tiny = cfg.models.tiny
    prompts = load_prompts(cfg.prompts)
    targets = [(t.problem_id, t.header, t.theorem) for t in run_targets(paths)]
    cache = Path(tiny.cache_dir).expanduser() / cache_key(cfg, targets) if tiny.cache_dir else None
    base = paths.checkpoint(None, "_base")
    built = []
    for i, role in enumerate(ROLES):
        if getattr(cfg.models, role) != TINY_RANDOM:
            continue
        out = paths.checkpoint(None, role)
        if cache is not None and is_complete(cache / role):
            if not is_complete(out):
                _copy_in(cache / role, out)
            built.append(role)
            continue
        if not is_complete(base):
            build_tiny_random(base, cfg.run.seed, corpus_for_tokenizer(targets, prompts=prompts), vocab_size=tiny.vocab_size,
                              hidden_size=tiny.hidden_size, num_layers=tiny.num_layers, num_heads=tiny.num_heads)
        task.check_stop()
        examples = warmup_examples(role, targets, tiny.warmup_examples, cfg.run.seed + i, prompts)
        try:
            warm_up(base, out, examples, epochs=tiny.warmup_epochs, lr=tiny.warmup_lr,
                    batch_size=tiny.warmup_batch_size, seed=cfg.run.seed + i,
                    state_dir=paths.phase_dir(0, "init") / role, threads=task.threads(),
                    should_stop=task.should_stop)
        except TrainingInterrupted as e:
            raise Interrupted(str(e)) from e
        if cache is not None and not is_complete(cache / role):
            cache.mkdir(parents=True, exist_ok=True)
            _copy_in(out, cache / role)
        built.append(role)
    task.shard.finish([{"key": role, "role": role, "cache": str(cache or "")} for role in built])
