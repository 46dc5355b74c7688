"""SIMULATED generation: replies drawn from statistics behind the engine interface (add/step/abort).

THIS IS NOT A MODEL. `generation.backend = "simulated"` (set by `launch --rehearse`) loads no
weights and no tokenizer; every reply is drawn with `random.Random` seeded by (role, round,
request seed, sample index), so the same request always gets the same replies. It exists to run
the whole pipeline (phases, records, database, Slurm, checkpoints) at the real shape.

What is drawn, per role (numbers are `generation.simulated_*` keys):
- token counts: log-normal around the role's median, capped by the completion budget
  (`completion_budget`, as the real engines); a capped reply finishes with "length" and its text
  is cut (an unclosed fence: recorded as malformed by the real extraction). Token ids are random
  ids, logprobs one negative float per token; prompt ids are ~1 per 3.5 prompt characters.
- Solver: each problem's latent difficulty u in [0, 1) is a SHA-256 hash of its statement (the
  ```lean4 block of the prompt). R_r = the paper's scaling curve (scaling.paper_*, with
  R0 = simulated_r0) at C = (round + 1) * simulated_generations_per_round is the share of problems
  within reach in round r; an attempt succeeds with probability
  success_in_reach * sigmoid(sharpness * (logit(R_r) - logit(u))), so the run's cumulative solve
  rate (problems solved at least once) follows the curve for uniformly spread u once a problem
  within reach has had a few attempts. The drawn outcome travels in the proof
  as a comment `-- SGSBATCH-SIMULATED-DRAW: verified|failed`, which only the SIMULATED verifier
  reads (verification/simulated.py); Lean sees a comment. A verified draw closes with tactics that
  pass the simulated verifier's other rules. A share of replies is malformed (text outside the fence).
- Conjecturer: a well-formed statement (a fresh name, a hypothesis and a conclusion derived from
  the draw) ending in `:= by sorry`, or at `simulated_malformed_conjecturer` one of several
  malformed replies (no fence, no `:= by`, two statements).
- Guide: the three scores between the configured Guide tags, or (malformed) a tag missing.
- A search's tactic prompt (solver.mode = "search": it ends in search/policy.py's `:::`): one tactic
  from SIMULATED_TACTICS (steps and closing tactics), `simulated_tactic_tokens` median tokens, or
  (malformed) an empty reply.

`simulated_tokens_per_s > 0` sleeps generated tokens / that rate per step (decode time of the
whole engine, not per request). `projection.simulated_time_scale > 0` instead sleeps the
projection's times (config/simulated_time.py): `model_load_s` when the engine starts, and per step
each sample's tokens at the decode rate of its context, on the task's GPUs. Not covered: anything a real model does; prompt tokenisation.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import re
import time
from dataclasses import dataclass
from typing import Any

from sgsbatch.backends.generation import (
    EngineStats,
    Generation,
    Request,
    Sample,
    _Engine,
    completion_budget,
)
from sgsbatch.config.simulated_time import SimulatedTime, simulated_time, sleep
from sgsbatch.logic.prompts import GuideTags
from sgsbatch.search.policy import SEPARATOR
from sgsbatch.verification.simulated import normalise, stable_unit

DRAW_TAG = "SGSBATCH-SIMULATED-DRAW"
VOCAB = 102_400  # the id range token ids are drawn from (DeepSeek-Prover-V2's vocabulary size)
CHARS_PER_TOKEN = 3.5
log = logging.getLogger(__name__)
_FENCE_RE = re.compile(r"```lean4\n(.*?)```", re.S)
_NAME_RE = re.compile(r"\b(?:theorem|lemma)\s+([^\s(:]+)")


@dataclass(frozen=True)
class SimulatedSettings:
    """What the SIMULATED engine draws from (the `generation.simulated_*` and `scaling.paper_*` keys)."""

    role: str  # "solver" | "conjecturer" | "guide"
    round: int
    median_tokens: int
    token_sigma: float
    malformed: float
    r0: float
    asymptote: float
    c_mid: float
    b: float
    generations_per_round: int
    difficulty_sharpness: float
    success_in_reach: float
    tokens_per_s: float = 0.0
    tactic_tokens: int = 16  # median reply tokens of a search's tactic prompt (generation.simulated_tactic_tokens)
    max_model_len: int | None = None
    clock: SimulatedTime | None = None  # projection.simulated_time_scale > 0: sleep the projection's times
    gpus: int = 0  # the task's GPUs (what the decode time divides by; 0 stands for one)


def _unit(*parts: object) -> float:
    return stable_unit("sgsbatch-simulated-gen", *parts)


def curve(s: SimulatedSettings) -> float:
    """p_r: the paper's scaling curve at C = (round + 1) * generations_per_round."""
    c = (s.round + 1) * s.generations_per_round
    return s.r0 + (s.asymptote - s.r0) / (1 + (s.c_mid / c) ** s.b)


