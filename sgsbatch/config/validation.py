"""Which configs are possible: every value that has the right type but cannot run, as (key, message).

`semantic_errors` is what `launch`, `--dry-run`, `plan`, `resume --set` and `verify --set` refuse a
config with (config/loading.py names the file): the ranges declared with the keys (config/schema.py
`Bound`, checked by `bound_errors`), and the rules across keys or over several keys at once (an objective
and its selection, shard counts that divide, a model that fits vLLM's CPU build). Not covered: the
keys themselves and their defaults (config/schema.py), reading TOML (config/loading.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sgsbatch.config.schema import (
    EVAL_SET_NAME,
    MAX_CPUS,
    MAX_GPUS,
    MAX_TASKS,
    PUBLISHED_CLIP,
    RUN_NAME,
    SLURM_MEM,
    SLURM_TABLES,
    TINY_RANDOM,
    VLLM_CPU_HEAD_SIZES,
    WINDOW_SELECTIONS,
    Config,
)


def _short(value: str, n: int = 60) -> str:
    return repr(value) if len(value) <= n else repr(value[:n]) + f"... ({len(value)} characters)"


def bound_errors(cfg: Any, prefix: str = "") -> list[tuple[str, str]]:
    """(key, message) for every number key outside the range declared with it (config/declare.py `Bound`),
    walking the config's tables in declaration order."""
    errs: list[tuple[str, str]] = []
    for f in dataclasses.fields(cfg):
        value, name = getattr(cfg, f.name), f"{prefix}{f.name}"
        bound = f.metadata.get("bound")
        if bound is not None and not bound.holds(value):
            errs.append((name, bound.message.format(value=value)))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            errs += bound_errors(value, name + ".")
    return errs


def semantic_errors(cfg: Config) -> list[tuple[str, str]]:
    """(key, message) for every value that has the right type but is impossible: the declared ranges
    (`bound_errors`), then the rules across keys."""
    errs: list[tuple[str, str]] = bound_errors(cfg)

    def check(ok: bool, key: str, msg: str) -> None:
        if not ok:
            errs.append((key, msg))

    for rules in (_run_errors, _solver_errors, _selection_errors, _search_errors, _train_errors,
                  _verification_errors, _slurm_errors, _eval_errors):
        rules(cfg, check)
    return errs


def _run_errors(cfg: Config, check: Callable[[bool, str, str], None]) -> None:
    """The run's name, and models the generation backend can run."""
    check(RUN_NAME.fullmatch(cfg.run.name) is not None, "run.name",
          "must be 1-100 characters of letters, digits and _ . + = -, not starting with '.' , '-', '+' or '=' "
          f"(it names the run directory and is typed in commands), got {_short(cfg.run.name)}")
    g = cfg.generation
    tiny = cfg.models.tiny
    tiny_roles = [r for r in ("solver", "conjecturer", "guide") if getattr(cfg.models, r) == TINY_RANDOM]
    check(tiny.num_heads >= 1 and tiny.hidden_size % max(1, tiny.num_heads) == 0, "models.tiny.num_heads",
          f"must divide models.tiny.hidden_size ({tiny.hidden_size}), got {tiny.num_heads}")
    head = tiny.hidden_size // max(1, tiny.num_heads)
    check(g.backend != "vllm" or not tiny_roles or head in VLLM_CPU_HEAD_SIZES, "models.tiny.num_heads",
          f"gives tiny-random models ({', '.join(tiny_roles)}) a head size of {head} (hidden_size "
          f"{tiny.hidden_size} / num_heads {tiny.num_heads}), which vLLM's attention refuses with "
          f"generation.backend = \"vllm\"; use a head size in {list(VLLM_CPU_HEAD_SIZES)}, "
          f"e.g. hidden_size = 64 with num_heads = 2 (the default)")


