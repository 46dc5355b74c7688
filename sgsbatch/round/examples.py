"""What each role trains on after a round: selection bands, rewards, and trainer examples.

Solver: REINFORCE-1/2 on verified samples of the problems `solver.selection` picks (by default
the hard band; weights from logic/rewards.py), CISPO on whole groups of the 0 < s < 1 band with
advantages, the GRPO family on the groups of every problem the round sampled (targets and
conjectures; `solver.band_*` do not apply: a group whose rewards are all equal has advantage 0 and
still counts in the loss's normaliser; DAPO's dynamic sampling drops the groups whose samples are
all correct or all not), or Expert Iteration on stored proofs of the last `solver.ei_rounds` rounds
(read from the database after the round's ingestion; STP's, "stp_improved_ei": every verified
proof of those rounds, capped per problem), weighted as REINFORCE-1/2 (the reference's EI runs the
same `prepare_prover_train_data` loop: `try` proofs dropped, the length penalty). Conjecturer:
REINFORCE-1/2 with `R_guide * (1 - s)` min-max normalised over the in-band conjectures; every
in-band conjecture is an example, weight 0 included (the reference trains on all of them, and its
WeightedTrainer divides by every token of the batch, so a zero-weight example still counts in the
normaliser); STP's (`conjecturer.reward = "stp"`): weight 1 on its band. Training sequences are the
chat-templated prompt ids plus the sampled token ids, never re-tokenised text. A search Solver's
(`solver.mode = "search"`) verified sample trains as one sequence per (goal state, tactic) step of
its proof (`sample_examples`), with the sample's weight (REINFORCE-1/2 or Expert Iteration).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import select

from sgsbatch.backends.batches import GRPO_FAMILY, Example
from sgsbatch.config.schema import WINDOW_SELECTIONS, Config
from sgsbatch.logic.rewards import (
    conjecturer_rewards,
    correct_samples,
    dapo_keeps,
    group_advantages,
    group_rewards,
    grpo_advantages,
    overlong_shaping,
    policy_rewards,
    solver_weight,
)
from sgsbatch.logic.selection import capped_proofs, conjecturer_band, selected_problems, stp_conjecture_band
from sgsbatch.round import metrics as M
from sgsbatch.round.compaction import token_count
from sgsbatch.round.results import ProblemResult, conjecture_id, guide_reviews
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import read_phase_arrays
from sgsbatch.run.token_arrays import Ids, RecordArrays
from sgsbatch.state.schema import Attempt, StoredProof
from sgsbatch.verification.verdict import VERIFIED


def in_band_conjectures(cfg: Config, results: dict[str, ProblemResult]) -> set[str]:
    """The round's conjectures the Conjecturer trains on: selection.conjecturer_band of their solve
    rates, or with `conjecturer.reward = "stp"` STP's band (selection.stp_conjecture_band: solve rate
    below `stp_threshold`, then the elegance filter on shortest verified proof / statement length)."""
    c = cfg.conjecturer
    conj = {k: r for k, r in results.items() if not r.problem.is_target}
    if c.reward != "stp":
        return band_of_rates(cfg, {k: r.rate for k, r in conj.items()})
    # STP's ratio: the shortest verified proof's length over the statement's (RL_utils.py:82-85, characters)
    ratios = {k: min(len(x.get("proof") or "") for x in r.samples if x["verdict"] == VERIFIED)
              / max(len(r.problem.theorem), 1) for k, r in conj.items() if r.verified}
    return stp_conjecture_band({k: r.rate for k, r in conj.items()}, ratios, c.stp_threshold,
                               c.stp_elegance_quantile)


def band_of_rates(cfg: Config, conjecture_rates: dict[str, float]) -> set[str]:
    """`in_band_conjectures` from the conjectures' solve rates alone (the Guide phase's way)."""
    return conjecturer_band(conjecture_rates, cfg.conjecturer.band_percentile)


def solver_selection(cfg: Config, results: dict[str, ProblemResult], unsolved: Collection[str] = ()) -> set[str]:
    """The round's problems the Solver trains on under `solver.selection` (selection.selected_problems;
    the GRPO family's "auto": every problem sampled). `unsolved`: the targets unsolved when the round
    started (round inputs), read by the "unsolved" selection only."""
    s = cfg.solver
    rates = {k: r.rate for k, r in results.items()}
    mode = s.selection_mode()
    if mode == "auto":
        return set(rates)
    targets = {k for k, r in results.items() if r.problem.is_target}
    return selected_problems(mode, rates, targets, unsolved, low=s.band_low, high=s.band_high,
                             include_high=s.band_include_high)


def sample_examples(arrays: RecordArrays, k: int, smp: dict[str, Any], weight: float) -> list[Example]:
    """Sample k's training sequences with `weight`: the prompt and its completion, or for a search's sample
    (solver.mode = "search", phases/search.py) one per step of its proof: (the step's prompt: theorem,
    tactics so far, goals; the tactic), split from the sample's concatenated ids by its `steps` counts."""
    if "steps" not in smp:
        return [Example(arrays.prompt_ids, arrays.token_ids(k), weight)]
    ids, out, at = arrays.token_ids(k), [], 0
    for n_prompt, n_tactic in smp["steps"]:
        out.append(Example(ids[at:at + n_prompt], ids[at + n_prompt:at + n_prompt + n_tactic], weight))
        at += n_prompt + n_tactic
    assert at == len(ids), "a search sample's steps cover its token ids"
    return out