def statement_of(messages: list[dict[str, str]]) -> str:
    """The problem a prompt is about: its first ```lean4 block (the whole prompt when there is none)."""
    text = messages[-1]["content"] if messages else ""
    m = _FENCE_RE.search(text)
    return (m.group(1) if m else text).strip()


def difficulty(statement: str) -> float:
    """The latent difficulty in [0, 1) of a statement (whitespace-normalised SHA-256)."""
    return _unit("difficulty", normalise(statement))


def attempt_probability(s: SimulatedSettings, statement: str) -> float:
    """The chance one Solver attempt at `statement` is drawn verified in round `s.round`."""
    reach = min(max(curve(s), 1e-6), 1 - 1e-6)
    u = min(max(difficulty(statement), 1e-6), 1 - 1e-6)
    z = s.difficulty_sharpness * (math.log(reach / (1 - reach)) - math.log(u / (1 - u)))
    return s.success_in_reach / (1 + math.exp(-max(min(z, 700.0), -700.0)))


def _solver_text(code: str, ok: bool, rng: random.Random, malformed: bool) -> str:
    body = code if ":= by" in code else code.rstrip() + " := by"
    body = body.split(":= by", 1)[0] + ":= by"
    if ok:
        tactic = rng.choice(("nlinarith [sq_nonneg (x - 1), sq_nonneg (x + 1)]", "norm_num", "omega",
                             "positivity", "linarith"))
    else:
        tactic = rng.choice(("simp", "ring_nf", "sorry", "nlinarith [sq_nonneg (a + b)]", "decide"))
    draw = "verified" if ok else "failed"
    text = f"```lean4\n{body}\n  -- {DRAW_TAG}: {draw}\n  {tactic}\n```"
    return "Here is a proof.\n" + text if malformed else text


def _conjecturer_text(statement: str, key: str, rng: random.Random, malformed: bool) -> str:
    m = _NAME_RE.search(statement)
    name = f"{m.group(1) if m else 'target'}_sim_{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    a, b = rng.randint(1, 9), rng.randint(0, 20)
    good = f"theorem {name} (x : ℝ) (h : 0 < x) : {a} * x ^ 2 + {b} ≥ {b} := by\n  sorry"
    think = "Let me find a simpler related lemma.\n\n"
    if not malformed:
        return f"{think}```lean4\n{good}\n```"
    kind = rng.randrange(3)
    if kind == 0:
        return think + good  # no fence
    if kind == 1:
        return f"{think}```lean4\ntheorem {name} (x : ℝ) : {a} * x ^ 2 ≥ 0\n```"  # no `:= by`
    return f"{think}```lean4\n{good}\n\ntheorem {name}_2 : True := by\n  sorry\n```"  # two statements


def _guide_text(tags: GuideTags, rng: random.Random, malformed: bool) -> str:
    values = {"relevance": rng.randint(0, 5), "redundancy": rng.randint(0, 1),
              "conclusion_complexity": rng.randint(0, 4)}
    pairs = tags.pairs()
    skip = pairs[rng.randrange(len(pairs))][0] if malformed else ""
    parts = ["The lemma is related to the seed problem."]
    parts += [f"{begin}{values[name]}{end}" for name, begin, end in pairs if name != skip]
    return "\n".join(parts)


# what a SIMULATED tactic reply is drawn from: closing tactics (verification/simulated.py's) and steps
SIMULATED_TACTICS = ("intro h", "constructor", "have h2 := sq_nonneg (x - y)", "rw [add_comm]", "norm_num",
                     "linarith", "nlinarith [sq_nonneg (x - y), sq_nonneg (x + y)]", "positivity", "simp", "omega",
                     "field_simp", "ring_nf")


def is_tactic_prompt(messages: list[dict[str, str]]) -> bool:
    """True for a search policy's prompt (search/policy.py: it ends in SEPARATOR): the reply is one tactic."""
    return bool(messages) and messages[-1]["content"].rstrip().endswith(SEPARATOR)


