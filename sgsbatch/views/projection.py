"""The run projected before launch: each phase's work a round, its wall time, GPU- and CPU-hours,
the round's critical path, the run's days and GPU-hours, and what shard counts would shorten it.

Pure arithmetic over a config, a target count and throughput figures (`Figures`: the
`[projection]` keys, where views/plan.py may replace some by a passed canary's measurements). The model:

* Work a round: T targets, C = T x `unsolved_share` x `conjecturer.samples_per_target` conjectures
  (0 without a Conjecturer). conjecture: C samples; solve: (T + C) x `solver.samples` samples;
  verify: as many proofs; guide: C x `reviewed_share` reviews; train: solve samples x
  `trained_share` (the GRPO family: every group, `trained_samples`) (+ the reviews when the Conjecturer
  trains) sequences of `prompt_tokens` + `mean_tokens`. Every sample generates `mean_tokens`. With
  `solver.rollout_prompts` T is the round's rollout batch (its draw), and views/rollout_projection.py
  projects the rollout steps both ways (`Projection.rollout`); views/reference_projection.py the same
  run on the SGS reference's one-node layout (`Projection.reference`).
* Decode tokens/s per GPU at a context L = `prompt_tokens` + `mean_tokens`: min(short figure,
  long figure x `generation.max_model_len` / L): the KV cache bounds how many sequences decode at
  once, so throughput falls as 1 / context (config/simulated_time.py's `decode_rate`, which a
  rehearsal with `projection.simulated_time_scale` > 0 also sleeps by).
* A task: its start-up + its share of the work / its rate (generation: GPUs x decode rate;
  verify: CPUs x Lean proofs/s, plus `repl_start_s` per REPL start, one every
  `verification.max_proofs_per_process` proofs of a core; train: GPUs x nodes x train tokens/s,
  plus `model_load_s` + `checkpoint_write_s` per trained role (with `train.optimizer = "carry"` its optimizer
  state's write too, `optimizer_write_factor`); the Solver's forward-only scoring passes,
  `scoring_passes`, add `scoring_pass_share` of its tokens each, and the KL's reference one more
  `model_load_s`; the reference is freed before the policy loads, so it adds no memory). A phase's wall: `queue_wait_s` +
  waves x task time, `slurm.<phase>.array_parallelism` tasks a wave; its GPU-hours (CPU-hours):
  tasks x GPUs (CPUs) x task time.
* The round's phases run one after another (each waits for the one before), so the critical path
  is the whole chain; its longest phase is where more shards shorten the round (`advise`). Verify
  streaming behind solve (`verification.streaming`, `_streamed`) is on the path only for what lies
  after solve's end: the later of its own excess over solve and the last problem's proofs. The run:
  `run.rounds` such rounds (round 0's init job not counted).

* `solver.mode = "search"`: the solve phase is a search phase, projected from per-expansion
  figures by views/search_projection.py (its docstring: GPU side and Lean side of a task, one
  after the other); verify then checks only the found proofs (`search_solved_share` of the
  searches). `Projection.search` holds its figures.

Not modelled: prefill, the unsolved set shrinking as the run goes, the slowest shard's tail,
requeues and retries. A phase that
generates or trains without GPUs (tiny configs) is not projected: no figure covers it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from sgsbatch.backends.batches import GRPO_FAMILY
from sgsbatch.backends.optimizer_state import carried_state_bytes
from sgsbatch.config.schema import MAX_TASKS, Config
from sgsbatch.config.simulated_time import decode_rate
from sgsbatch.views.eval_projection import EvalPlan
from sgsbatch.views.reference_projection import ReferencePlan, reference_plan
from sgsbatch.views.rollout_projection import RolloutPlan, rollout_plan
from sgsbatch.views.search_projection import SearchPlan, search_plan

GENERATING = ("conjecture", "solve", "guide")
SHARDED = (*GENERATING, "verify")
# the throughput figures: a `[projection]` key each, which a canary's measurement may replace
FIGURES = ("decode_short_tokens_per_s", "decode_long_tokens_per_s", "lean_proofs_per_s", "repl_start_s",
           "model_load_s", "train_tokens_per_s", "checkpoint_write_s", "queue_wait_s", "lean_tactic_s",
           "weight_update_s")
SEARCH_FIGURES = ("lean_tactic_s",)  # used only with solver.mode = "search"
ROLLOUT_FIGURES = ("weight_update_s",)  # used only with solver.rollout_prompts > 0
PUBLISHED = "published ([projection] keys; `sgsbatch config keys projection` names each source)"


@dataclass(frozen=True)
class Figures:
    """Throughput figures by name (FIGURES) and where each came from, in words."""

    values: dict[str, float]
    sources: dict[str, str]

    def __getitem__(self, name: str) -> float:
        return self.values[name]

    def with_figure(self, name: str, value: float, source: str) -> Figures:
        return Figures({**self.values, name: value}, {**self.sources, name: source})


def published(cfg: Config) -> Figures:
    """The `[projection]` figures of `cfg`, each from its key (its help text names the source)."""
    return Figures({n: float(getattr(cfg.projection, n)) for n in FIGURES},
                   dict.fromkeys(FIGURES, PUBLISHED))


def decode_tokens_per_s(cfg: Config, f: Figures) -> float:
    """One GPU's decode tokens/s at the mean context (prompt + generated tokens)."""
    context = max(1.0, cfg.projection.prompt_tokens + cfg.projection.mean_tokens)
    return decode_rate(f["decode_short_tokens_per_s"], f["decode_long_tokens_per_s"], cfg.generation.max_model_len,
                       context)


