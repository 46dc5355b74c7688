"""The tables of how a run's jobs run: verification, checkpoints, records, alerts, shards, Slurm's resources,
scaling, the report, the canary (assembled in config/schema.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sgsbatch.config.declare import (
    MAX_TASKS,
    Bound,
    key,
)


@dataclass(frozen=True)
class VerificationConfig:
    """Lean verification: the REPL, the kernel re-check, the sandbox and its limits (verification/)."""

    backend: Literal["lean", "simulated"] = key("lean", "\"lean\", or \"simulated\" (a deterministic stand-in, "
                                                        "not Lean; said in status and TensorBoard).")
    timeout_s: float = key(500.0, "Seconds per proof file (header + theorem + proof), as the reference's "
                                  "verifier_timeout; with timeout_includes_header the header's share of it is "
                                  "the seconds its REPL process took to start and import it.",
                           bound=Bound("> 0", "must be > 0"))
    timeout_includes_header: bool = key(True, "The proof's elaboration gets timeout_s less the seconds its REPL "
                                              "process took to start and elaborate the header (the reference times "
                                              "each file in a fresh process, import included); false: timeout_s "
                                              "for the proof alone.")
    repl_command: tuple[str, ...] = key(("lake", "env", ".lake/packages/REPL/.lake/build/bin/repl"),
                                        "The REPL lean/install.sh builds, run through `lake env` so Mathlib is "
                                        "on its path.")
    project_dir: str = key("lean", "The Lean project the REPL runs in; a relative path is resolved against "
                                   "the repository root.")
    memory_limit_mb: int = key(16384, "RLIMIT_AS per REPL process; 0 = no limit.",
                               bound=Bound(">= 0", "must be >= 0 (0 = no limit)"))
    max_proofs_per_process: int = key(200, "Proofs a REPL process checks before it is replaced.",
                                      bound=Bound(">= 1", "must be >= 1"))
    system_error_retries: int = key(1, "Retries of a proof on a fresh process after a REPL system error.",
                                    bound=Bound(">= 0", "must be >= 0"))
    header_timeout_s: float = key(600.0, "Seconds to elaborate a header (`import Mathlib`), once per process.",
                                  bound=Bound("> 0", "must be > 0"))
    failed_warning_fails: bool = key(True, "A warning containing \"failed\" fails the proof (the reference's "
                                           "rule; rejects some honest aesop proofs).")
    kernel_recheck: bool = key(True, "Replay every proof the REPL calls verified through the kernel in a "
                                     "separate checker that never elaborates a proof.")
    checker_command: tuple[str, ...] = key(("lake", "env", ".lake/build/bin/sgs_kernel_check"),
                                           "The kernel checker (lean/SgsKernelCheck.lean).")
    sandbox: Literal["bwrap", "none"] = key("bwrap", "Run REPL and checker in bubblewrap (read-only filesystem, "
                                                     "no network, own namespaces); \"none\" = as they are.")
    sandbox_tmpfs_mb: int = key(512, "Cap on the sandbox's private /tmp, /run, /dev/shm (bwrap 0.7+); 0 = none.",
                                bound=Bound(">= 0", "must be >= 0 (0 = no cap)"))
    scratch_dir: str = key("", "Where the per-process scratch directories go; \"\" = the system's temp dir.")
    scratch_mb: int = key(512, "The REPL's scratch tmpfs and the largest file a REPL or checker process may "
                               "write (RLIMIT_FSIZE); 0 = no limit.",
                          bound=Bound(">= 0", "must be >= 0 (0 = no cap)"))
    cpu_time_factor: float = key(2.0, "RLIMIT_CPU of each process = this x (header_timeout_s + "
                                      "max_proofs_per_process x timeout_s); 0 = no limit.",
                                 bound=Bound(">= 0", "must be >= 0 (0 = no CPU limit)"))
    process_limit: int = key(1024, "RLIMIT_NPROC inside a sandbox with its own user namespace; 0 = no limit.",
                             bound=Bound(">= 0", "must be >= 0 (0 = no limit)"))
    idle_check_ms: float = key(20.0, "After each proof the pool samples the REPL's threads' run and run-queue time "
                                     "this many ms apart and restarts the REPL if it wants CPU while idle (work a "
                                     "proof left; two windows in a row); 0 = no check.",
                               bound=Bound(">= 0", "must be >= 0 (0 turns the check off), got {value}"))
    idle_cpu_fraction: float = key(0.25, "idle_check_ms: the share of one core an idle REPL may want (run or wait "
                                         "in the run queue, so a starved spinner on a loaded node counts whole) "
                                         "before it is restarted.",
                                   bound=Bound(">= 0", "must be >= 0 (0 turns the check off), got {value}"))
    thread_slack: int = key(32, "Restart a REPL that holds more than this many threads beyond its count right after "
                                "its header (Lean's own task pool grows with a proof's parallel tasks: keep it "
                                "generous).",
                            bound=Bound(">= 0", "must be >= 0 (0 turns the check off), got {value}"))
    timeout_cpu_factor: float = key(1.5, "A proof that times out on a REPL that had checked proofs before, while the "
                                         "REPL used or wanted more than this many cores (or held more "
                                         "than thread_slack extra threads), is checked once more on a fresh REPL; "
                                         "0 = never.",
                                    bound=Bound(">= 0", "must be >= 0 (0 turns the check off), got {value}"))
    slot_cpus: float = key(1.0, "Per pool slot (REPL and checker) a cgroup v2 group with cpu.max of this many "
                                "cores, where the verify task's cgroup is delegated to the user (the canary says "
                                "whether it is); elsewhere nothing. 0 = no cpu.max.",
                           bound=Bound(">= 0", "must be >= 0 cores (0 = no cpu.max), got {value}"))
    slot_pids: int = key(2048, "The same per-slot group's pids.max (processes and threads of the slot's REPL and "
                               "checker together); 0 = no pids.max.",
                         bound=Bound(">= 0", "must be >= 0 tasks (0 = no pids.max), got {value}"))
    process_filter: bool = key(True, "A seccomp filter denies REPL and checker process creation (threads "
                                     "allowed; x86_64 and aarch64).")
    max_heartbeats_option: int = key(0, "Largest `maxHeartbeats` / `synthInstance.maxHeartbeats` a proof or "
                                        "statement may set (`set_option ... in`); 0 = any value, Lean's 0 (no "
                                        "limit) included: timeout_s bounds every proof.",
                                     bound=Bound(">= 0", "must be >= 0 (0 = any value), got {value}"))
    max_rec_depth_option: int = key(100000, "Largest `maxRecDepth` / `synthInstance.maxSize` a proof or statement "
                                            "may set; 0 = any value.",
                                    bound=Bound(">= 0", "must be >= 0 (0 = any value), got {value}"))
    streaming: bool = key(True, "Verify tasks start with their solve tasks and check each problem as its line "
                                "lands in the solve task's item log, as the reference checks proofs while they are "
                                "generated; false = each starts when its solve task has ended.")
    stream_poll_s: float = key(2.0, "streaming: seconds between a verify task's looks at its solve task's item "
                                    "log while it has nothing to check.",
                               bound=Bound("> 0", "must be > 0 seconds, got {value}"))
    stream_yield_s: float = key(120.0, "streaming on Slurm: a verify task with nothing to check whose solve task "
                                       "has not run for this long (requeued, preempted) requeues itself, so that "
                                       "its CPUs cannot keep the solve task waiting; 0 = never.",
                                bound=Bound(">= 0", "must be >= 0 seconds (0 = never), got {value}"))


@dataclass(frozen=True)
class CheckpointConfig:
    """Which rounds' weights are kept (round/checkpoints.py)."""

    keep_last: int = key(2, "Weights of the last this many rounds are kept.",
                         bound=Bound(">= 1", "must be >= 1 (the next round needs the last weights)"))
    keep_every: int = key(10, "And of every this-many-th round; 0 = none.",
                          bound=Bound(">= 0", "must be >= 0"))
    estimate_gb_per_role: float = key(14.8, "One role's saved weights in GB, for the disk projection (a 7B "
                                            "model in bf16).",
                                      bound=Bound(">= 0", "must be >= 0"))


