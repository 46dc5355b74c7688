"""Init phase (round 0 only, one task): make the base weights every role starts from.

For `tiny-random` roles: one small random model and tokenizer built offline from the run seed,
then a short supervised warm-up per role on formatted examples the project generates itself, so
that a fair share of samples is well-formed from round 0 on. Hub ids and paths are used as they
are (nothing to do here; vLLM and transformers load them directly in the phases).
"""

from __future__ import annotations

from sgsbatch.backends.trainer import TrainingInterrupted
from sgsbatch.config import TINY_RANDOM
from sgsbatch.phases.task import Interrupted, Task
from sgsbatch.round_data import load_targets
from sgsbatch.weights import ROLES


def run(task: Task) -> None:
    if task.shard.is_done():
        return
    from sgsbatch.models.tiny import build_tiny_random, is_complete
    from sgsbatch.models.warmup import corpus_for_tokenizer, warm_up, warmup_examples

    cfg, paths = task.cfg, task.paths
    tiny = cfg.models.tiny
    targets = [(t.problem_id, t.header, t.theorem) for t in load_targets(paths)]
    base = paths.checkpoint(None, "_base")
    built = []
    for i, role in enumerate(ROLES):
        if getattr(cfg.models, role) != TINY_RANDOM:
            continue
        if not is_complete(base):
            build_tiny_random(base, cfg.run.seed, corpus_for_tokenizer(targets), vocab_size=tiny.vocab_size,
                              hidden_size=tiny.hidden_size, num_layers=tiny.num_layers, num_heads=tiny.num_heads)
        out = paths.checkpoint(None, role)
        task.check_stop()
        examples = warmup_examples(role, targets, tiny.warmup_examples, cfg.run.seed + i)
        try:
                warm_up(base, out, examples, epochs=tiny.warmup_epochs, lr=tiny.warmup_lr,
                    batch_size=tiny.warmup_batch_size,
                    seed=cfg.run.seed + i, state_dir=paths.phase_dir(0, "init") / role, threads=task.threads(),
                    should_stop=task.should_stop)
        except TrainingInterrupted as e:
            raise Interrupted(str(e)) from e
        built.append(role)
    task.shard.finish([{"key": role, "role": role} for role in built])