class SimulatedGenerator(_Engine):
    """SIMULATED engine: replies drawn from statistics (module docstring); loads nothing."""

    def __init__(self, settings: SimulatedSettings, guide_tags: GuideTags | None = None,
                 rehearsal: bool = False) -> None:
        if settings.role == "guide" and guide_tags is None:
            raise ValueError("the simulated Guide needs the configured guide tags")
        log.warning("%sSIMULATED generation (%s, round %d): replies drawn from statistics, no model loaded",
                    "REHEARSAL: " if rehearsal else "", settings.role, settings.round)
        self.s = settings
        self.tags = guide_tags
        self.stats = EngineStats(engine="SIMULATED")
        self._queue: list[Request] = []
        if settings.clock is not None:
            sleep(settings.clock.load_s(), "model load")

    def add(self, request: Request) -> None:
        self.stats.prompts += 1
        self.stats.sequences += max(0, request.n)
        self._queue.append(request)

    def in_flight(self) -> int:
        return len(self._queue)

    def abort(self) -> None:
        self._queue.clear()

    def step(self) -> list[tuple[Request, Generation]]:
        """Finish every queued request (one engine step), sleeping for the decode time it mimics."""
        t0 = time.perf_counter()
        out = [(req, self._generate(req)) for req in self._queue]
        self._queue = []
        tokens = sum(len(smp.token_ids) for _, g in out for smp in g.samples)
        if self.s.clock is not None:
            sleep(self.s.clock.decode_s([(len(g.prompt_ids), len(smp.token_ids)) for _, g in out
                                         for smp in g.samples], self.s.gpus), "decode")
        elif self.s.tokens_per_s > 0 and tokens:
            time.sleep(tokens / self.s.tokens_per_s)
        self.stats.generate_s += time.perf_counter() - t0
        return out

    def _generate(self, req: Request) -> Generation:
        chars = sum(len(m["content"]) for m in req.messages)
        prng = random.Random(f"prompt:{hashlib.sha256(repr(req.messages).encode()).hexdigest()}")
        prompt_ids = [prng.randrange(VOCAB) for _ in range(max(1, round(chars / CHARS_PER_TOKEN)))]
        self.stats.prompt_tokens += len(prompt_ids)
        budget = completion_budget(req.max_tokens, len(prompt_ids), self.s.max_model_len)
        statement = statement_of(req.messages)
        samples = [self._sample(req, statement, i, budget) for i in range(max(0, req.n))]
        return Generation(prompt_ids=prompt_ids, samples=samples)

    def _sample(self, req: Request, statement: str, i: int, budget: int) -> Sample:
        s = self.s
        rng = random.Random(f"{s.role}:{s.round}:{req.seed}:{i}")
        malformed = rng.random() < s.malformed
        if s.role == "solver" and is_tactic_prompt(req.messages):  # a search's expansion (search/policy.py)
            text = "" if malformed else SIMULATED_TACTICS[rng.randrange(len(SIMULATED_TACTICS))]
        elif s.role == "solver":
            ok = rng.random() < attempt_probability(s, statement)
            text = _solver_text(statement, ok, rng, malformed)
        elif s.role == "conjecturer":
            text = _conjecturer_text(statement, f"{req.key}:{req.seed}:{i}", rng, malformed)
        else:
            assert self.tags is not None
            text = _guide_text(self.tags, rng, malformed)
        median = s.tactic_tokens if s.role == "solver" and is_tactic_prompt(req.messages) else s.median_tokens
        n = max(1, int(rng.lognormvariate(math.log(median), s.token_sigma)))
        finish = "stop"
        if n > budget:
            n, finish = budget, "length"
            text = text[: len(text) // 2] if budget else ""  # cut mid-reply: a fence or tag left open
        ids = [rng.randrange(VOCAB) for _ in range(n)]
        logprobs = [-rng.expovariate(2.0) for _ in range(n)]
        self.stats.generated_tokens += n
        self.stats.neg_logprob_sum -= sum(logprobs)
        return Sample(text, ids, logprobs, finish)


def settings_from(cfg: Any, role: str, round_index: int, gpus: int = 0) -> SimulatedSettings:
    """The SIMULATED engine's settings for `role` in a round, from the run config (`gpus`: the task's)."""
    g, sc = cfg.generation, cfg.scaling
    median = {"solver": g.simulated_solver_tokens, "conjecturer": g.simulated_conjecturer_tokens,
              "guide": g.simulated_guide_tokens}[role]
    malformed = {"solver": g.simulated_malformed_solver, "conjecturer": g.simulated_malformed_conjecturer,
                 "guide": g.simulated_malformed_guide}[role]
    return SimulatedSettings(role=role, round=round_index, median_tokens=median, token_sigma=g.simulated_token_sigma,
                             malformed=malformed, r0=g.simulated_r0, asymptote=sc.paper_asymptote,
                             c_mid=sc.paper_c_mid, b=sc.paper_b, generations_per_round=g.simulated_generations_per_round,
                             difficulty_sharpness=g.simulated_difficulty_sharpness,
                             success_in_reach=g.simulated_success_in_reach, tokens_per_s=g.simulated_tokens_per_s,
                             max_model_len=g.max_model_len, clock=simulated_time(cfg), gpus=gpus,
                             tactic_tokens=g.simulated_tactic_tokens)
