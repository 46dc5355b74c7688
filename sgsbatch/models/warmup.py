"""Supervised warm-up of a `tiny-random` model so its replies are well-formed.

Covered: project-made (prompt, reply) pairs for each role, built from the real prompts
(`sgsbatch.logic.prompts`) and checked against the real parsers (`sgsbatch.logic.extraction`,
`sgsbatch.logic.review`): Solver replies are one ```lean4 block `theorem NAME := by` plus 1-3 tactic
lines; Conjecturer replies are one ```lean4 block `theorem NAME (binders) (hyps) : goal := by
sorry` from a small grammar with random names and constants (duplicates are rare); Guide replies
are a short sentence and the three scores between the configured Guide tags. `corpus_for_tokenizer` gives the text the tiny
tokenizer is trained on; `warm_up` tokenizes with the chat template and runs the DeepSpeed
trainer (REINFORCE objective, weight 1, i.e. plain SFT) for a few epochs.

Not covered: making proofs correct or conjectures useful: this only teaches the format, so
that extraction succeeds for a fair share of samples at temperature 1.0.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from sgsbatch.backends.trainer import Example, TrainResult, TrainSettings, train
from sgsbatch.logic.extraction import extract_conjecture, extract_proof
from sgsbatch.logic.prompts import (
    GuideTags,
    PromptSet,
    conjecturer_messages,
    guide_messages,
    reference_prompts,
    solver_messages,
)
from sgsbatch.logic.review import parse_review

ROLES = ("solver", "conjecturer", "guide")
Target = tuple[str, str, str]  # (id, header, theorem)
Pair = tuple[list[dict[str, str]], str]  # (chat messages, reply text)

TACTICS = (
    "norm_num",
    "linarith",
    "nlinarith [sq_nonneg ({a} - {b})]",
    "positivity",
    "simp",
    "ring_nf",
    "omega",
    "field_simp",
)
_NAME_RE = re.compile(r"(?:theorem|lemma)\s+([^\s(:{\[]+)")
_REAL_VARS_RE = re.compile(r"\(([^():]+):\s*ℝ\s*\)")

_STEMS = ("aux", "helper", "key", "step", "bound", "pos", "sq", "ineq", "main", "lower", "upper")
_SUFFIXES = ("lemma", "fact", "bound", "step", "claim")


def _theorem_name(theorem: str) -> str:
    m = _NAME_RE.search(theorem)
    return m.group(1) if m else "target"


def _real_vars(theorem: str) -> list[str]:
    names: list[str] = []
    for group in _REAL_VARS_RE.findall(theorem):
        names += [v for v in group.split() if v.isidentifier()]
    return names


def solver_reply(theorem: str, rng: random.Random) -> str:
    vars_ = _real_vars(theorem) or ["x", "y"]
    a, b = rng.choice(vars_), rng.choice(vars_)
    lines = [rng.choice(TACTICS).format(a=a, b=b) for _ in range(rng.randint(1, 3))]
    body = "\n".join("  " + t for t in lines)
    return f"```lean4\ntheorem {_theorem_name(theorem)} := by\n{body}\n```"


def conjecture_statement(rng: random.Random) -> str:
    """A random small statement `theorem NAME (binders) (hyps) : goal := by`."""
    name = f"{rng.choice(_STEMS)}_{rng.choice(_SUFFIXES)}_{rng.randrange(1000)}"
    c, d, k = rng.randint(1, 9), rng.randint(1, 9), rng.randint(2, 5)
    kind = rng.randrange(5)
    if kind == 0:
        return f"theorem {name} (x : ℝ) (hx : 0 < x) : 0 < x ^ {k} + {c} := by"
    if kind == 1:
        return f"theorem {name} (x y : ℝ) : {c} * x * y ≤ {c} * (x ^ 2 + y ^ 2) / 2 := by"
    if kind == 2:
        return f"theorem {name} (n : ℕ) (hn : {c} ≤ n) : {c} < {d} + n := by"
    if kind == 3:
        return f"theorem {name} (a b : ℝ) (ha : 0 ≤ a) (hb : 0 ≤ b) : 0 ≤ {c} * a + {d} * b := by"
    return f"theorem {name} (x : ℝ) (h : {c} < x) : {c} < x + {d} := by"


def conjecturer_reply(rng: random.Random) -> str:
    return f"```lean4\n{conjecture_statement(rng)}\n  sorry\n```"


def guide_reply(rng: random.Random, tags: GuideTags | None = None) -> str:
    """A short sentence and the three scores, each between the tag set's begin and end tags."""
    rel, red, cpx = rng.randint(0, 5), rng.randint(0, 1), rng.randint(0, 4)
    t = tags or reference_prompts().guide_tags
    lines = [f"{begin}{value}{end}" for (_, begin, end), value in zip(t.pairs(), (rel, red, cpx), strict=True)]
    return "The conjecture is a simple step.\n" + "\n".join(lines)


