"""The canary's generation and Guide checks: each role's model on the configured engine.

For a role (`solver`, `conjecturer`, `guide`): the configured weights (hub cache or path, copied
to the phase's node-local scratch as a run would), the run's real prompts for a few targets
rendered through the model's chat template (the longest prompt against `generation.max_model_len`),
the configured engine started (tensor parallelism included) and timed, then one sample per prompt
(`canary.max_tokens` tokens; the Guide's whole `guide.max_tokens`, since only a whole reply
parses), with tokens/s and the memory in use. The Guide's replies then go through the real
parser (logic/review.py); a parse rate under `canary.min_guide_parse_rate` fails. Not covered:
throughput at a full batch (bench/bench_vllm.py), sampling quality.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence

from sgsbatch.backends.generation import Generation, Generator, Request, chat_prompt_ids, derive_seed
from sgsbatch.canary.cases import HONEST
from sgsbatch.canary.rows import Row, failed
from sgsbatch.config.schema import TINY_RANDOM, Config
from sgsbatch.logic.data import Target
from sgsbatch.logic.prompts import (
    conjecturer_messages,
    guide_messages,
    load_prompts,
    seeded_conjecturer_messages,
    solver_messages,
)
from sgsbatch.run.paths import tree_bytes

PHASE_OF = {"solver": "solve", "conjecturer": "conjecture", "guide": "guide"}


def role_messages(cfg: Config, role: str, targets: Sequence[Target]) -> list[list[dict[str, str]]]:
    """The prompts a run sends `role` for these targets (the Guide scores target i+1 as a
    conjecture for target i: any well-formed statement will do to see the reply parse). With
    `conjecturer.setup = "seed_statement"` the Conjecturer's prompts are the seeded ones, each target
    shown with one of the canary's honest proofs (cases.HONEST, Lean-accepted tactic blocks) as its
    seed: a run's seeds are proofs found during the run, unknown before it."""
    prompts = load_prompts(cfg.prompts)
    if role == "solver":
        return [solver_messages(t.header, t.theorem, prompts) for t in targets]
    if role == "conjecturer" and cfg.conjecturer.setup == "seed_statement":
        return [seeded_conjecturer_messages(t.header, t.theorem, HONEST[i % len(HONEST)].proof,
                                            cfg.conjecturer.conditioned, prompts) for i, t in enumerate(targets)]
    if role == "conjecturer":
        return [conjecturer_messages(t.header, t.theorem, cfg.conjecturer.conditioned, prompts) for t in targets]
    return [guide_messages(t.theorem, targets[(i + 1) % len(targets)].theorem, prompts)
            for i, t in enumerate(targets)]


def memory_in_use() -> str:
    """GPU memory in use on this node (nvidia-smi), else this process's peak resident memory."""
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=False).stdout
        rows = [[float(x) for x in line.split(",")] for line in out.splitlines() if line.count(",") == 1]
        if rows:
            return " + ".join(f"{u / 1024:.1f}/{t / 1024:.0f} GiB" for u, t in rows) + " GPU"
    import resource

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return f"{peak_kib / 2**20:.1f} GiB peak resident (CPU; this process + its finished children)"