@dataclass(frozen=True)
class PhasePlan:
    """One phase of a round: its tasks, work and times; rate/times None when not projected."""

    phase: str
    shards: int
    gpus: int  # per task (the train job: all its nodes' GPUs)
    cpus: int  # per task (the train job: all its nodes' CPUs)
    items: float  # samples, proofs or training sequences a round
    unit: str
    tokens: float  # generated (train: trained) tokens a round; 0 for verify
    rate: float | None  # per task: tokens/s (proofs/s for verify)
    startup_s: float
    task_s: float | None
    wall_s: float | None
    gpu_hours: float | None
    cpu_hours: float | None
    path_s: float | None = None  # its share of the round's critical path: wall_s, unless it streams

    @property
    def on_path_s(self) -> float | None:
        return self.wall_s if self.path_s is None else self.path_s

    def to_json(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "path_s": self.on_path_s}


@dataclass(frozen=True)
class Projection:
    """A round's phases, and the run of `rounds` such rounds."""

    targets: int
    rounds: int
    phases: tuple[PhasePlan, ...]
    figures: Figures
    search: SearchPlan | None = None  # solver.mode = "search": the search phase's figures
    sampled: int = -1  # targets a round samples (solver.rollout_prompts: its draw); -1 = `targets`
    rollout: RolloutPlan | None = None  # solver.rollout_prompts > 0: the rollout steps, chain and colocated
    reference: ReferencePlan | None = None  # the same run on the SGS reference's one-node layout
    eval: EvalPlan | None = None  # eval.every_rounds > 0: the evaluation jobs beside the chain (views/plan.py sets it)

    def phase(self, name: str) -> PhasePlan | None:
        return next((p for p in self.phases if p.phase == name), None)

    @property
    def projected(self) -> list[PhasePlan]:
        return [p for p in self.phases if p.wall_s is not None]

    @property
    def not_projected(self) -> list[str]:
        return [p.phase for p in self.phases if p.wall_s is None]

    @property
    def round_s(self) -> float:
        return sum(p.on_path_s or 0.0 for p in self.phases)

    @property
    def critical(self) -> PhasePlan | None:
        """The phase with the longest share of the chain (the chain itself is the critical path)."""
        return max(self.projected, key=lambda p: p.on_path_s or 0.0, default=None)

    def hours(self, what: str) -> float:
        """GPU-hours ("gpu") or CPU-hours ("cpu") of one round."""
        return sum(getattr(p, f"{what}_hours") or 0.0 for p in self.phases)

    @property
    def run_days(self) -> float:
        return self.rounds * self.round_s / 86400

    def to_json(self) -> dict[str, Any]:
        crit = self.critical
        return {"targets": self.targets, "rounds": self.rounds, "phases": [p.to_json() for p in self.phases],
                "path": [p.phase for p in self.projected], "critical_phase": crit.phase if crit else None,
                "not_projected": self.not_projected, "round_s": self.round_s,
                "round_gpu_hours": self.hours("gpu"), "round_cpu_hours": self.hours("cpu"),
                "run": {"days": self.run_days, "gpu_hours": self.rounds * self.hours("gpu"),
                        "cpu_hours": self.rounds * self.hours("cpu")},
                "figures": {n: {"value": self.figures[n], "source": self.figures.sources[n]} for n in FIGURES},
                "search": self.search.to_json() if self.search else None,
                "sampled": self.targets if self.sampled < 0 else self.sampled,
                "rollout": self.rollout.to_json() if self.rollout else None,
                "reference": self.reference.to_json() if self.reference else None,
                "eval": self.eval.to_json() if self.eval else None}