def _length(smp: dict[str, Any]) -> int:
    """The tokens the length penalty judges: a whole proof's; none for a search's (its tactics are short
    by construction: search.tactic_max_tokens each)."""
    return 0 if "steps" in smp else token_count(smp)


def _reinforce(cfg: Config, results: dict[str, ProblemResult], band: set[str]) -> list[Example]:
    s = cfg.solver
    out = []
    for key in sorted(band):
        res = results[key]
        for k, smp in enumerate(res.samples):
            w = solver_weight(smp.get("proof") or "", smp["verdict"] == "verified", True, _length(smp),
                              max_tokens=s.max_tokens, length_penalty_start=s.length_penalty_start,
                              zero_try=s.zero_try, try_comments=s.try_comments)
            if w is not None:
                out += sample_examples(res.arrays, k, smp, w)
    return out


def _cispo(cfg: Config, results: dict[str, ProblemResult], band: set[str]) -> list[Example]:
    s = cfg.solver
    groups = {}
    for key in sorted(band):
        smps = results[key].samples
        groups[key] = group_rewards([x["verdict"] == "verified" for x in smps], [token_count(x) for x in smps],
                                    [x.get("proof") or "" for x in smps], max_tokens=s.max_tokens,
                                    length_penalty_start=s.length_penalty_start, zero_try=s.zero_try, try_comments=s.try_comments)
    out = []
    for gid, (key, adv) in enumerate(sorted(group_advantages(groups, s.cispo_eps).items())):
        out += _group_examples(results[key], adv, gid)
    return out


Group = tuple[int, str]  # (round, problem key): a DAPO rollout step's groups may come from several rounds


@dataclass(frozen=True)
class Carry:
    """DAPO's re-sampling (`solver.rollout_max_gen_batches` > 1): the groups earlier rounds kept for a rollout
    step they did not train, in order, with their results, and the generation batches spent on it so far."""

    groups: tuple[tuple[Group, ProblemResult], ...] = ()
    gen_batches: int = 0


@dataclass
class FamilyGroups:
    """The GRPO family's groups of a round: each trained group's result and rewards (in training order), the
    round's group metrics (round/metrics.py names), and with DAPO's re-sampling the groups carried to the next
    round when this one trains nothing (`pending`, in order; empty when the step trains)."""

    groups: dict[Group, tuple[ProblemResult, list[float]]]
    metrics: dict[str, float]
    pending: list[Group]