def check_role(cfg: Config, role: str, targets: Sequence[Target], threads: int) -> tuple[list[Row], list[str]]:
    """The rows of one role's check and the texts it generated (the Guide check parses them)."""
    comp = "guide" if role == "guide" else f"generation:{role}"
    g = cfg.generation
    if g.backend == "simulated":
        return [Row(comp, "engine", True, "generation.backend = \"simulated\": SIMULATED, nothing real to check")], []
    model = getattr(cfg.models, role)
    if model == TINY_RANDOM:
        return [Row(comp, "weights", True, "tiny-random model (built by a run's init job): not checked")], []
    from sgsbatch.backends.weights import resolve_weights
    from sgsbatch.phases.sampling import engine_for, local_weights

    rows: list[Row] = []
    try:
        source = resolve_weights(model)
    except FileNotFoundError as e:
        return [failed(comp, "weights", e, f"models.{role}: download it where compute nodes can read it "
                                           f"(hf download {model}) or give a local path")], []
    scratch = cfg.phase_resources(PHASE_OF[role]).scratch
    t0 = time.perf_counter()
    weights = local_weights(source, scratch)
    if weights != source:
        size = tree_bytes(weights)
        rows.append(Row(comp, "node-local copy", True, f"{size / 1e9:.2f} GB to {weights} in "
                                                       f"{time.perf_counter() - t0:.1f} s"))
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(weights))
    messages = role_messages(cfg, role, targets)
    lengths = [len(chat_prompt_ids(tok, m)) for m in messages]
    sec = getattr(cfg, role)
    longest, mml = max(lengths), g.max_model_len
    if longest >= mml:
        rows.append(Row(comp, "prompt fits", False, f"the longest of {len(lengths)} real prompts has {longest} "
                                                    f"tokens, generation.max_model_len is {mml}",
                        f"generation.max_model_len (>= {longest + sec.max_tokens} for whole completions)"))
        return rows, []
    fits = (f"fits ({longest} + {sec.max_tokens} <= {mml})" if longest + sec.max_tokens <= mml else
            f"completions capped at {mml - longest} of {role}.max_tokens = {sec.max_tokens} by max_model_len {mml} "
            f"(as the reference serves)")
    rows.append(Row(comp, "prompt + max_tokens", True, f"longest real prompt {longest} tokens: {fits}"))
    t0 = time.perf_counter()
    gen = engine_for(cfg, weights, threads)
    started = time.perf_counter() - t0
    try:
        max_tokens = cfg.guide.max_tokens if role == "guide" else cfg.canary.max_tokens
        outs = _sample(gen, messages, cfg, max_tokens, sec.temperature)
        memory = memory_in_use()
    finally:
        gen.close()
    rows.append(Row(comp, "engine start", True, f"{gen.stats.engine or g.backend}, tp={g.tensor_parallel_size}: "
                                                f"{started:.1f} s", measures={"model_load_s": started}))
    texts = [s.text for o in outs for s in o.samples]
    tokens = sum(len(s.token_ids) for o in outs for s in o.samples)
    secs = gen.stats.generate_s or 1e-9
    ok = len(texts) == len(messages) and all(len(s.token_ids) > 0 for o in outs for s in o.samples)
    rows.append(Row(comp, "generate", ok, f"{len(texts)} samples, {tokens} tokens, {tokens / secs:.1f} tokens/s; "
                                          f"memory {memory}", "" if ok else f"models.{role} / generation.*: the "
                                                                               "engine returned empty samples",
                    measures={"decode_tokens_per_s_per_gpu": tokens / secs / max(1, g.tensor_parallel_size),
                              "sequences": float(len(texts))}))
    return rows, texts


def _sample(gen: Generator, messages: Sequence[list[dict[str, str]]], cfg: Config, max_tokens: int,
            temperature: float) -> list[Generation]:
    done: dict[str, Generation] = {}
    for i, m in enumerate(messages):
        gen.add(Request(f"canary-{i}", m, 1, derive_seed(cfg.run.seed, i), max_tokens, temperature,
                        cfg.generation.top_p))
    while len(done) < len(messages):
        for req, out in gen.step():
            done[req.key] = out
    return [done[f"canary-{i}"] for i in range(len(messages))]


def check_guide(cfg: Config, targets: Sequence[Target], threads: int) -> list[Row]:
    rows, texts = check_role(cfg, "guide", targets, threads)
    if not texts:
        return rows
    from sgsbatch.logic.review import parse_review

    tags = load_prompts(cfg.prompts).guide_tags
    parsed = sum(parse_review(t, tags).ok for t in texts)
    rate, need = parsed / len(texts), cfg.canary.min_guide_parse_rate
    rows.append(Row("guide", "replies parse", rate >= need, f"{parsed} of {len(texts)} ({rate:.0%}); needed "
                                                          f"{need:.0%} (fine-tuned Guide >99%, base model ~55%)",
                    f"models.guide (the fine-tuned Guide), prompts.guide / prompts.guide_tags, or "
                    f"canary.min_guide_parse_rate (now {need})"))
    return rows