def _phase(cfg: Config, f: Figures, phase: str, items: float, unit: str, tokens: float, per_task: float,
           startup_s: float, shards: int, gpus: int, cpus: int, work: float, busy_s: float | None = None) -> PhasePlan:
    """A phase of `shards` tasks sharing `work` (tokens or proofs) at `per_task` of it a second
    (`busy_s`: a task's seconds after its start-up, when that is not work / rate: a search task)."""
    if per_task <= 0:
        return PhasePlan(phase, shards, gpus, cpus, items, unit, tokens, None, startup_s, None, None, None, None)
    task_s = startup_s + (work / shards / per_task if busy_s is None else busy_s)
    waves = math.ceil(shards / max(1, cfg.phase_resources(phase).array_parallelism))
    return PhasePlan(phase, shards, gpus, cpus, items, unit, tokens, per_task, startup_s, task_s,
                     f["queue_wait_s"] + waves * task_s, shards * gpus * task_s / 3600, shards * cpus * task_s / 3600)


def scoring_passes(cfg: Config) -> int:
    """Forward-only passes the trainer makes over the Solver's sequences before its first update
    (backends/reference.py): the recomputed old log-probs (`train.old_logprobs = "recompute"`, CISPO and the
    GRPO family) and the KL's reference (`solver.kl_beta` > 0); round 0, where one pass gives both, is not
    told apart."""
    family = cfg.solver.objective in GRPO_FAMILY
    recompute = cfg.train.old_logprobs == "recompute" and (family or cfg.solver.objective == "cispo")
    return int(recompute) + int(family and cfg.solver.kl_beta > 0)


def project(cfg: Config, targets: int, figures: Figures) -> Projection:
    """The projection of a round of `cfg` with `targets` targets (see the module docstring)."""
    pj, f = cfg.projection, figures
    phases = cfg.phases_of_round(1)
    sampled = min(targets, cfg.solver.rollout_draw()) if cfg.solver.rollout_draw() else targets
    conj = sampled * pj.unsolved_share * cfg.conjecturer.samples_per_target if "conjecture" in phases else 0.0
    samples = (sampled + conj) * cfg.solver.samples
    reviews = conj * pj.reviewed_share if "guide" in phases else 0.0
    decode = decode_tokens_per_s(cfg, f)
    search = (search_plan(cfg, samples, f["decode_short_tokens_per_s"], f["decode_long_tokens_per_s"],
                          f["lean_tactic_s"]) if cfg.solver.mode == "search" else None)
    proofs = samples if search is None else search.found  # a search's proof only when it found one
    out: list[PhasePlan] = []
    for phase in phases:
        res, n = cfg.phase_resources(phase), cfg.shard_count(phase)
        if phase == "solve" and search is not None:
            out.append(_phase(cfg, f, phase, samples, "searches", search.tokens, search.rate, f["model_load_s"], n,
                              res.gpus, res.cpus, search.tokens, busy_s=search.busy_s))
        elif phase in GENERATING:
            items = {"conjecture": conj, "solve": samples, "guide": reviews}[phase]
            tokens = items * pj.mean_tokens
            out.append(_phase(cfg, f, phase, items, "samples", tokens, res.gpus * decode, f["model_load_s"], n,
                              res.gpus, res.cpus, tokens))
        elif phase == "verify":
            per_core = proofs / n / max(1, res.cpus)
            starts = max(1, math.ceil(per_core / cfg.verification.max_proofs_per_process))
            out.append(_phase(cfg, f, phase, proofs, "proofs", 0.0, res.cpus * f["lean_proofs_per_s"],
                              starts * f["repl_start_s"], n, 0, res.cpus, proofs))
        else:  # train: one job of slurm.train.nodes nodes
            roles = 1 + int(cfg.conjecturer.enabled and cfg.conjecturer.train)
            trained = trained_samples(cfg, samples, sampled)
            seqs = trained * int(cfg.solver.train) + (reviews if roles == 2 else 0.0)
            tokens = seqs * (pj.prompt_tokens + pj.mean_tokens)
            gpus, cpus = res.gpus * res.nodes, res.cpus * res.nodes
            passes = scoring_passes(cfg) * int(cfg.solver.train)
            scoring = passes * pj.scoring_pass_share * trained * (pj.prompt_tokens + pj.mean_tokens)
            ref_load = f["model_load_s"] if cfg.solver.train and cfg.solver.kl_beta > 0 else 0.0
            carry = roles * optimizer_write_factor(cfg) * f["checkpoint_write_s"]
            out.append(_phase(cfg, f, phase, seqs, "sequences", tokens, gpus * f["train_tokens_per_s"],
                              roles * (f["model_load_s"] + f["checkpoint_write_s"]) + ref_load + carry, 1, gpus,
                              cpus, tokens + scoring))
    if cfg.verification.streaming:
        out = [_streamed(cfg, f, p, next(x for x in out if x.phase == "solve")) if p.phase == "verify" else p
               for p in out]
    proj = Projection(targets, cfg.run.rounds, tuple(out), figures, search, sampled)
    return replace(proj, rollout=rollout_plan(cfg, proj, f, decode), reference=reference_plan(cfg, proj, f, decode))