@dataclass(frozen=True)
class RecordsConfig:
    """What the run directory keeps of a round's generations once no training reads them (round/compaction.py)."""

    keep_sample_tokens: bool = key(False, "True: keep everything (the token arrays files: ~0.2 GB a round per "
                                          "1,000 targets); false: they go, their counts stay, and outputs are "
                                          "gzipped once no training reads them (texts, verdicts and reviews stay).")
    keep_text: Literal["all", "verified"] = key(
        "all", "What compaction keeps of the replies: \"all\" (gzipped), or \"verified\" (only verified Solver "
               "samples' text and proof; ~12 GB less over a 200-round D_3k run).")


@dataclass(frozen=True)
class AlertsConfig:
    """What `status`, `watch` and each round's end report as alarms (round/alarms.py, views/progress.py),
    and how often long work logs its progress."""

    progress_every_s: float = key(60.0, "A progress line (rate, done/total, ETA) in a worker's log at most "
                                        "this often.",
                                  bound=Bound("> 0", "must be > 0"))
    stuck_after_s: float = key(0.0, "A shard without item progress this long is stuck; 0 = auto "
                                    "(stuck_factor x the phase's per-item time, at least stuck_floor_s).",
                               bound=Bound(">= 0", "must be >= 0"))
    stuck_factor: float = key(10.0, "Auto stuck threshold: this many times the phase's recent per-item time.",
                              bound=Bound(">= 0", "must be >= 0"))
    stuck_floor_s: float = key(1800.0, "Auto stuck threshold: never less than this.",
                               bound=Bound(">= 0", "must be >= 0"))
    # a train job without a new optimizer step for max(train_stuck_floor_s, train_stuck_factor x its
    # slowest step so far) is stuck (the floor covers ingesting, loading the weights, exporting them)
    train_stuck_factor: float = key(10.0, "A train job without a new optimizer step for this many times its "
                                          "slowest step so far is stuck (at least train_stuck_floor_s).",
                                    bound=Bound(">= 0", "must be >= 0"))
    train_stuck_floor_s: float = key(1800.0, "The train stuck threshold's floor (ingesting, loading and exporting "
                                             "weights take time without steps).",
                                     bound=Bound(">= 0", "must be >= 0"))
    max_error_rate: float = key(0.2, "Verify: alarm when timeouts + errors exceed this share of checked proofs.",
                                bound=Bound("[0, 1]", "must be in [0, 1]"))
    max_refused_rate: float = key(0.02, "Verify: alarm when the verifier's own rules (static checks, kernel "
                                        "re-check; not Lean's failures) refuse more than this share of checked "
                                        "proofs; 1 = never.",
                                  bound=Bound("[0, 1]", "must be in [0, 1] (1 = never)"))
    refused_items: int = key(3, "Verify refusals: per reason, this many of the most frequent items that set them off "
                                "(tactic, option, name) are kept as metrics and shown by status and the report.",
                             bound=Bound(">= 0", "must be >= 0, got {value}"))
    slow_phase_factor: float = key(3.0, "Alarm when a phase runs this many times its recent average wall time.",
                                   bound=Bound(">= 0", "must be >= 0"))
    slow_phase_rounds: int = key(3, "The recent average is over this many previous rounds.",
                                 bound=Bound(">= 1", "must be >= 1"))
    disk_budget_gb: float = key(0.0, "Alarm when disk projected to the planned rounds exceeds this; 0 = no "
                                     "budget.",
                                bound=Bound(">= 0", "must be >= 0"))
    min_free_mb: float = key(64.0, "`status`, `watch` and `--wait` blame a stalled run on the disk (with the free "
                                    "space and the path) when the file system holding the run directory has less "
                                    "free than this.")