def _solver_errors(cfg: Config, check: Callable[[bool, str, str], None]) -> None:
    """The Solver's objective and the keys that only some objectives use."""
    s = cfg.solver
    check(s.band_low <= s.band_high, "solver.band_low", "must be <= solver.band_high")
    family = s.objective in PUBLISHED_CLIP
    check(s.kl_beta == 0.0 or family, "solver.kl_beta",
          f"must be 0 with solver.objective = \"{s.objective}\": the KL to a reference policy is built for the "
          f"GRPO family only (grpo, dr_grpo, dapo, gspo), got {s.kl_beta}")
    check(s.rollout_oversample == 1.0 or (s.objective == "dapo" and s.rollout_prompts > 0), "solver.rollout_oversample",
          f"over-samples for DAPO's dynamic sampling: only with solver.objective = \"dapo\" and "
          f"solver.rollout_prompts > 0, got {s.rollout_oversample} with objective {s.objective!r} and rollout_prompts "
          f"{s.rollout_prompts}; set it to 1")
    check(s.rollout_max_gen_batches == 1 or (s.objective == "dapo" and s.rollout_prompts > 0),
          "solver.rollout_max_gen_batches", f"re-samples for DAPO's dynamic sampling: only with solver.objective = "
          f"\"dapo\" and solver.rollout_prompts > 0, got {s.rollout_max_gen_batches} with objective {s.objective!r} "
          f"and rollout_prompts {s.rollout_prompts}; set it to 1")
    check(s.rollout_prompts == 0 or s.selection_mode() not in WINDOW_SELECTIONS, "solver.rollout_prompts",
          f"a rollout batch samples fresh groups; selection {s.selection_mode()!r} trains on stored proofs and "
          "samples by its own rule: set solver.rollout_prompts = 0")
    check(not family or s.samples >= 2, "solver.samples",
          f"must be >= 2 with solver.objective = \"{s.objective}\" (a group needs two samples for its "
          f"advantages), got {s.samples}")
    _colocated_errors(cfg, check)


def _colocated_errors(cfg: Config, check: Callable[[bool, str, str], None]) -> None:
    """What the colocated rollout job (solver.colocated_steps > 0, scheduling/colocated.py) is built for: a
    Solver alone sampling whole proofs in rollout steps, on one node."""
    s = cfg.solver
    if s.colocated_steps == 0:
        return
    key = "solver.colocated_steps"
    check(s.rollout_prompts > 0, key, f"runs rollout steps: set solver.rollout_prompts > 0 too, or set {key} = 0")
    check(not cfg.conjecturer.enabled, key, f"runs a Solver alone (solve, verify, train): set conjecturer.enabled = "
          f"false, or {key} = 0 for SGS's chain of phase jobs")
    check(s.mode != "search", key, f"samples whole proofs: set {key} = 0 with solver.mode = \"search\"")
    g, gpus = cfg.generation, cfg.slurm.train.gpus
    check(g.backend != "vllm" or gpus == 0 or g.tensor_parallel_size == gpus, "generation.tensor_parallel_size",
          f"must be slurm.train.gpus ({gpus}) with {key} > 0: the job's one engine samples on all its GPUs (a "
          f"data-parallel set of engines is not built), got {g.tensor_parallel_size}")
    check(cfg.slurm.train.nodes == 1, key, f"runs on one node (its ranks train there, started each step; every node "
          f"running the job's rounds is not built), got slurm.train.nodes = {cfg.slurm.train.nodes}: set it to 1, "
          f"or {key} = 0")


def _selection_errors(cfg: Config, check: Callable[[bool, str, str], None]) -> None:
    """What the Solver trains on, with the Conjecturer and the Guide that go with it."""
    s = cfg.solver
    family = s.objective in PUBLISHED_CLIP
    c = cfg.conjecturer
    mode = s.selection_mode()
    check(not (mode == "less_16_proofs" and c.enabled), "conjecturer.enabled",
          "must be false when solver.objective = \"ei\" (Expert Iteration uses no conjectures)"
          if s.selection == "auto" else "must be false with solver.selection = \"less_16_proofs\" (Expert "
          "Iteration on stored target proofs uses no conjectures; \"stp_improved_ei\" trains on conjectures too)")
    check(not family or s.selection == "auto", "solver.selection",
          f"must be \"auto\" with solver.objective = \"{s.objective}\" (the GRPO family trains every problem "
          f"the round sampled), got {s.selection!r}")
    check(s.objective != "cispo" or mode not in WINDOW_SELECTIONS, "solver.selection",
          f"must not be {mode!r} with solver.objective = \"cispo\" (Expert Iteration trains on stored proofs, not "
          "on groups of one round; the reference refuses groups with less_16_proofs); valid: auto, "
          "hard, unsolved, all_none_0_1, all")
    check(s.objective != "ei" or mode in WINDOW_SELECTIONS, "solver.selection",
          f"must be \"auto\", \"less_16_proofs\" or \"stp_improved_ei\" with solver.objective = \"ei\", got "
          f"{s.selection!r} (for a band of one round's proofs use solver.objective = \"reinforce\")")
    check(s.mode != "search" or s.objective in ("reinforce", "ei"), "solver.objective",
          f"must be \"reinforce\" or \"ei\" with solver.mode = \"search\" (a search Solver trains on the (goal "
          f"state, tactic) steps of verified proofs: expert iteration; a failed search has no steps to give a "
          f"negative advantage), got {s.objective!r}")
    check(not (c.reward == "stp" and cfg.guide.enabled and c.enabled and c.train), "guide.enabled",
          "must be false with conjecturer.reward = \"stp\" (STP's Conjecturer reward uses no Guide)")