def optimizer_write_factor(cfg: Config) -> float:
    """With `train.optimizer = "carry"`: a role's carried optimizer state (backends/optimizer_state.py) over
    its bf16 weights, in bytes, so its write costs this x `checkpoint_write_s` a round (7 for ZeRO-2 in bf16:
    Adam's moments and the fp32 master, 12 bytes a parameter, plus DeepSpeed's bf16 module copy, 2); 0 with
    "fresh"."""
    if cfg.train.optimizer != "carry":
        return 0.0
    n = 1_000_000  # the ratio does not depend on the size
    t = cfg.train
    return carried_state_bytes(n, zero_stage=t.zero_stage, bf16=t.bf16, keep_fp32_master=t.keep_fp32_master) / (2 * n)


def trained_samples(cfg: Config, samples: float, sampled: float) -> float:
    """The Solver's samples trained on a round: every group for the GRPO family (a rollout batch: its
    `rollout_prompts` groups, DAPO's over-sampled rest unused), else `projection.trained_share` of them."""
    s = cfg.solver
    if s.objective not in GRPO_FAMILY:
        return samples * cfg.projection.trained_share
    return samples * min(1.0, s.rollout_prompts / sampled) if s.rollout_prompts and sampled else samples


def _streamed(cfg: Config, f: Figures, verify: PhasePlan, solve: PhasePlan) -> PhasePlan:
    """Verify streaming behind solve (`verification.streaming`): its tasks start with solve's and end
    at the later of their own time and solve's end + one problem's proofs on a task's cores (the
    tail); its wall is that span from solve's start (what `status` measures), on the path is what
    lies after solve's end. Its tasks hold their CPUs all along."""
    if verify.wall_s is None or solve.wall_s is None or verify.task_s is None:
        return verify
    tail = math.ceil(cfg.solver.samples / max(1, verify.cpus)) / f["lean_proofs_per_s"]
    held = max(verify.task_s, solve.wall_s - f["queue_wait_s"] + tail)
    return replace(verify, wall_s=max(verify.wall_s, solve.wall_s + tail),
                   path_s=max(tail, verify.wall_s - solve.wall_s + tail),
                   cpu_hours=verify.shards * verify.cpus * held / 3600)


def pace_cpus(proj: Projection) -> int | None:
    """The verify cores that keep pace with solve's decoding when verify streams (solve's proofs a
    second / Lean proofs a second per core), or None without both phases projected: fewer cores
    leave a longer tail after solve, more wait idle for proofs."""
    solve, verify = proj.phase("solve"), proj.phase("verify")
    if solve is None or verify is None or solve.wall_s is None or verify.path_s is None:
        return None
    decoding_s = solve.wall_s - proj.figures["queue_wait_s"] - solve.startup_s  # the first task's start-up aside
    return math.ceil(verify.items / max(decoding_s, 1e-9) / proj.figures["lean_proofs_per_s"])