@dataclass(frozen=True)
class ShardsConfig:
    """Array sizes (tasks per phase and round).

    verify = 0: as many verify tasks as solve tasks, verify task i checks solve shard i. verify =
    k x solve: verify task j checks every verify-th problem of solve shard j mod solve
    (`Config.solve_shard_of`): few GPU tasks (one engine start each) with many CPU tasks for Lean.
    Either way a verify task starts with its solve task and checks its problems as they are
    generated (`verification.streaming`), or when that solve task is done (streaming off).
    """

    conjecture: int = key(8, "Conjecture tasks per round.",
                          bound=Bound(f"[1, {MAX_TASKS}]", f"must be >= 1 and <= {MAX_TASKS}, got {{value}}"))
    solve: int = key(64, "Solve tasks per round.",
                     bound=Bound(f"[1, {MAX_TASKS}]", f"must be >= 1 and <= {MAX_TASKS}, got {{value}}"))
    guide: int = key(8, "Guide tasks per round.",
                     bound=Bound(f"[1, {MAX_TASKS}]", f"must be >= 1 and <= {MAX_TASKS}, got {{value}}"))
    verify: int = key(0, "Verify tasks per round: 0 = one per solve task, or a multiple of shards.solve (each "
                         "checks a share of one solve task's problems).",
                      bound=Bound(f"<= {MAX_TASKS}", f"must be <= {MAX_TASKS}, got {{value}}"))