def family_groups(cfg: Config, results: dict[str, ProblemResult], draw: Sequence[str] = (), r: int = 0,
                  carry: Carry = Carry()) -> FamilyGroups:
    """The GRPO family's rewards per trained group (rewards.policy_rewards; DAPO: ±1 plus the overlong
    shaping, its dynamic sampling applied) and the round's group metrics.

    `draw`: the round's rollout batch in draw order (round inputs' `solve_targets`). With
    `solver.rollout_prompts` = N > 0 the groups are visited in that order (conjectures after, sorted) and DAPO
    trains the first N targets its dynamic sampling keeps (verl's `batch[:traj_bsz]`); the rest of an
    over-sampled draw is counted as unused, a shortfall as short. With re-sampling (`carry`: the groups earlier
    rounds of this step kept, first), a round that holds fewer than N kept targets before the step's
    `rollout_max_gen_batches`-th generation batch trains nothing: its kept groups are `pending` (verl's DAPO
    trainer: `continue` to the next generation batch, the weights unchanged); at the cap it trains what it has."""
    s = cfg.solver
    dapo = s.objective == "dapo"
    position = {key: i for i, key in enumerate(draw)} if s.rollout_prompts else {}
    kept: list[tuple[Group, ProblemResult, list[bool]]] = []
    all_pass = all_fail = 0
    for group, res in carry.groups:
        kept.append((group, res, _correct(cfg, res)))
    for key in sorted(solver_selection(cfg, results), key=lambda k: (position.get(k, len(position)), k)):
        res = results[key]
        if not res.samples:
            continue
        correct = _correct(cfg, res)
        if dapo and not dapo_keeps(correct):
            all_pass, all_fail = all_pass + all(correct), all_fail + (not any(correct))
            continue
        kept.append(((r, key), res, correct))
    in_batch = [g for g, res, _ in kept if position and res.problem.is_target]
    gen_batches = carry.gen_batches + 1
    metrics: dict[str, float] = {}
    if dapo:
        metrics |= {M.dropped_groups("all_pass"): float(all_pass), M.dropped_groups("all_fail"): float(all_fail)}
    # short of the batch before the cap: nothing trained, every kept group carried to the next round
    resample = s.resamples() and len(in_batch) < s.rollout_prompts and gen_batches < s.rollout_max_gen_batches
    if s.resamples():
        metrics |= {M.SOLVER_ROLLOUT_GEN_BATCHES: float(gen_batches), M.SOLVER_ROLLOUT_KEPT: float(len(in_batch)),
                    M.SOLVER_ROLLOUT_RESAMPLED: float(resample)}
    trained = set(in_batch[:s.rollout_prompts]) if position else None
    groups: dict[Group, tuple[ProblemResult, list[float]]] = {}
    shaped = 0
    for group, res, correct in [] if resample else kept:
        if trained is not None and res.problem.is_target and group not in trained:
            continue  # the batch is full: generated, not trained
        lengths = [token_count(x) for x in res.samples]
        groups[group] = (res, policy_rewards(correct, lengths, incorrect=s.dapo_incorrect_reward if dapo else 0.0,
                                             max_tokens=s.max_tokens,
                                             overlong_buffer=s.overlong_buffer if dapo else 0.0,
                                             overlong_penalty=s.overlong_penalty))
        if dapo:
            shaped += sum(1 for n in lengths if overlong_shaping(n, s.max_tokens, s.overlong_buffer, s.overlong_penalty) < 0)
    metrics |= {M.SOLVER_GROUPS: float(len(groups)),
                M.SOLVER_ZERO_STD_GROUPS: float(sum(1 for _, rw in groups.values() if len(set(rw)) == 1))}
    if dapo:
        metrics[M.SOLVER_OVERLONG_SHAPED] = float(shaped)
        if _filters_overlong(cfg):
            metrics[M.SOLVER_OVERLONG_FILTERED] = float(sum(1 for res, _ in groups.values() for x in res.samples
                                                            if x["finish_reason"] == "length"))
    if position and not resample:
        metrics |= {M.SOLVER_ROLLOUT_SHORT: float(max(0, s.rollout_prompts - len(in_batch))),
                    M.SOLVER_ROLLOUT_UNUSED: float(max(0, len(in_batch) - s.rollout_prompts))}
    return FamilyGroups(groups, metrics, [g for g, _, _ in kept] if resample else [])