def _train_errors(cfg: Config, check: Callable[[bool, str, str], None]) -> None:
    """The trainer."""
    t = cfg.train
    check(all(0.0 <= b < 1.0 for b in t.betas), "train.betas", f"each must be within [0, 1), got {list(t.betas)}")
    check(t.zero_stage in (0, 1, 2), "train.zero_stage",
          f"must be one of 0, 1, 2, got {t.zero_stage}" + (" (ZeRO-3 partitions the weights, and exporting "
                                                           "them for generation does not gather them yet)"
                                                           if t.zero_stage == 3 else ""))
    check(t.cpu_ranks == 1 or cfg.slurm.train.gpus == 0, "train.cpu_ranks",
          f"applies only when slurm.train.gpus = 0 (CPU training); with GPUs there is one rank per GPU, got "
          f"{t.cpu_ranks} with slurm.train.gpus = {cfg.slurm.train.gpus}")


def _verification_errors(cfg: Config, check: Callable[[bool, str, str], None]) -> None:
    """The verifier, shard counts, and the projection's choices."""
    v = cfg.verification
    check(len(v.repl_command) >= 1, "verification.repl_command", "must name a program")
    check(not v.kernel_recheck or len(v.checker_command) >= 1, "verification.checker_command",
          "must name a program when verification.kernel_recheck = true")
    sh = cfg.shards
    check(sh.verify == 0 or (sh.verify >= sh.solve and sh.verify % max(1, sh.solve) == 0), "shards.verify",
          f"must be 0 (as many as shards.solve) or a multiple of shards.solve ({sh.solve}), got {sh.verify}")
    pj = cfg.projection
    check(pj.simulated_time_scale == 0 or cfg.generation.simulated_tokens_per_s == 0, "projection.simulated_time_scale",
          "and generation.simulated_tokens_per_s both set: choose one (the time scale decodes by the projection's "
          "context-dependent tokens/s; set generation.simulated_tokens_per_s = 0)")


def _slurm_errors(cfg: Config, check: Callable[[bool, str, str], None]) -> None:
    """Every Slurm table's resources, mail settings."""
    for phase in SLURM_TABLES:
        r = cfg.phase_resources(phase)
        for key, val, low, high in (("gpus", r.gpus, 0, MAX_GPUS), ("cpus", r.cpus, 1, MAX_CPUS),
                                    ("time_min", r.time_min, 1, 366 * 24 * 60),
                                    ("array_parallelism", r.array_parallelism, 1, MAX_TASKS),
                                    ("signal_delay_s", r.signal_delay_s, 0, 24 * 3600)):
            check(low <= val <= high, f"slurm.{phase}.{key}", f"must be >= {low} and <= {high}, got {val}")
        check(SLURM_MEM.fullmatch(r.mem) is not None, f"slurm.{phase}.mem",
              f"must be a Slurm memory size such as \"64G\" (a number with an optional K, M, G or T), got {r.mem!r}")
        for i, line in enumerate(r.setup):
            check("\n" not in line and "\r" not in line, f"slurm.{phase}.setup[{i}]",
                  f"must be one shell line (no line breaks; one array item per line), got {_short(line)}")
        check(r.nodes == 1 or (phase == "train" and 1 <= r.nodes <= 1024), f"slurm.{phase}.nodes",
              "must be 1 (only the train job spans nodes)" if phase != "train" else f"must be >= 1 and <= 1024, got {r.nodes}")
    sl = cfg.slurm
    check(not any(c.isspace() or c in ",;" for c in sl.mail_user), "slurm.mail_user",
          f"must be one mail address (no spaces, commas or semicolons), got {_short(sl.mail_user)}")
    for key in ("mail_type", "mail_type_failure"):
        bad = [t for t in mail_types(getattr(sl, key)) if t not in MAIL_TYPES]
        check(not bad, f"slurm.{key}", f"{', '.join(map(repr, bad))}: not an sbatch --mail-type; use a comma-separated "
                                      f"list of {', '.join(MAIL_TYPES)}")