@dataclass(frozen=True)
class SlurmPhaseConfig:
    """One phase's Slurm job (`[slurm.<phase>]`; `[slurm.defaults]` for every phase)."""

    partition: str = key("", "Slurm partition; \"\" = the site's default.")
    account: str = key("", "Slurm account; \"\" = yours by default.")
    qos: str = key("", "Slurm QOS; \"\" = the default.")
    gpus: int = key(0, "GPUs per task (per node).")
    cpus: int = key(1, "CPUs per task (per node).")
    nodes: int = key(1, "Nodes per task: train only (one Slurm task per node, ranks = nodes x gpus).")
    mem: str = key("8G", "Memory per task (per node), a Slurm size such as \"64G\".")
    time_min: int = key(240, "Time limit per task in minutes (a task stopped at it requeues and resumes).")
    array_parallelism: int = key(64, "Tasks of the phase's array running at once.")
    signal_delay_s: int = key(120, "SIGUSR2 this long before the time limit (the task saves and requeues).")
    extra: dict[str, str] = field(default_factory=dict, metadata={
        "help": "More sbatch options, e.g. {constraint = \"h200\"}."})
    scratch: str = key("", "Node-local directory to copy a model's weights into before loading (e.g. "
                           "\"$TMPDIR\"); \"\" = load in place.")
    setup: tuple[str, ...] = key((), "Shell lines run at the top of the job script (e.g. \"module load "
                                      "cuda/12\"); usually set once in [slurm.defaults].")


@dataclass(frozen=True)
class ScalingConfig:
    """`sgsbatch fit`: the scaling law of the cumulative solve rate (the SGS paper; docs/algorithm.md) and the paper's fit."""

    min_generations: int = key(100_000, "Points below this many generations so far are dropped before fitting.",
                               bound=Bound(">= 0", "must be >= 0, got {value}"))
    halves: int = key(20, "Random-half refits for the spread of A; 0 = none.",
                      bound=Bound(">= 0", "must be >= 0 (0 = no random-half refits), got {value}"))
    paper_asymptote: float = key(0.671, "The paper's SGS fit: A, printed for comparison.",
                                 bound=Bound("[0.0, 1.0]", "must be within [0, 1] (a solve rate), got {value}"))
    paper_c_mid: float = key(1_252_336.0, "The paper's SGS fit: C_mid.",
                             bound=Bound("> 0", "must be > 0 (generations), got {value}"))
    paper_b: float = key(0.585, "The paper's SGS fit: B.",
                         bound=Bound("> 0", "must be > 0, got {value}"))
    paper_halves_asymptote: float = key(0.676, "The paper's random-half fits: mean A (67.6%).",
                                        bound=Bound("[0.0, 1.0]", "must be within [0, 1] (a solve rate), got {value}"))
    paper_halves_std: float = key(0.011, "The paper's random-half fits: std of A (1.1%).",
                                  bound=Bound(">= 0", "must be >= 0, got {value}"))


@dataclass(frozen=True)
class ReportConfig:
    """`sgsbatch report`: what the shared HTML page shows (views/report.py)."""

    recent_rounds: int = key(3, "Example conjectures come from this many last rounds that have any.",
                             bound=Bound(">= 0", "must be >= 0, got {value}"))
    examples: int = key(5, "Example conjectures per such round (highest guide score first).",
                        bound=Bound(">= 0", "must be >= 0, got {value}"))
    score_bins: int = key(20, "Histogram bins of the guide score distributions.",
                          bound=Bound(">= 1", "must be >= 1, got {value}"))
    max_statement_chars: int = key(600, "An example statement longer than this is cut (with a mark).",
                                   bound=Bound(">= 20", "must be >= 20, got {value}"))


