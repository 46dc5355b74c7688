"""Round metrics: every metric name, defined once, and TensorBoard writing.

Names: the constants and name functions below are the only place a metric name is spelled;
ingestion (round/lifecycle.round_rows), the round's end (lifecycle.finish_round), `status` and
`fit` use them. Values are computed where their inputs are (ingestion and the round's end).

TensorBoard: one step per round, and a second x-axis in generations so far; per optimizer step,
`train_step/<role>/*` at the role's global step in `tb/train_steps/<role>/` (round/step_metrics.py).

Events go under `runs/<name>/tb/` (step = round) and `runs/<name>/tb/by_generations/` (step =
generations so far), so `tensorboard --logdir runs/` shows every run. Writing a round again
(a retried train job) first purges that round's points (`purge_step`), so resuming never
duplicates them. Simulated and smoke runs are labelled in a text summary on every round.
The per-bin counts `solve_rate_hist/<kind>_<k>` (problems with k of n samples verified) are
also written as one TensorBoard histogram of solve rates k/n per kind (HISTOGRAMS tab). Each
round's end also replaces the run's one HParams session (`tb/hparams/`, HPARAMS tab): every config
key's value beside the latest headline metrics, so runs compare by their config in one table.

Alarms (`alerts/<kind>`, judged by round/alarms.py; value: the number raised, 0 = none): a round's
end writes those it can judge beside its metrics (step = round, not by generations); `watch`
writes what it sees live, stuck shards included, to `tb/live_alerts/` (a run of its own, never
purged by a round's end, so a hang stays visible after the round finished). They are judgements
against `alerts.*` thresholds at a moment (disk), not facts of the round: they are not stored in
the database's metrics (whose measured inputs are: `verify/*_rate`, `wall_s/*`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# -- the headline and run-level counts (written when a round ends)
CUMULATIVE_SOLVE_RATE = "cumulative_solve_rate"  # solved targets / targets: the headline
SOLVED_TARGETS = "solved_targets"
GENERATIONS_TOTAL = "generations/total"  # generations so far: the scaling law's C
# -- written at ingestion
GENERATIONS_ROUND = "generations/round"  # Conjecturer + Solver samples of the round (not Guide reviews)
GUIDE_REVIEWS = "guide/reviews"  # Guide generations of the round (not in generations/*)
SOLVER_TRY_PROOFS = "solver/try_proofs"  # verified Solver samples using `try` (dropped, or weight 0 for CISPO)
SOLVER_LENGTH_PENALISED = "solver/length_penalised"  # Solver samples past length_penalty_start x max_tokens
TOKENS_ROUND = "tokens/round"
PASS_AT_8 = "pass@8"
PASS_AT_1 = "pass@1"
VERIFY_TIMEOUT_RATE = "verify/timeout_rate"
VERIFY_ERROR_RATE = "verify/error_rate"
VERIFY_VERIFIED = "verify/verified"
# the verifier's own refusals (round/refusals.py): static checks and the kernel re-check, not Lean's failures
VERIFY_REFUSED_RATE = "verify/refused_rate"  # refusals / proofs that reached the verifier
REFUSED_PREFIX = "verify/refused/"
REFUSED_ITEMS_PREFIX = "verify/refused_items/"
GUIDE_FAILED_REVIEWS = "guide/failed_reviews"
STORE_NEW_PROOFS = "store/new_proofs"
ROUND_WALL_S = "wall_s/round"  # the round's duration: first task start to its end (round/timing.py)
CONJECTURE_STAGES = ("generated", "well_formed", "unique", "valid", "in_band")
GUIDE_MEANS = ("score", "relevance", "redundant", "complexity")
HIST_PREFIX = "solve_rate_hist/"


def conjectures(stage: str) -> str:
    assert stage in CONJECTURE_STAGES, stage
    return f"conjectures/{stage}"


def conjectures_rejected(reason: str) -> str:
    return f"conjectures/rejected/{reason}"


def verify_refused(reason: str) -> str:
    """`verify/refused/<reason>`: the round's proofs refused by that rule of the verifier."""
    return f"{REFUSED_PREFIX}{reason}"