def _eval_errors(cfg: Config, check: Callable[[bool, str, str], None]) -> None:
    """`[eval]`: set names, sources, per-set splits, samples and the k of pass@k (each k <= samples)."""
    e = cfg.eval
    check(e.every_rounds >= 0, "eval.every_rounds", f"must be >= 0 (0 = off), got {e.every_rounds}")
    check(e.samples >= 1, "eval.samples", f"must be >= 1, got {e.samples}")
    check(e.limit >= 0, "eval.limit", f"must be >= 0 (0 = every problem), got {e.limit}")
    check(len(e.pass_k) >= 1, "eval.pass_k", "must list at least one k, e.g. [1, 8]")
    for i, k in enumerate(e.pass_k):
        check(1 <= k <= e.samples, f"eval.pass_k[{i}]",
              f"must be within [1, eval.samples = {e.samples}] (pass@k needs k of the n samples), got {k}")
    check(len(set(e.pass_k)) == len(e.pass_k), "eval.pass_k", f"lists a k twice: {list(e.pass_k)}")
    for name, source in e.sets.items():
        check(EVAL_SET_NAME.fullmatch(name) is not None, f"eval.sets.{name}",
              f"the name must be 1-64 letters, digits and _ . - (it names metrics and a directory), got {_short(name)}")
        check(bool(source.strip()), f"eval.sets.{name}", "must name a source (a dataset id or a path), got \"\"")
    for name in e.splits:
        check(name in e.sets, f"eval.splits.{name}",
              f"names no evaluation set; eval.sets has {', '.join(sorted(e.sets)) or 'none'}")
    check(e.every_rounds == 0 or cfg.solver.mode != "search", "eval.every_rounds",
          "must be 0 with solver.mode = \"search\": held-out evaluation samples whole proofs and is not built for "
          f"tactic-level search yet, got {e.every_rounds}")
    check(e.every_rounds == 0 or bool(e.sets), "eval.every_rounds",
          f"is {e.every_rounds} but eval.sets is empty: name a set, e.g. eval.sets = {{minif2f_test = \"...\"}}, "
          "or set eval.every_rounds = 0")


# sbatch --mail-type's values (Slurm 23.02)
MAIL_TYPES = ("NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT", "TIME_LIMIT",
              "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS")


def mail_types(text: str) -> list[str]:
    """A `slurm.mail_type*` value as its types: `"end, fail"` -> ["END", "FAIL"]; "" and "NONE" -> []."""
    return [t.strip().upper() for t in text.split(",") if t.strip() and t.strip().upper() != "NONE"]


def _search_errors(cfg: Config, check: Callable[[bool, str, str], None]) -> None:
    """The [search] keys (tactic-level search, solver.mode = "search")."""
    x = cfg.search
    for key in ("width", "max_expansions", "max_depth", "tactic_max_tokens", "max_goal_chars", "concurrent",
                "lean_processes", "mcts_simulations"):
        check(getattr(x, key) >= 1, f"search.{key}", f"must be >= 1, got {getattr(x, key)}")
    for key in ("time_limit_s", "length_alpha"):
        check(getattr(x, key) >= 0, f"search.{key}", f"must be >= 0, got {getattr(x, key)}")
    check(x.tactic_timeout_s > 0, "search.tactic_timeout_s", f"must be > 0 seconds, got {x.tactic_timeout_s}")
    check(x.temperature >= 0, "search.temperature", f"must be >= 0, got {x.temperature}")
    check(x.mcts_c_base > 0 and x.mcts_prior_temperature > 0, "search.mcts_c_base",
          "search.mcts_c_base and search.mcts_prior_temperature must be > 0")
    check(0 < x.mcts_discount <= 1, "search.mcts_discount", f"must be within (0, 1], got {x.mcts_discount}")
    check(0 < x.simulated_branching <= 1, "search.simulated_branching",
          f"must be within (0, 1], got {x.simulated_branching}")
    check(x.simulated_depth >= 1, "search.simulated_depth", f"must be >= 1, got {x.simulated_depth}")
    check(cfg.solver.mode != "search" or x.environment != "lean" or cfg.slurm.solve.cpus >= x.lean_processes,
          "slurm.solve.cpus", f"must be >= search.lean_processes ({x.lean_processes}): a search task holds the CPU "
          f"cores of its own Lean pool, one REPL process a core; got {cfg.slurm.solve.cpus}")
    check(x.environment != "replay" or bool(x.replay_dir) or cfg.solver.mode != "search", "search.replay_dir",
          "must name a directory of recorded REPL transcripts (X.in, X.expected.out) with search.environment = "
          "\"replay\"")