def _gpu(gpus: int, cpus: int, mem: str, time_min: int) -> SlurmPhaseConfig:
    return SlurmPhaseConfig(gpus=gpus, cpus=cpus, mem=mem, time_min=time_min)


@dataclass(frozen=True)
class SlurmConfig:
    """Each phase's Slurm job, and Slurm's mail about the run. A jobs file (or site file) may also hold `[slurm.defaults]`: keys of
    a phase table that apply to every phase whose own table does not set them (config/loading.py
    merges it into the six phases and the watcher; it is not kept in the run's frozen config)."""

    init: SlurmPhaseConfig = field(default_factory=lambda: SlurmPhaseConfig(cpus=4, mem="32G", time_min=60))
    conjecture: SlurmPhaseConfig = field(default_factory=lambda: _gpu(1, 8, "64G", 240))
    solve: SlurmPhaseConfig = field(default_factory=lambda: _gpu(1, 8, "64G", 480))
    verify: SlurmPhaseConfig = field(
        default_factory=lambda: SlurmPhaseConfig(cpus=33, mem="128G", time_min=480, array_parallelism=128)
    )
    guide: SlurmPhaseConfig = field(default_factory=lambda: _gpu(1, 8, "64G", 240))
    # 600 s of warning: a ZeRO-2 checkpoint of a 7B model with Adam states is ~100 GB (docs/engines.md: sizing)
    train: SlurmPhaseConfig = field(
        default_factory=lambda: SlurmPhaseConfig(gpus=8, cpus=64, mem="800G", time_min=720, signal_delay_s=600)
    )
    # `sgsbatch watch RUN --submit`: one small CPU job that watches the run and requeues itself
    # before its time limit (4 h fits most sites' short CPU partitions)
    watcher: SlurmPhaseConfig = field(
        default_factory=lambda: SlurmPhaseConfig(cpus=1, mem="2G", time_min=240, signal_delay_s=60)
    )
    # Slurm's own mail (sbatch --mail-user/--mail-type), so a run's end or failure reaches a person with
    # nothing of ours left running (scheduling/slurm.mail_parameters says which job gets which types)
    mail_user: str = key("", "Mail address Slurm writes to about the run's jobs (sbatch --mail-user); \"\" = "
                             "no mail. Usually set once in the site file.")
    mail_type: str = key("END,FAIL", "sbatch --mail-type of the job whose end is the run's end: the last "
                                     "round's train job (with slurm.mail_user).")
    mail_type_failure: str = key("FAIL", "sbatch --mail-type of every other job of the run (a failed job stalls "
                                         "the run: what depends on it never starts); \"\" = none.")


@dataclass(frozen=True)
class CanaryConfig:
    """`sgsbatch canary`: one short Slurm job per job shape running each real component (canary/)."""

    targets: int = key(4, "Run targets whose real prompts each generation check renders and samples.",
                       bound=Bound("[1, 64]", "must be >= 1 and <= 64, got {value}"))
    max_tokens: int = key(256, "Tokens per canary sample (the Guide check uses guide.max_tokens: a reply must "
                               "be whole).",
                          bound=Bound(">= 1", "must be >= 1, got {value}"))
    min_guide_parse_rate: float = key(0.9, "Share of Guide replies that must parse (the published Guide "
                                           "parses >99%, the base model ~55%).",
                                      bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    loop_timeout_s: float = key(20.0, "The per-proof timeout the looping canary proof must run into.",
                                bound=Bound("> 0", "must be > 0 seconds, got {value}"))
    checkpoint_share: float = key(0.5, "A stop checkpoint may take at most this share of "
                                       "slurm.train.signal_delay_s.",
                                  bound=Bound("(0.0, 1.0]", "must be within (0, 1], got {value}"))
    time_min: int = key(30, "Each canary job's time limit in minutes (never more than its phase's "
                            "slurm.<phase>.time_min).",
                        bound=Bound(">= 1", "must be >= 1 minute, got {value}"))
    max_age_days: float = key(14.0, "Launch accepts a passed canary this recent (same config fingerprint and "
                                    "environment).",
                              bound=Bound("> 0", "must be > 0 days, got {value}"))
