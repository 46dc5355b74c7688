"""Which configs are possible: every value that has the right type but cannot run, as (key, message).

`semantic_errors` is what `launch`, `--dry-run`, `plan`, `resume --set` and `verify --set` refuse a
config with (config/loading.py names the file): ranges, choices, and rules across keys (an objective
and its selection, shard counts that divide, a model that fits vLLM's CPU build). Not covered: the
keys themselves and their defaults (config/schema.py), reading TOML (config/loading.py).
"""

from __future__ import annotations

from collections.abc import Callable

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


def semantic_errors(cfg: Config) -> list[tuple[str, str]]:
    """(key, message) for every value that has the right type but is impossible."""
    errs: list[tuple[str, str]] = []

    def check(ok: bool, key: str, msg: str) -> None:
        if not ok:
            errs.append((key, msg))

    check(cfg.run.rounds >= 1, "run.rounds", f"must be a whole number >= 1, got {cfg.run.rounds}")
    check(RUN_NAME.fullmatch(cfg.run.name) is not None, "run.name",
          "must be 1-100 characters of letters, digits and _ . + = -, not starting with '.' , '-', '+' or '=' "
          f"(it names the run directory and is typed in commands), got {_short(cfg.run.name)}")
    check(cfg.run.seed >= 0, "run.seed", f"must be >= 0, got {cfg.run.seed}")
    check(cfg.run.max_task_retries >= 0, "run.max_task_retries", "must be >= 0")
    check(cfg.run.local_workers >= 1, "run.local_workers", "must be >= 1")
    check(cfg.run.poll_interval_s > 0, "run.poll_interval_s", f"must be > 0 seconds, got {cfg.run.poll_interval_s}")
    check(cfg.data.limit >= 0, "data.limit", "must be >= 0 (0 = all targets)")
    for role in ("solver", "conjecturer", "guide"):
        sec = getattr(cfg, role)
        check(sec.max_tokens >= 1, f"{role}.max_tokens", "must be >= 1")
        check(sec.temperature >= 0, f"{role}.temperature", "must be >= 0")
    g = cfg.generation
    check(g.max_in_flight >= 1, "generation.max_in_flight", f"must be >= 1, got {g.max_in_flight}")
    check(g.max_model_len >= 2, "generation.max_model_len", f"must be >= 2, got {g.max_model_len}")
    check(0 < g.gpu_memory_utilization <= 1, "generation.gpu_memory_utilization",
          f"must be within (0, 1], got {g.gpu_memory_utilization}")
    check(g.kv_cache_memory_bytes >= 0, "generation.kv_cache_memory_bytes",
          f"must be >= 0 (0 = vLLM sizes the KV cache from gpu_memory_utilization), got {g.kv_cache_memory_bytes}")
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
    s = cfg.solver
    check(s.samples >= 1, "solver.samples", f"must be >= 1, got {s.samples}")
    for key, val in (("band_low", s.band_low), ("band_high", s.band_high),
                     ("length_penalty_start", s.length_penalty_start)):
        check(0.0 <= val <= 1.0, f"solver.{key}", f"must be within [0, 1], got {val}")
    check(s.band_low <= s.band_high, "solver.band_low", "must be <= solver.band_high")
    check(s.store_cap >= 1, "solver.store_cap", "must be >= 1")
    check(s.lr > 0, "solver.lr", "must be > 0")
    check(s.batch_size >= 1, "solver.batch_size", "must be >= 1")
    check(s.ei_rounds >= 1, "solver.ei_rounds", "must be >= 1")
    family = s.objective in PUBLISHED_CLIP
    check(s.kl_beta >= 0.0, "solver.kl_beta", f"must be >= 0 (0 = no KL term), got {s.kl_beta}")
    check(s.kl_beta == 0.0 or family, "solver.kl_beta",
          f"must be 0 with solver.objective = \"{s.objective}\": the KL to a reference policy is built for the "
          f"GRPO family only (grpo, dr_grpo, dapo, gspo), got {s.kl_beta}")
    check(0.0 <= s.clip_low < 1.0, "solver.clip_low", f"must be within [0, 1) (0 = the published value), got {s.clip_low}")
    check(s.clip_high >= 0.0, "solver.clip_high", f"must be >= 0 (0 = the published value), got {s.clip_high}")
    check(s.grpo_eps > 0, "solver.grpo_eps", f"must be > 0, got {s.grpo_eps}")
    check(0.0 <= s.overlong_buffer < 1.0, "solver.overlong_buffer",
          f"must be within [0, 1) (a fraction of solver.max_tokens; 0 = off), got {s.overlong_buffer}")
    check(s.overlong_penalty >= 0, "solver.overlong_penalty", f"must be >= 0, got {s.overlong_penalty}")
    check(s.rollout_prompts >= 0, "solver.rollout_prompts", f"must be >= 0 (0 = every target), got {s.rollout_prompts}")
    check(s.rollout_oversample >= 1.0, "solver.rollout_oversample", f"must be >= 1, got {s.rollout_oversample}")
    check(s.rollout_oversample == 1.0 or (s.objective == "dapo" and s.rollout_prompts > 0), "solver.rollout_oversample",
          f"over-samples for DAPO's dynamic sampling: only with solver.objective = \"dapo\" and "
          f"solver.rollout_prompts > 0, got {s.rollout_oversample} with objective {s.objective!r} and rollout_prompts "
          f"{s.rollout_prompts}; set it to 1")
    check(s.kl_clamp >= 0, "solver.kl_clamp", f"must be >= 0 (0 = no clamp), got {s.kl_clamp}")
    check(s.rollout_max_gen_batches >= 1, "solver.rollout_max_gen_batches",
          f"must be >= 1 (1 = no re-sampling), got {s.rollout_max_gen_batches}")
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
    c = cfg.conjecturer
    check(0.0 <= c.band_percentile <= 1.0, "conjecturer.band_percentile", f"must be within [0, 1], got {c.band_percentile}")
    check(0.0 <= c.length_penalty_start <= 1.0, "conjecturer.length_penalty_start", "must be within [0, 1]")
    check(c.samples_per_target >= 1, "conjecturer.samples_per_target", "must be >= 1")
    check(c.lr > 0, "conjecturer.lr", "must be > 0")
    check(c.batch_size >= 1, "conjecturer.batch_size", "must be >= 1")
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
    check(s.proof_cap >= 1, "solver.proof_cap", f"must be >= 1, got {s.proof_cap}")
    check(s.mode != "search" or s.objective in ("reinforce", "ei"), "solver.objective",
          f"must be \"reinforce\" or \"ei\" with solver.mode = \"search\" (a search Solver trains on the (goal "
          f"state, tactic) steps of verified proofs: expert iteration; a failed search has no steps to give a "
          f"negative advantage), got {s.objective!r}")
    _search_errors(cfg, check)
    check(0.0 < c.stp_threshold <= 1.0, "conjecturer.stp_threshold", f"must be within (0, 1], got {c.stp_threshold}")
    check(0.0 <= c.stp_elegance_quantile < 1.0, "conjecturer.stp_elegance_quantile",
          f"must be within [0, 1), got {c.stp_elegance_quantile}")
    check(not (c.reward == "stp" and cfg.guide.enabled and c.enabled and c.train), "guide.enabled",
          "must be false with conjecturer.reward = \"stp\" (STP's Conjecturer reward uses no Guide)")
    t = cfg.train
    check(all(0.0 <= b < 1.0 for b in t.betas), "train.betas", f"each must be within [0, 1), got {list(t.betas)}")
    check(t.zero_stage in (0, 1, 2), "train.zero_stage",
          f"must be one of 0, 1, 2, got {t.zero_stage}" + (" (ZeRO-3 partitions the weights, and exporting "
                                                           "them for generation does not gather them yet)"
                                                           if t.zero_stage == 3 else ""))
    check(t.cpu_ranks >= 1, "train.cpu_ranks", f"must be >= 1, got {t.cpu_ranks}")
    check(t.cpu_ranks == 1 or cfg.slurm.train.gpus == 0, "train.cpu_ranks",
          f"applies only when slurm.train.gpus = 0 (CPU training); with GPUs there is one rank per GPU, got "
          f"{t.cpu_ranks} with slurm.train.gpus = {cfg.slurm.train.gpus}")
    check(t.grad_clip >= 0, "train.grad_clip", "must be >= 0")
    check(t.collective_timeout_s > 0, "train.collective_timeout_s",
          f"must be > 0 seconds (a collective waits this long for a dead or hung rank), got {t.collective_timeout_s}")
    v = cfg.verification
    check(v.timeout_s > 0, "verification.timeout_s", "must be > 0")
    check(len(v.repl_command) >= 1, "verification.repl_command", "must name a program")
    check(v.memory_limit_mb >= 0, "verification.memory_limit_mb", "must be >= 0 (0 = no limit)")
    check(v.max_proofs_per_process >= 1, "verification.max_proofs_per_process", "must be >= 1")
    check(v.system_error_retries >= 0, "verification.system_error_retries", "must be >= 0")
    check(v.header_timeout_s > 0, "verification.header_timeout_s", "must be > 0")
    for name in ("max_heartbeats_option", "max_rec_depth_option"):
        value = getattr(v, name)
        check(value >= 0, f"verification.{name}", f"must be >= 0 (0 = any value), got {value}")
    check(v.stream_poll_s > 0, "verification.stream_poll_s", f"must be > 0 seconds, got {v.stream_poll_s}")
    check(v.stream_yield_s >= 0, "verification.stream_yield_s", f"must be >= 0 seconds (0 = never), got {v.stream_yield_s}")
    check(v.sandbox in ("bwrap", "none"), "verification.sandbox", f"must be one of 'bwrap', 'none', got {v.sandbox!r}")
    check(v.sandbox_tmpfs_mb >= 0, "verification.sandbox_tmpfs_mb", "must be >= 0 (0 = no cap)")
    check(v.scratch_mb >= 0, "verification.scratch_mb", "must be >= 0 (0 = no cap)")
    check(v.cpu_time_factor >= 0, "verification.cpu_time_factor", "must be >= 0 (0 = no CPU limit)")
    check(v.process_limit >= 0, "verification.process_limit", "must be >= 0 (0 = no limit)")
    for name in ("idle_check_ms", "idle_cpu_fraction", "thread_slack", "timeout_cpu_factor"):
        value = getattr(v, name)
        check(value >= 0, f"verification.{name}", f"must be >= 0 (0 turns the check off), got {value}")
    check(v.slot_cpus >= 0, "verification.slot_cpus", f"must be >= 0 cores (0 = no cpu.max), got {v.slot_cpus}")
    check(v.slot_pids >= 0, "verification.slot_pids", f"must be >= 0 tasks (0 = no pids.max), got {v.slot_pids}")
    check(not v.kernel_recheck or len(v.checker_command) >= 1, "verification.checker_command",
          "must name a program when verification.kernel_recheck = true")
    for phase in ("conjecture", "solve", "guide"):
        n = getattr(cfg.shards, phase)
        check(1 <= n <= MAX_TASKS, f"shards.{phase}", f"must be >= 1 and <= {MAX_TASKS}, got {n}")
    sh = cfg.shards
    check(sh.verify <= MAX_TASKS, "shards.verify", f"must be <= {MAX_TASKS}, got {sh.verify}")
    check(sh.verify == 0 or (sh.verify >= sh.solve and sh.verify % max(1, sh.solve) == 0), "shards.verify",
          f"must be 0 (as many as shards.solve) or a multiple of shards.solve ({sh.solve}), got {sh.verify}")
    check(cfg.checkpoints.keep_last >= 1, "checkpoints.keep_last", "must be >= 1 (the next round needs the last weights)")
    check(cfg.checkpoints.keep_every >= 0, "checkpoints.keep_every", "must be >= 0")
    check(cfg.checkpoints.estimate_gb_per_role >= 0, "checkpoints.estimate_gb_per_role", "must be >= 0")
    check(cfg.alerts.progress_every_s > 0, "alerts.progress_every_s", "must be > 0")
    for key in ("stuck_after_s", "stuck_factor", "stuck_floor_s", "train_stuck_factor", "train_stuck_floor_s",
                "disk_budget_gb", "slow_phase_factor"):
        check(getattr(cfg.alerts, key) >= 0, f"alerts.{key}", "must be >= 0")
    check(0 <= cfg.alerts.max_error_rate <= 1, "alerts.max_error_rate", "must be in [0, 1]")
    check(0 <= cfg.alerts.max_refused_rate <= 1, "alerts.max_refused_rate", "must be in [0, 1] (1 = never)")
    check(cfg.alerts.refused_items >= 0, "alerts.refused_items", f"must be >= 0, got {cfg.alerts.refused_items}")
    check(cfg.alerts.slow_phase_rounds >= 1, "alerts.slow_phase_rounds", "must be >= 1")
    sc = cfg.scaling
    check(sc.min_generations >= 0, "scaling.min_generations", f"must be >= 0, got {sc.min_generations}")
    check(sc.halves >= 0, "scaling.halves", f"must be >= 0 (0 = no random-half refits), got {sc.halves}")
    for key, val in (("paper_asymptote", sc.paper_asymptote), ("paper_halves_asymptote", sc.paper_halves_asymptote)):
        check(0.0 <= val <= 1.0, f"scaling.{key}", f"must be within [0, 1] (a solve rate), got {val}")
    check(sc.paper_c_mid > 0, "scaling.paper_c_mid", f"must be > 0 (generations), got {sc.paper_c_mid}")
    check(sc.paper_b > 0, "scaling.paper_b", f"must be > 0, got {sc.paper_b}")
    check(sc.paper_halves_std >= 0, "scaling.paper_halves_std", f"must be >= 0, got {sc.paper_halves_std}")
    rp = cfg.report
    for key, val in (("recent_rounds", rp.recent_rounds), ("examples", rp.examples)):
        check(val >= 0, f"report.{key}", f"must be >= 0, got {val}")
    check(rp.score_bins >= 1, "report.score_bins", f"must be >= 1, got {rp.score_bins}")
    check(rp.max_statement_chars >= 20, "report.max_statement_chars", f"must be >= 20, got {rp.max_statement_chars}")
    ca = cfg.canary
    check(1 <= ca.targets <= 64, "canary.targets", f"must be >= 1 and <= 64, got {ca.targets}")
    check(ca.max_tokens >= 1, "canary.max_tokens", f"must be >= 1, got {ca.max_tokens}")
    check(0.0 <= ca.min_guide_parse_rate <= 1.0, "canary.min_guide_parse_rate",
          f"must be within [0, 1], got {ca.min_guide_parse_rate}")
    check(ca.loop_timeout_s > 0, "canary.loop_timeout_s", f"must be > 0 seconds, got {ca.loop_timeout_s}")
    check(0.0 < ca.checkpoint_share <= 1.0, "canary.checkpoint_share", f"must be within (0, 1], got {ca.checkpoint_share}")
    check(ca.time_min >= 1, "canary.time_min", f"must be >= 1 minute, got {ca.time_min}")
    check(ca.max_age_days > 0, "canary.max_age_days", f"must be > 0 days, got {ca.max_age_days}")
    pj = cfg.projection
    for key in ("unsolved_share", "reviewed_share", "trained_share", "advice_margin", "search_expansion_share",
                "search_distinct_share", "search_solved_share"):
        check(0.0 <= getattr(pj, key) <= 1.0, f"projection.{key}", f"must be within [0, 1], got {getattr(pj, key)}")
    for key in ("mean_tokens", "decode_short_tokens_per_s", "decode_long_tokens_per_s", "lean_proofs_per_s",
                "train_tokens_per_s"):
        check(getattr(pj, key) > 0, f"projection.{key}", f"must be > 0, got {getattr(pj, key)}")
    for key in ("hub_targets", "prompt_tokens", "repl_start_s", "model_load_s", "checkpoint_write_s",
                "queue_wait_s", "gpu_budget", "cpu_budget", "simulated_time_scale", "search_prompt_tokens",
                "search_tactic_tokens", "lean_tactic_s"):
        check(getattr(pj, key) >= 0, f"projection.{key}", f"must be >= 0, got {getattr(pj, key)}")
    check(pj.simulated_time_scale == 0 or g.simulated_tokens_per_s == 0, "projection.simulated_time_scale",
          "and generation.simulated_tokens_per_s both set: choose one (the time scale decodes by the projection's "
          "context-dependent tokens/s; set generation.simulated_tokens_per_s = 0)")
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
    _eval_errors(cfg, check)
    return errs


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