def _correct(cfg: Config, res: ProblemResult) -> list[bool]:
    s, smps = cfg.solver, res.samples
    return correct_samples([x["verdict"] == "verified" for x in smps], [x.get("proof") or "" for x in smps],
                           zero_try=s.zero_try, try_comments=s.try_comments)


def _grpo_family(cfg: Config, family: FamilyGroups) -> list[Example]:
    s = cfg.solver
    out = []
    for gid, (_, (res, rewards)) in enumerate(sorted(family.groups.items(), key=lambda kv: kv[0])):
        adv = grpo_advantages(rewards, s.grpo_eps, scale_std=s.objective != "dr_grpo")
        examples = _group_examples(res, adv, gid)
        if _filters_overlong(cfg):  # DAPO §3.4: a truncated sample's tokens leave the loss (and its normaliser)
            examples = [ex for ex, smp in zip(examples, res.samples, strict=True) if smp["finish_reason"] != "length"]
        out += examples
    return out


def _filters_overlong(cfg: Config) -> bool:
    return cfg.solver.objective == "dapo" and cfg.solver.overlong_filter


def _group_examples(res: ProblemResult, advantages: list[float], gid: int) -> list[Example]:
    """A problem's samples as one group of examples (CISPO, the GRPO family), with their sampler logprobs."""
    assert len(advantages) == len(res.samples), "one advantage per sample"
    a = res.arrays
    return [Example(a.prompt_ids, a.token_ids(k), adv, group=gid, sampler_logprobs=a.logprobs(k))
            for k, adv in enumerate(advantages)]


def solver_group_metrics(cfg: Config, results: dict[str, ProblemResult], draw: Sequence[str] = (), r: int = 0,
                         carry: Carry = Carry()) -> dict[str, float]:
    """The round's GRPO-family group counts (trained, zero-std, DAPO's dropped and shaped, a rollout batch's
    short and unused groups, its re-sampling); {} otherwise."""
    if cfg.solver.objective not in GRPO_FAMILY:
        return {}
    return family_groups(cfg, results, draw, r, carry).metrics


def ei_stored_proofs(h: RunHandle, r: int) -> list[tuple[int, str, int]]:
    """(round, problem id, sample) of the proofs Expert Iteration trains on after round r (read after the
    round's ingestion): the stored target proofs of the last `solver.ei_rounds` rounds ("less_16_proofs"),
    or with `solver.selection = "stp_improved_ei"` the verified proofs of targets and conjectures of those
    rounds, at most `solver.proof_cap` distinct per problem (selection.capped_proofs)."""
    s_cfg = h.cfg.solver
    with h.db.read() as s:
        if s_cfg.selection_mode() != "stp_improved_ei":
            rows = s.exec(select(StoredProof).where(StoredProof.run_id == h.run_id,
                                                    StoredProof.round > r - s_cfg.ei_rounds)).all()
            return [(p.round, p.problem_id, p.sample) for p in rows]
        found = s.exec(select(Attempt.round, Attempt.problem_id, Attempt.sample, Attempt.proof).where(
            Attempt.run_id == h.run_id, Attempt.verdict == VERIFIED, Attempt.round > r - s_cfg.ei_rounds,
            Attempt.round <= r)).all()
    return capped_proofs(((rnd, pid, k, text or "") for rnd, pid, k, text in found), s_cfg.proof_cap)