def verify_refused_item(reason: str, item: str) -> str:
    """`verify/refused_items/<reason>/<item>`: refusals for `reason` that `item` set off (a tactic, a name)."""
    assert "/" not in reason and "/" not in item, (reason, item)
    return f"{REFUSED_ITEMS_PREFIX}{reason}/{item}"


def extraction_failures(reason: str) -> str:
    return f"extraction_failures/{reason}"


def guide_mean(key: str) -> str:
    assert key in GUIDE_MEANS, key
    return f"guide/{key}_mean"


def solve_rate_hist(kind: str, k: int) -> str:
    """Problems of `kind` (targets | conjectures) with k of n samples verified."""
    return f"{HIST_PREFIX}{kind}_{k}"


GEN_STATS = ("tokens_per_s", "startup_s", "sequences", "tokens")
# tactic-level search (solver.mode = "search"; round/search_metrics.py): per round, over the solve tasks
SEARCH_STATS = ("searches", "found", "verified", "tactic_mode_rejected", "expansions", "depth_mean", "edges",
                "failed_edges", "malformed", "lean_cpu_s", "generated_tokens", "waves", "tokens_per_call",
                "calls_per_s", "stop_exhausted", "stop_expansions", "stop_time", "stop_start_failed")


def search(what: str) -> str:
    """`search/<what>` (SEARCH_STATS): searches run, found in tactic mode, verified by the verify phase, found
    but not verified (tactic mode is not the verdict), expansions, mean depth of found proofs, tactics applied
    and failed, malformed tactic replies, Lean seconds, generated tokens, engine calls (waves), generated tokens
    per call, calls per engine second, and how the searches without a proof ended."""
    assert what in SEARCH_STATS, what
    return f"search/{what}"
ROLE_OF_PHASE = {"conjecture": "conjecturer", "solve": "solver", "guide": "guide"}
CISPO_CLIP_FRACTION = "train/solver_clip_fraction"  # CISPO: completion tokens whose weight hit cispo_clip_max;
# the GRPO family: completion tokens on either clipped side of the ratio (TRL's clip_ratio/region_mean)
# -- the GRPO family (solver.objective grpo, dr_grpo, dapo, gspo), written at the round's end
SOLVER_GROUPS = "solver/groups"  # groups the Solver trained on
SOLVER_ZERO_STD_GROUPS = "solver/zero_std_groups"  # of those, groups whose rewards are all equal (advantage 0)
SOLVER_OVERLONG_SHAPED = "solver/overlong_shaped"  # DAPO: samples whose reward got the overlong penalty
SOLVER_OVERLONG_FILTERED = "solver/overlong_filtered"  # DAPO with solver.overlong_filter: truncated samples masked
# solver.rollout_prompts > 0: groups the rollout batch lacks after DAPO's dynamic sampling (trained smaller), and
# groups kept but past the batch (an over-sampled draw's rest: generated, not trained)
SOLVER_ROLLOUT_SHORT = "solver/rollout_short"
SOLVER_ROLLOUT_UNUSED = "solver/rollout_unused"
# DAPO's re-sampling (solver.rollout_max_gen_batches > 1): the rollout step's generation batches so far (this
# round's included), its target groups kept so far, and 1 when this round kept too few: it trained nothing and
# the next round samples again with the same weights
SOLVER_ROLLOUT_GEN_BATCHES = "solver/rollout_gen_batches"
SOLVER_ROLLOUT_KEPT = "solver/rollout_kept"
SOLVER_ROLLOUT_RESAMPLED = "solver/rollout_resampled"
# groups an earlier round left pending that a change of method (an objective outside the family) cannot train
SOLVER_ROLLOUT_DROPPED = "solver/rollout_dropped"
# the trainer's statistics over the completion tokens it ran (TrainResult fields, backends/objectives.py)
TRAIN_RATIO_STATS = {"clip_fraction_low": "clip_low_fraction", "clip_fraction_high": "clip_high_fraction",
                     "sampler_kl": "sampler_kl", "seq_ratio_mean": "seq_ratio_mean", "seq_ratio_std": "seq_ratio_std",
                     "ref_kl": "ref_kl"}


def dropped_groups(kind: str) -> str:
    """DAPO's dynamic sampling: groups dropped because every sample was correct (all_pass) or none (all_fail)."""
    assert kind in ("all_pass", "all_fail"), kind
    return f"solver/dropped_groups/{kind}"