@dataclass(frozen=True)
class Advice:
    """More shards for `phase` within a budget: the `--set` values and the projection they give
    (`after` None: the phase is at the budget already, or more shards would not shorten it)."""

    phase: str
    longest: str  # the longest phase (train cannot be sharded: then `phase` is the longest that can)
    resource: str  # "GPU" or "CPU"
    per_task: int
    budget: int
    budget_key: str
    sets: dict[str, int]
    before: Projection
    after: Projection | None

    def set_args(self) -> str:
        return " ".join(f"--set {k}={v}" for k, v in self.sets.items())

    def to_json(self) -> dict[str, Any]:
        after = self.after
        changed = after.phase(self.phase) if after else None
        return {"phase": self.phase, "longest": self.longest, "resource": self.resource, "per_task": self.per_task,
                "budget": self.budget, "budget_key": self.budget_key, "sets": self.sets,
                "set_args": self.set_args() if after else "",
                "phase_wall_s": changed.wall_s if changed else None,
                "round_s": after.round_s if after else None, "run_days": after.run_days if after else None,
                "run_gpu_hours": after.rounds * after.hours("gpu") if after else None}


def gpu_budget(cfg: Config) -> int:
    """`projection.gpu_budget`, or (0) the train job's GPUs."""
    return cfg.projection.gpu_budget or cfg.slurm.train.gpus * cfg.slurm.train.nodes


def _shard_sets(cfg: Config, phase: str, n: int) -> dict[str, int]:
    """`shards.<phase>` = n; when solve changes, a set shards.verify stays a multiple of it: the
    smallest not below its count, else (over `projection.cpu_budget`) the largest within it, at least n."""
    sets = {f"shards.{phase}": n}
    if phase == "solve" and cfg.shards.verify:
        up = math.ceil(cfg.shards.verify / n) * n
        fits = cfg.projection.cpu_budget // max(1, cfg.slurm.verify.cpus) // n * n
        sets["shards.verify"] = up if up <= fits else max(n, fits)
    return sets


def with_sets(cfg: Config, sets: dict[str, int]) -> Config:
    return replace(cfg, shards=replace(cfg.shards, **{k.split(".", 1)[1]: v for k, v in sets.items()}))


def advise(cfg: Config, targets: int, figures: Figures) -> Advice | None:
    """The fewest shards of the longest shardable phase that bring it within `advice_margin` of the
    shortest the budget allows (GPUs: `gpu_budget`; verify's CPUs: `projection.cpu_budget`), at most one
    task a problem; None when a phase is not projected (the round's path would be a part of it)."""
    before = project(cfg, targets, figures)
    crit = before.critical
    shardable = [p for p in before.projected if p.phase in SHARDED]
    if crit is None or not shardable or before.not_projected:  # a part of the round: its path is not the round's
        return None
    target = crit if crit.phase in SHARDED else max(shardable, key=lambda p: p.on_path_s or 0.0)
    res = cfg.phase_resources(target.phase)
    if target.phase == "verify":
        resource, per, budget, key = "CPU", res.cpus, cfg.projection.cpu_budget, "projection.cpu_budget"
        step = cfg.shard_count("solve")  # verify tasks: a multiple of the solve tasks
    else:
        resource, per, budget, key = "GPU", res.gpus, gpu_budget(cfg), "projection.gpu_budget"
        step = 1
    # a task holds whole problems (a target or conjecture and its samples): never more tasks than problems
    conj = before.phase("conjecture")
    problems = (before.sampled if before.sampled >= 0 else targets) + math.ceil(conj.items if conj else 0)
    limit = min(MAX_TASKS, budget // max(1, per), max(1, problems))
    now = cfg.shard_count(target.phase)
    tried = []
    for n in range((now // step + 1) * step, limit + 1, step):
        sets = _shard_sets(cfg, target.phase, n)
        got = project(with_sets(cfg, sets), targets, figures)
        tried.append((sets, got, got.phase(target.phase)))
    best = min((p.on_path_s or 0.0 for _, _, p in tried if p is not None), default=None)
    current = target.on_path_s or 0.0
    pick = next(((sets, got) for sets, got, p in tried if best is not None and best < current and p is not None
                 and (p.on_path_s or 0.0) <= best * (1 + cfg.projection.advice_margin)), None)
    return Advice(target.phase, crit.phase, resource, per, budget, key, pick[0] if pick else {}, before,
                  pick[1] if pick else None)