def _expert_iteration(cfg: Config, paths: RunPaths, stored: Iterable[tuple[int, str, int]]) -> list[Example]:
    """Proofs (round, problem id, sample) of the last `ei_rounds` rounds (`ei_stored_proofs`), weighted as
    REINFORCE-1/2."""
    s = cfg.solver
    items: dict[int, dict[str, tuple[dict[str, Any], RecordArrays]]] = {}
    out = []
    for rnd, pid, sample in sorted(stored):
        if rnd not in items:
            items[rnd] = {it["key"]: (it, a) for it, a in read_phase_arrays(paths.phase_dir(rnd, "solve"),
                                                                             shards_at(cfg, paths, rnd, "solve"))}
        it, arrays = items[rnd][pid]
        smp = it["samples"][sample]
        w = solver_weight(smp.get("proof") or "", True, True, _length(smp), max_tokens=s.max_tokens,
                          length_penalty_start=s.length_penalty_start, zero_try=s.zero_try, try_comments=s.try_comments)
        if w is not None:
            out += sample_examples(arrays, sample, smp, w)
    return out


def solver_examples(cfg: Config, paths: RunPaths, results: dict[str, ProblemResult],
                    stored: Iterable[tuple[int, str, int]] = (), unsolved: Collection[str] = (),
                    draw: Sequence[str] = (), r: int = 0, carry: Carry = Carry()) -> list[Example]:
    """The Solver's examples of one round: Expert Iteration's window of proofs (`stored`), the GRPO family's
    groups (`draw`, `r`, `carry`: the rollout batch's order and DAPO's re-sampling, see `family_groups`), or
    CISPO's groups / REINFORCE-1/2's proofs of `solver_selection` (`unsolved`: see there)."""
    if cfg.solver.selection_mode() in WINDOW_SELECTIONS:
        return _expert_iteration(cfg, paths, stored)
    if cfg.solver.objective in GRPO_FAMILY:
        return _grpo_family(cfg, family_groups(cfg, results, draw, r, carry))
    band = solver_selection(cfg, results, unsolved)
    return _cispo(cfg, results, band) if cfg.solver.objective == "cispo" else _reinforce(cfg, results, band)


def conjecturer_examples(cfg: Config, paths: RunPaths, r: int,
                         results: dict[str, ProblemResult]) -> tuple[list[Example], dict[str, float]]:
    """The Conjecturer's examples and the round's rewards of its in-band conjectures."""
    c = cfg.conjecturer
    if not (c.enabled and c.train):
        return [], {}
    band = in_band_conjectures(cfg, results)
    reviews = guide_reviews(cfg, paths, r)
    source: dict[str, tuple[Ids, Ids]] = {}
    for item, arrays in read_phase_arrays(paths.phase_dir(r, "conjecture"), shards_at(cfg, paths, r, "conjecture")):
        for k, smp in enumerate(item["samples"]):
            if smp["ok"]:
                cid = conjecture_id(r, smp["statement"])
                if cid not in source:
                    source[cid] = (arrays.prompt_ids, arrays.token_ids(k))
    if c.reward == "stp":  # STP: supervised fine-tuning on its band, weight 1 each (no Guide, no length penalty)
        rewards = dict.fromkeys(sorted(band), 1.0)
        return [Example(source[k][0], source[k][1], w) for k, w in rewards.items()], rewards
    rates = {k: results[k].rate for k in band}
    lengths = {k: len(source[k][1]) for k in band}
    rewards = conjecturer_rewards(sorted(band), rates, {k: reviews[k]["score"] for k in band if k in reviews},
                                  lengths, use_guide=cfg.guide.enabled, max_tokens=c.max_tokens,
                                  length_penalty_start=c.length_penalty_start)
    return [Example(source[k][0], source[k][1], w) for k, w in sorted(rewards.items())], rewards