def train_ratio(role: str, what: str) -> str:
    """`train/<role>_<what>` for TRAIN_RATIO_STATS: clip fractions per side (ratio < 1 - clip_low with A < 0,
    ratio > 1 + clip_high with A > 0), the sampler KL (mean over tokens of r - 1 - log r: KL(sampler || policy)),
    the mean and std over sequences of s = exp(mean_t log r) (GSPO's sequence ratio), and (the GRPO family)
    the mean per token of the KL estimate to the reference policy in the loss (solver.kl_estimator; 0 when
    solver.kl_beta = 0)."""
    assert what in TRAIN_RATIO_STATS, what
    return f"train/{role}_{what}"


# -- per optimizer step (round/step_metrics.py writes them at the round's end; x = the role's global step)
TRAIN_STEP_PREFIX = "train_step/"
TRAIN_STEPS_DIR = "train_steps"  # the `tb/` subdirectory, one TensorBoard run per role: tb/train_steps/<role>/
TRAIN_STEP_LABELS = "train_step/labels"  # a text on a role's steps run: SIMULATED steps say so
# name under train_step/<role>/ -> the field of a steps.jsonl record (backends/train_steps.TrainStep)
TRAIN_STEP_STATS = {"loss": "loss", "clip_fraction": "clip_fraction", "clip_fraction_low": "clip_fraction_low",
                    "clip_fraction_high": "clip_fraction_high", "ratio_mean": "ratio_mean", "ratio_std": "ratio_std",
                    "sampler_kl": "sampler_kl", "ref_kl": "ref_kl", "entropy": "entropy", "grad_norm": "grad_norm",
                    "lr": "lr", "tokens": "tokens", "sequences": "sequences", "step_s": "step_s", "round": "round"}


def train_step(role: str, what: str) -> str:
    """`train_step/<role>/<what>` (TRAIN_STEP_STATS): one point per optimizer step of `role`, at its global
    step (its optimizer steps in all rounds so far); `round` is the round the step belongs to."""
    assert what in TRAIN_STEP_STATS, what
    return f"{TRAIN_STEP_PREFIX}{role}/{what}"


def sampled_entropy(phase: str) -> str:
    """Mean - log p of the tokens a role sampled in the round (the logprobs recorded with them;
    `generation.logprobs = "raw"`: the model's temperature-1 distribution). At temperature 1 and
    top_p 1 it is a Monte-Carlo estimate of the per-token entropy of the sampling distribution."""
    return f"entropy/sampled/{ROLE_OF_PHASE[phase]}"


def train_entropy(role: str) -> str:
    """Mean entropy of the current policy's full next-token distribution over the completion tokens
    trained on in the round (exact, from the trainer's logits, before each step's update)."""
    return f"entropy/train/{role}"
COST_GPU_HOURS = "cost/gpu_hours"  # the round's GPU-hours (sacct: elapsed x allocated GPUs, requeues included)
COST_CPU_HOURS = "cost/cpu_hours"


def gen(phase: str, what: str) -> str:
    """A generating phase's engine statistics over its tasks (see round/lifecycle.generation_metrics)."""
    assert what in GEN_STATS, what
    return f"gen/{phase}/{what}"


def cost(phase: str, what: str) -> str:
    assert what in ("gpu_hours", "cpu_hours"), what
    return f"cost/{phase}/{what}"


def wall_s(phase: str) -> str:
    return f"wall_s/{phase}"




def train(role: str, what: str) -> str:
    assert what in ("steps", "sequences", "loss"), what
    return f"train/{role}_{what}"


def reward_mean(role: str) -> str:
    return f"{role}/reward_mean"