def reply_ok(role: str, reply: str, prompts: PromptSet | None = None) -> bool:
    """Whether `reply` passes the role's real parser (the Guide's with `prompts`' tags)."""
    if role == "solver":
        return extract_proof(reply).ok
    if role == "conjecturer":
        return extract_conjecture(reply).ok
    if role == "guide":
        return parse_review(reply, (prompts or reference_prompts()).guide_tags).ok
    raise ValueError(f"unknown role {role!r}; valid: {', '.join(ROLES)}")


def warmup_examples(role: str, targets: Sequence[Target], n: int, seed: int,
                    prompts: PromptSet | None = None) -> list[Pair]:
    """`n` (messages, reply) pairs for `role` with `prompts` (default: the reference's), cycling over
    `targets` in a seeded order."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; valid: {', '.join(ROLES)}")
    if not targets:
        raise ValueError("warmup_examples needs at least one target")
    p = prompts or reference_prompts()
    rng = random.Random(f"warmup:{role}:{seed}")
    out: list[Pair] = []
    for i in range(n):
        _, header, theorem = targets[rng.randrange(len(targets))] if i >= len(targets) else targets[i]
        if role == "solver":
            pair = (solver_messages(header, theorem, p), solver_reply(theorem, rng))
        elif role == "conjecturer":
            pair = (conjecturer_messages(header, theorem, prompts=p), conjecturer_reply(rng))
        else:
            pair = (guide_messages(theorem, conjecture_statement(rng), p), guide_reply(rng, p.guide_tags))
        assert reply_ok(role, pair[1], p), pair[1]
        out.append(pair)
    return out


def corpus_for_tokenizer(targets: Sequence[Target], seed: int = 0, per_role: int = 64,
                         prompts: PromptSet | None = None) -> list[str]:
    """Prompts of all roles for `targets` plus example replies, to train the tiny tokenizer on."""
    p = prompts or reference_prompts()
    corpus: list[str] = []
    for _, header, theorem in targets:
        corpus.append(solver_messages(header, theorem, p)[0]["content"])
        corpus.append(conjecturer_messages(header, theorem, prompts=p)[0]["content"])
    corpus.append(conjecturer_messages("", "x", conditioned=False, prompts=p)[0]["content"])
    for role in ROLES:
        for messages, reply in warmup_examples(role, targets, per_role, seed, p):
            if role == "guide":
                corpus.append(messages[0]["content"])
            corpus.append(reply)
    return corpus


def tokenize_pairs(model_dir: Path, pairs: Sequence[Pair]) -> list[Example]:
    """Chat-templated prompt ids + reply ids + eos, weight 1."""
    from transformers import AutoTokenizer

    from sgsbatch.backends.generation import chat_prompt_ids

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    eos = int(tok.eos_token_id)
    examples = []
    for messages, reply in pairs:
        reply_ids = [int(t) for t in tok(reply, add_special_tokens=False)["input_ids"]]
        examples.append(Example(chat_prompt_ids(tok, messages), reply_ids + [eos], 1.0))
    return examples


def warm_up(
    model_dir: Path,
    out_dir: Path,
    examples: Sequence[Pair],
    *,
    state_dir: Path,
    epochs: int = 4,
    lr: float = 2e-3,
    batch_size: int = 8,
    seed: int = 0,
    threads: int | None = 1,
    should_stop: Callable[[], bool] = lambda: False,
) -> TrainResult:
    """SFT `model_dir` on `examples` for `epochs` passes (one trainer epoch over the repeats).

    One torch thread by default: the tiny model's ops are too small to gain from more, and extra
    threads slow it down badly on a shared, oversubscribed node.
    """
    tokenized = tokenize_pairs(model_dir, examples)
    settings = TrainSettings(
        lr=lr, batch_size=batch_size, zero_stage=0, seed=seed, objective="reinforce", threads=threads
    )
    return train(model_dir, out_dir, tokenized * epochs, settings, state_dir=state_dir, should_stop=should_stop)