def solve_rate_histograms(metrics: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """`add_histogram_raw` arguments per kind, from the `solve_rate_hist/<kind>_<k>` counts."""
    bins: dict[str, dict[int, float]] = {}
    for name, value in metrics.items():
        if name.startswith(HIST_PREFIX):
            kind, k = name[len(HIST_PREFIX):].rsplit("_", 1)
            bins.setdefault(kind, {})[int(k)] = value
    out = {}
    for kind, counts in bins.items():
        n = max(counts)
        num = sum(counts.values())
        if n == 0 or num == 0:
            continue
        rates = [k / n for k in range(n + 1)]
        counts_list = [counts.get(k, 0.0) for k in range(n + 1)]
        seen = [x for x, c in zip(rates, counts_list, strict=True) if c]
        out[f"{HIST_PREFIX}{kind}"] = {
            "min": min(seen), "max": max(seen), "num": num,
            "sum": sum(x * c for x, c in zip(rates, counts_list, strict=True)),
            "sum_squares": sum(x * x * c for x, c in zip(rates, counts_list, strict=True)),
            "bucket_limits": rates, "bucket_counts": counts_list}
    return out


def write_tensorboard(tb_dir: Path, r: int, metrics: Mapping[str, float], *, simulated: bool, smoke: bool,
                      rehearsal: bool = False, alerts: Mapping[str, float] | None = None) -> None:
    """Round r's points: `metrics` (both x-axes), histograms, labels and `alerts` (step = round only)."""
    from torch.utils.tensorboard import SummaryWriter

    generations = int(metrics.get(GENERATIONS_TOTAL, 0))
    labels = [x for x, on in (("REHEARSAL: SIMULATED generation, verifier and trainer", rehearsal),
                              ("SIMULATED verifier (not Lean)", simulated and not rehearsal), ("smoke run", smoke)) if on]
    before = _event_files(tb_dir)
    with SummaryWriter(str(tb_dir), purge_step=r) as w:
        for name, value in sorted({**metrics, **(alerts or {})}.items()):
            w.add_scalar(name, value, r)
        for tag, hist in solve_rate_histograms(metrics).items():
            w.add_histogram_raw(tag, global_step=r, **hist)
        w.add_text("run/labels", ", ".join(labels) or "research run", r)
    _sort_last(tb_dir, before)
    before = _event_files(tb_dir / "by_generations")
    with SummaryWriter(str(tb_dir / "by_generations"), purge_step=generations) as w:
        for name, value in sorted(metrics.items()):
            w.add_scalar(name, value, generations)
    _sort_last(tb_dir / "by_generations", before)


_EVENTS = "events.out.tfevents."


def _event_files(d: Path) -> set[str]:
    return {p.name for p in d.glob(_EVENTS + "*")} if d.is_dir() else set()


def _sort_last(d: Path, before: set[str]) -> None:
    """Rename the event file just written in `d` (the one not in `before`) so that it sorts after every
    other: TensorBoard reads a directory's files in name order and a later file's `purge_step` drops the
    points an earlier one holds from that step on. The writer names a file by the second, host, pid and an
    unpadded counter, so two writes in one second (a re-ended round) can sort backwards ("...12" < "...9");
    the name's time is raised past the newest one's instead (the events keep their own wall times)."""
    made = sorted(_event_files(d) - before)
    if len(made) != 1 or not before or made[0] > max(before):
        return
    stamp, rest = made[0][len(_EVENTS):].split(".", 1)
    newest = max((int(n[len(_EVENTS):].split(".", 1)[0]) for n in before), default=0)
    (d / made[0]).rename(d / f"{_EVENTS}{max(int(stamp), newest) + 1:0{len(stamp)}d}.{rest}")


HPARAMS = "hparams"  # the `tb/` subdirectory of the run's one HParams session
HPARAM_METRICS = (CUMULATIVE_SOLVE_RATE, PASS_AT_8, PASS_AT_1, SOLVED_TARGETS, GENERATIONS_TOTAL, ROUND_WALL_S)


def write_hparams(tb_dir: Path, r: int, hparams: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
    """The run's HParams entry (TensorBoard's HPARAMS tab): every config key's value (`hparams`, a flat
    config; booleans, lists and tables as JSON text: true, [0.9, 0.95]) and round r's `HPARAM_METRICS`, under `tb/hparams/`. One
    session per run: each round's end replaces the last, so the tab shows the latest values."""
    import json

    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.summary import hparams as hparams_summary

    out = tb_dir / HPARAMS
    for old in out.glob("events.out.tfevents.*"):
        old.unlink()
    # TOML's spelling for what is not a number or a string (torch would record a bool as 1.0)
    values = {k: v if isinstance(v, int | float | str) and not isinstance(v, bool) else json.dumps(v, sort_keys=True)
              for k, v in hparams.items()}
    final = {k: float(metrics[k]) for k in HPARAM_METRICS if k in metrics}
    with SummaryWriter(str(out)) as w:
        for summary in hparams_summary(values, final):
            w.file_writer.add_summary(summary)
        for name, value in final.items():
            w.add_scalar(name, value, r)


EVAL_PREFIX = "eval/"  # held-out evaluation (ops/evaluate.py): `eval/<set>/pass@<k>` at the round evaluated
EVAL_TB = "eval"  # the `tb/` subdirectory held-out evaluation writes to


def eval_pass_at(name: str, k: int) -> str:
    """`eval/<set>/pass@<k>`: the unbiased pass@k (logic/evaluation.py) of the Solver's weights after the round on set `name`."""
    assert "/" not in name and k >= 1, (name, k)
    return f"{EVAL_PREFIX}{name}/pass@{k}"


def write_eval_tensorboard(tb_dir: Path, r: int, metrics: Mapping[str, float], *, simulated: bool) -> None:
    """Held-out evaluation's points at step r (the round evaluated) under `tb/eval/`: a run of its own, which
    a round's end never purges (an evaluation may finish after later rounds); evaluating a round again adds
    its points again at the same step (TensorBoard shows both)."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tb_dir / EVAL_TB)) as w:
        for name, value in sorted(metrics.items()):
            w.add_scalar(name, value, r)
        if simulated:
            w.add_text("eval/labels", "SIMULATED (not Lean or not a model)", r)


ALERT_KINDS = ("stuck_shards", "verify_error_rate", "verify_refusals", "slow_phase", "disk_over_budget")
LIVE_ALERTS = "live_alerts"  # the `tb/` subdirectory `watch` writes live alarms to


def alert(kind: str) -> str:
    """`alerts/<kind>`: an alarm (round/alarms.py, views/progress.py); in TensorBoard, the number raised."""
    assert kind in ALERT_KINDS, kind
    return f"alerts/{kind}"


def write_live_alerts(tb_dir: Path, r: int, values: Mapping[str, float]) -> None:
    """`watch`'s live alarm values at step r (the running round) under `tb/live_alerts/`."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tb_dir / LIVE_ALERTS)) as w:
        for name, value in sorted(values.items()):
            w.add_scalar(name, value, r)


# `status RUN` shows the last completed round's metrics in these groups, in this order (cli/console.py): a
# name is in the first group that lists it exactly or a prefix of it (ending in "/"); what no group claims
# (a metric added without a group here) is shown last, under OTHER_GROUP, never dropped. Within a group the
# exact names come first, in the order listed, then the rest by name.
METRIC_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("solve rate", (CUMULATIVE_SOLVE_RATE, SOLVED_TARGETS, PASS_AT_1, PASS_AT_8, "store/")),
    ("held-out evaluation", (EVAL_PREFIX,)),
    ("generation", ("generations/", "tokens/", "gen/", "entropy/sampled/")),
    ("conjectures", ("conjectures/",)),
    ("guide", ("guide/",)),
    ("solver", ("solver/",)),
    ("conjecturer", ("conjecturer/",)),
    ("verification", ("verify/", "extraction_failures/")),
    ("search", ("search/",)),
    ("training", ("train/", "entropy/train/")),
    ("train steps", (TRAIN_STEP_PREFIX,)),
    ("cost", ("cost/",)),
    ("wall time", ("wall_s/",)),
    ("solve-rate histogram", (HIST_PREFIX,)),
)
OTHER_GROUP = "other"


def metric_groups(names: Iterable[str]) -> list[tuple[str, list[str]]]:
    """`names` grouped by METRIC_GROUPS (groups without a name left out), then OTHER_GROUP."""
    placed: dict[str, list[tuple[tuple[int, str], str]]] = {}
    for name in names:
        where = OTHER_GROUP, (0, name)
        for title, members in METRIC_GROUPS:
            if name in members:
                where = title, (members.index(name), "")
                break
            if any(m.endswith("/") and name.startswith(m) for m in members):
                where = title, (len(members), name)
                break
        placed.setdefault(where[0], []).append((where[1], name))
    order = [title for title, _ in METRIC_GROUPS] + [OTHER_GROUP]
    return [(title, [n for _, n in sorted(placed[title])]) for title in order if title in placed]
