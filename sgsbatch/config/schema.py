"""The run configuration: typed, frozen dataclasses with the SGS reference numbers as defaults.

Every number in SGS-SPEC.md is a key here with the reference default. Loading TOML files,
`inherit`, `--set` overrides and validation live in `config/loading.py`; this module is only the
schema plus the checks that need more than a type (ranges, choices, cross-key rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Executor = Literal["auto", "slurm", "local"]
PHASES: tuple[str, ...] = ("init", "conjecture", "solve", "verify", "guide", "train")
ROUND_PHASES: tuple[str, ...] = ("conjecture", "solve", "verify", "guide", "train")
# every [slurm.<table>] with a job's resources: the phases and the run's watcher job (ops/watcher.py)
SLURM_TABLES: tuple[str, ...] = (*PHASES, "watcher")
TINY_RANDOM = "tiny-random"
# a run name is a directory name, a command-line word and part of Slurm job names
RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,99}")
SLURM_MEM = re.compile(r"[0-9]+[KMGT]?")
MAX_TASKS = 10_000  # tasks of one phase array (Slurm's MaxArraySize is 1001 unless raised)
MAX_CPUS, MAX_GPUS = 4096, 64  # per task (per node)
# head sizes vLLM 0.32's CPU attention accepts (vllm/v1/attention/backends/cpu_attn.py
# get_supported_head_sizes; tests/vllm/test_vllm_engine.py checks this copy against the installed vLLM)
VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


@dataclass(frozen=True)
class RunConfig:
    name: str = "sgs"
    rounds: int = 200
    seed: int = 0
    executor: Executor = "auto"
    runs_dir: str = "runs"
    database_url: str = ""  # "" -> sqlite:///<runs_dir>/<name>/state.db
    max_task_retries: int = 2  # crashes of one shard task before the run is stalled
    local_workers: int = 2  # parallel tasks of the local executor
    smoke: bool = False  # set by `launch --smoke`
    submit_from_jobs: bool = True  # false: `sgsbatch watch` drives the chain from outside
    # a task whose torch/transformers/deepspeed/vllm/sgsbatch differs from the launch's refuses to run
    allow_env_drift: bool = False
    poll_interval_s: float = 30.0  # `launch --wait` / `resume --wait`: seconds between status checks
    # set by `launch --rehearse`: generation, verifier and trainer are SIMULATED (docs/checks.md: Rehearsals)
    rehearsal: bool = False


@dataclass(frozen=True)
class DataConfig:
    source: str = "LukeBailey181Pub/D_3k"  # HF dataset id, or a path (reference JSON, JSONL, saved HF dataset)
    format: Literal["auto", "reference_json", "jsonl", "hf"] = "auto"
    split: str = "train"  # the split of a Hugging Face dataset (hub id or saved DatasetDict)
    limit: int = 0  # 0 = all targets
    strict: bool = False


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape and warm-up of `tiny-random` models (built offline, CPU runs only)."""

    vocab_size: int = 512
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    warmup_examples: int = 128
    warmup_epochs: int = 8
    warmup_lr: float = 3e-3
    warmup_batch_size: int = 8
    cache_dir: str = "~/.cache/sgsbatch/tiny-random"  # finished tiny models, content-addressed; "" = off


@dataclass(frozen=True)
class ModelsConfig:
    solver: str = "deepseek-ai/DeepSeek-Prover-V2-7B"
    conjecturer: str = "deepseek-ai/DeepSeek-Prover-V2-7B"
    guide: str = "LukeBailey181Pub/dspv2_guide"  # the reference's Guide: a fine-tune of DeepSeek-Prover-V2-7B
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)


@dataclass(frozen=True)
class PromptsConfig:
    """Prompt templates per role and the Guide's score tags (sgsbatch/prompts.py).

    Each value is the name of a template set shipped with the package (sgsbatch/prompt_templates/
    <name>.json: "reference" = the SGS reference's exact strings, "legacy" = sgsbatch's earlier
    wording) or a path to your own file (resolved like model paths). Checked at load time.
    """

    solver: str = "reference"
    conjecturer: str = "reference"
    conjecturer_unconditioned: str = "reference"  # the "no problem conditioning" ablation's fixed prompt
    guide: str = "reference"
    guide_tags: str = "reference"  # the (begin, end) tags of the three Guide scores


@dataclass(frozen=True)
class GenerationConfig:
    # "simulated": SIMULATED replies drawn from statistics, no model loaded (backends/simulated_generation.py)
    backend: Literal["vllm", "transformers", "simulated"] = "vllm"
    top_p: float = 1.0
    tensor_parallel_size: int = 1
    # vLLM: the fraction of GPU memory its engine takes (on vLLM's CPU build: of the machine's RAM);
    # kv_cache_memory_bytes > 0 sizes the KV cache itself instead (vLLM's own key; 0 = vLLM decides)
    gpu_memory_utilization: float = 0.9
    kv_cache_memory_bytes: int = 0
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"  # vLLM's weights/activations dtype: "auto" (vLLM's choice: bf16 for an fp32 checkpoint), "bfloat16", "float16", "float32"
    enforce_eager: bool = False  # vLLM: no torch.compile / CUDA graphs (faster start, slower decode; CPU test configs)
    threads: int = 0  # torch CPU threads for the transformers backend; 0 = the task's cpus
    max_in_flight: int = 512  # prompts a generating task keeps in the engine at once (continuous batching)
    max_model_len: int = 8192  # prompt + completion tokens per request (the reference serves with 8192)
    # the sampled tokens' logprobs CISPO's importance weights compare with the trainer's: "raw" (the
    # reference: plain log-softmax on both sides) or "processed" (both under temperature and top-p)
    logprobs: Literal["raw", "processed"] = "raw"
    # SIMULATED backend only (backends/simulated_generation.py): decode throughput it sleeps to mimic
    # (0 = no sleep), median reply tokens per role (log-normal, capped by the completion budget),
    # malformed reply rates, and the solve model: a problem is within reach in round r when its latent
    # difficulty is below the paper's scaling curve (scaling.paper_*, from simulated_r0) at
    # C = (round + 1) * simulated_generations_per_round (smoothed by simulated_difficulty_sharpness);
    # an attempt at a problem within reach succeeds with probability simulated_success_in_reach
    simulated_tokens_per_s: float = 0.0
    simulated_solver_tokens: int = 1500
    simulated_conjecturer_tokens: int = 2500
    simulated_guide_tokens: int = 1000
    simulated_token_sigma: float = 0.5  # sigma of the log-normal token counts
    simulated_malformed_solver: float = 0.03
    simulated_malformed_conjecturer: float = 0.15
    simulated_malformed_guide: float = 0.05
    simulated_r0: float = 0.3
    simulated_generations_per_round: int = 60_000
    simulated_difficulty_sharpness: float = 8.0
    simulated_success_in_reach: float = 0.5


@dataclass(frozen=True)
class SolverConfig:
    samples: int = 8
    temperature: float = 1.0
    max_tokens: int = 8192
    objective: Literal["reinforce", "cispo", "ei"] = "reinforce"
    band_low: float = 0.0  # exclusive
    band_high: float = 0.5
    band_include_high: bool = True  # hard band 0 < s <= 0.5; CISPO: 0 < s < 1
    store_cap: int = 16
    length_penalty_start: float = 0.8
    zero_try: bool = True  # proofs using the `try` tactic get weight 0
    # comments skipped when looking for `try`: "reference" strips `/- -/` with a non-greedy regex,
    # then `--` to the line's end; "lean" reads comments as Lean does (nested; `/-` in a `--` is text)
    try_comments: Literal["reference", "lean"] = "reference"
    lr: float = 3e-6
    batch_size: int = 32
    train: bool = True
    ei_rounds: int = 3  # Expert Iteration trains on stored proofs of the last k rounds
    cispo_clip_max: float = 4.0
    cispo_eps: float = 1e-6


@dataclass(frozen=True)
class ConjecturerConfig:
    enabled: bool = True
    train: bool = True
    conditioned: bool = True  # False: the "no problem conditioning" prompt
    samples_per_target: int = 1
    temperature: float = 1.0
    max_tokens: int = 8192
    band_percentile: float = 0.7
    length_penalty_start: float = 0.8
    lr: float = 3e-6
    batch_size: int = 32
    # a round's conjectures are de-duplicated (against its targets and each other) by "exact" string
    # equality (the reference) or with runs of whitespace collapsed first ("whitespace", ours)
    dedup: Literal["exact", "whitespace"] = "exact"


@dataclass(frozen=True)
class ExtractionConfig:
    # how the Solver's reply counts its declarations: "reference" counts `theorem `, `lemma `, `def `
    # anywhere (comments and longer names included); "code_only" counts Lean words outside comments
    declarations: Literal["reference", "code_only"] = "reference"
    # how the Conjecturer's statement is found: "reference" (last ```lean4 to last ```, `sorry` and
    # the ending counted with comments, `NO CONJECTURE FOUND` malformed); "code_only" (fences paired,
    # `sorry` as a word and the ending outside comments)
    conjecture: Literal["reference", "code_only"] = "reference"
    # `import` lines before a conjecture's theorem: "drop" them (recorded with the sample; the header
    # already imports Mathlib) or "keep" them (the reference: the file then fails in Lean)
    conjecture_imports: Literal["drop", "keep"] = "drop"


@dataclass(frozen=True)
class GuideConfig:
    enabled: bool = True  # False: the "no guide" ablation, R_guide = 1
    temperature: float = 1.0
    max_tokens: int = 8192


@dataclass(frozen=True)
class TrainConfig:
    # "simulated": SIMULATED trainer, counts steps and tokens and writes tiny weights (backends/simulated_trainer.py)
    backend: Literal["deepspeed", "simulated"] = "deepspeed"
    simulated_param_count: int = 6_910_000_000  # the size a real checkpoint is recorded as (bytes = 2 per param, bf16)
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    micro_batch_size: int = 1
    zero_stage: int = 2  # 0, 1 or 2; 3 is refused (export does not gather partitioned weights)
    bf16: bool = True
    gradient_checkpointing: bool = True
    # true: fp32 weights are kept between rounds for the trainer (bf16 autocast), bf16 exported for
    # generation; false (the reference): each round trains from the bf16 weights of the last
    keep_fp32_master: bool = False
    cpu_ranks: int = 1  # training processes per node when slurm.train.gpus = 0 (gloo; CPU rehearsals)


@dataclass(frozen=True)
class VerificationConfig:
    backend: Literal["lean", "simulated"] = "lean"
    timeout_s: float = 200.0
    # The REPL that lean/install.sh builds (a dependency of lean/lakefile.toml), run through `lake env`
    # so Mathlib is on its path. A relative project_dir is resolved against the repository root.
    repl_command: tuple[str, ...] = ("lake", "env", ".lake/packages/REPL/.lake/build/bin/repl")
    project_dir: str = "lean"
    memory_limit_mb: int = 16384  # RLIMIT_AS per REPL process; 0 = no limit
    max_proofs_per_process: int = 200
    system_error_retries: int = 1
    header_timeout_s: float = 600.0  # elaborating a header (`import Mathlib`) once per process
    # A warning containing "failed" fails the proof (the reference's rule; rejects some honest aesop proofs).
    failed_warning_fails: bool = True
    # Every proof the REPL calls verified is pickled and replayed through the kernel by a separate
    # checker that never elaborates a proof (lean/SgsKernelCheck.lean, verification/recheck.py).
    kernel_recheck: bool = True
    checker_command: tuple[str, ...] = ("lake", "env", ".lake/build/bin/sgs_kernel_check")
    # Both run in bubblewrap (verification/sandbox.py): read-only filesystem, one writable scratch
    # directory per process, no network, own pid/user namespaces. "none" = run the commands as they are.
    sandbox: Literal["bwrap", "none"] = "bwrap"
    sandbox_tmpfs_mb: int = 512  # cap on the sandbox's private /tmp, /run, /dev/shm (bwrap 0.7+); 0 = none
    scratch_dir: str = ""  # where the per-process scratch directories go ("" = the system's temp dir)
    # Resources per slot (verification/limits.py): the REPL's scratch is a tmpfs of scratch_mb inside bwrap
    # (bwrap 0.7+), and no file a REPL or checker process writes (its stderr log included) grows past it
    # (RLIMIT_FSIZE); RLIMIT_CPU of each process = cpu_time_factor * (header_timeout_s +
    # max_proofs_per_process * timeout_s); RLIMIT_NPROC (processes and threads) inside a sandbox with a
    # user namespace of its own (Linux 5.14+, not root). 0 = no limit.
    scratch_mb: int = 512
    cpu_time_factor: float = 2.0
    process_limit: int = 1024
    # REPL and checker run under a seccomp filter that denies process creation (verification/process_filter.py;
    # x86_64 and aarch64); threads stay allowed. Issue 26.
    process_filter: bool = True


@dataclass(frozen=True)
class CheckpointConfig:
    keep_last: int = 2  # weights of the last k rounds are kept
    keep_every: int = 10  # and of every n-th round (0 = none)
    estimate_gb_per_role: float = 14.8  # one role's saved weights, for the disk projection (a 7B model in bf16)


@dataclass(frozen=True)
class RecordsConfig:
    """What the run directory keeps of a round's generations once no training reads them (round/compaction.py)."""

    # false: once a round's train job has finished and no training reads its samples any more (Expert
    # Iteration reads the last solver.ei_rounds rounds), each sample's token ids and logprobs and each
    # prompt's ids are replaced by their counts, the outputs gzip-compressed, finished shards' item logs
    # and (a round later) the train job's example files deleted; texts, extractions, verdicts and reviews stay.
    # true: keep everything (~1.2 GB a round per 1,000 targets)
    keep_sample_tokens: bool = False
    # what compaction keeps of the model's replies: "all" (gzip-compressed), or "verified" (only verified
    # Solver samples' text and proof; ~12 GB less over a real 200-round D_3k run, nothing the database needs)
    keep_text: Literal["all", "verified"] = "all"


@dataclass(frozen=True)
class AlertsConfig:
    """What `status`, `watch` and each round's end report as alarms (round/alarms.py, ops/progress.py),
    and how often long work logs its progress."""

    progress_every_s: float = 60.0  # a progress line (rate, done/total, ETA) in a worker's log at most this often
    stuck_after_s: float = 0.0  # a shard without item progress this long is stuck (0 = auto: see the two below)
    stuck_factor: float = 10.0  # auto: this many times the phase's recent per-item time per shard ...
    stuck_floor_s: float = 1800.0  # ... but never less than this
    max_error_rate: float = 0.2  # verify: timeouts + errors above this fraction of checked proofs
    slow_phase_factor: float = 3.0  # a phase running this many times its recent average wall time
    slow_phase_rounds: int = 3  # ... over this many previous rounds
    disk_budget_gb: float = 0.0  # disk projected to the planned rounds above this (0 = no budget)


@dataclass(frozen=True)
class ShardsConfig:
    """Array sizes (tasks per phase and round).

    verify = 0: as many verify tasks as solve tasks, verify task i checks solve shard i and starts
    as soon as solve task i is done (aftercorr). verify = k x solve: verify task j checks every
    verify-th problem of solve shard j mod solve and the verify array starts when the whole solve
    array is done (afterok): few GPU tasks (one engine start each) with many CPU tasks for Lean.
    """

    conjecture: int = 8
    solve: int = 64
    guide: int = 8
    verify: int = 0


@dataclass(frozen=True)
class SlurmPhaseConfig:
    partition: str = ""
    account: str = ""
    qos: str = ""
    gpus: int = 0  # GPUs per task (per node)
    cpus: int = 1  # CPUs per task (per node)
    nodes: int = 1  # nodes per task: train only (one Slurm task per node, ranks = nodes x gpus)
    mem: str = "8G"
    time_min: int = 240
    array_parallelism: int = 64
    signal_delay_s: int = 120  # SIGUSR2 this long before the time limit
    extra: dict[str, str] = field(default_factory=dict)  # more sbatch options, e.g. {constraint = "h200"}
    # node-local directory to copy a model's weights into before loading (e.g. "$TMPDIR"; "" = load in place)
    scratch: str = ""
    # shell lines run at the top of the job script, before the task starts (e.g. "module load cuda/12",
    # "export HF_HOME=/shared/hf"); one line per item. Usually set once for all phases in [slurm.defaults].
    setup: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScalingConfig:
    """`sgsbatch fit`: the scaling law of the cumulative solve rate (SGS-SPEC.md) and the paper's fit."""

    min_generations: int = 100_000  # points below this many generations so far are dropped before fitting
    halves: int = 20  # random-half refits for the spread of A (0 = none)
    paper_asymptote: float = 0.671  # the paper's SGS fit, printed for comparison
    paper_c_mid: float = 1_252_336.0
    paper_b: float = 0.585
    paper_halves_asymptote: float = 0.676  # the paper's random-half fits: A = 67.6% +- 1.1%
    paper_halves_std: float = 0.011


@dataclass(frozen=True)
class ReportConfig:
    """`sgsbatch report`: what the shared HTML page shows (ops/report.py)."""

    recent_rounds: int = 3  # example conjectures come from this many last rounds that have any
    examples: int = 5  # example conjectures per such round (highest guide score first)
    score_bins: int = 20  # histogram bins of the guide score distributions
    max_statement_chars: int = 600  # an example statement longer than this is cut (with a mark)


def _gpu(gpus: int, cpus: int, mem: str, time_min: int) -> SlurmPhaseConfig:
    return SlurmPhaseConfig(gpus=gpus, cpus=cpus, mem=mem, time_min=time_min)


@dataclass(frozen=True)
class SlurmConfig:
    """Each phase's Slurm job. A jobs file (or site file) may also hold `[slurm.defaults]`: keys of
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


@dataclass(frozen=True)
class CanaryConfig:
    """`sgsbatch canary`: one short Slurm job per job shape running each real component (canary/)."""

    targets: int = 4  # run targets whose real prompts each generation check renders and samples
    max_tokens: int = 256  # tokens per canary sample (the Guide check uses guide.max_tokens: a reply must be whole)
    min_guide_parse_rate: float = 0.9  # the published Guide fine-tune parses >99% of its replies, the base model ~55%
    loop_timeout_s: float = 20.0  # the per-proof timeout the looping canary proof must run into
    checkpoint_share: float = 0.5  # a stop checkpoint may take at most this share of slurm.train.signal_delay_s
    time_min: int = 30  # each canary job's time limit (never more than its phase's slurm.<phase>.time_min)
    max_age_days: float = 14.0  # launch accepts a passed canary this recent (same config fingerprint, environment)


@dataclass(frozen=True)
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    data: DataConfig = field(default_factory=DataConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    prompts: PromptsConfig = field(default_factory=PromptsConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    conjecturer: ConjecturerConfig = field(default_factory=ConjecturerConfig)
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    guide: GuideConfig = field(default_factory=GuideConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    verification: VerificationConfig = field(default_factory=VerificationConfig)
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    records: RecordsConfig = field(default_factory=RecordsConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    shards: ShardsConfig = field(default_factory=ShardsConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    scaling: ScalingConfig = field(default_factory=ScalingConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    canary: CanaryConfig = field(default_factory=CanaryConfig)

    @property
    def simulated(self) -> bool:
        """True when any SIMULATED component (verifier, generation, trainer) is in use."""
        return (self.verification.backend == "simulated" or self.generation.backend == "simulated"
                or self.train.backend == "simulated" or self.run.rehearsal)

    def phase_resources(self, phase: str) -> SlurmPhaseConfig:
        res: SlurmPhaseConfig = getattr(self.slurm, phase)
        return res

    def train_ranks_per_node(self) -> int:
        """Training processes per node: one per GPU, or `train.cpu_ranks` without GPUs."""
        return self.slurm.train.gpus or self.train.cpu_ranks

    def train_threads_per_rank(self) -> int:
        """CPU threads of each training process: the train task's cpus shared by its node's ranks."""
        return max(1, self.slurm.train.cpus // self.train_ranks_per_node())

    def shard_count(self, phase: str) -> int:
        if phase in ("init", "train"):
            return 1
        if phase == "verify":
            return self.shards.verify or self.shards.solve
        count: int = getattr(self.shards, phase)
        return count

    def phases_of_round(self, round_index: int) -> tuple[str, ...]:
        """The phases a round runs: no conjecture/guide without a Conjecturer, init only in round 0."""
        phases = [p for p in ROUND_PHASES if self.conjecturer.enabled or p not in ("conjecture",)]
        if not (self.conjecturer.enabled and self.conjecturer.train and self.guide.enabled):
            phases = [p for p in phases if p != "guide"]
        return (("init",) if round_index == 0 else ()) + tuple(phases)


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
          f"e.g. hidden_size = 64 with num_heads = 2 (jobs/tiny-vllm.toml)")
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
    c = cfg.conjecturer
    check(0.0 <= c.band_percentile <= 1.0, "conjecturer.band_percentile", f"must be within [0, 1], got {c.band_percentile}")
    check(0.0 <= c.length_penalty_start <= 1.0, "conjecturer.length_penalty_start", "must be within [0, 1]")
    check(c.samples_per_target >= 1, "conjecturer.samples_per_target", "must be >= 1")
    check(c.lr > 0, "conjecturer.lr", "must be > 0")
    check(c.batch_size >= 1, "conjecturer.batch_size", "must be >= 1")
    check(not (s.objective == "ei" and c.enabled), "conjecturer.enabled",
          "must be false when solver.objective = \"ei\" (Expert Iteration uses no conjectures)")
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
    v = cfg.verification
    check(v.timeout_s > 0, "verification.timeout_s", "must be > 0")
    check(len(v.repl_command) >= 1, "verification.repl_command", "must name a program")
    check(v.memory_limit_mb >= 0, "verification.memory_limit_mb", "must be >= 0 (0 = no limit)")
    check(v.max_proofs_per_process >= 1, "verification.max_proofs_per_process", "must be >= 1")
    check(v.system_error_retries >= 0, "verification.system_error_retries", "must be >= 0")
    check(v.header_timeout_s > 0, "verification.header_timeout_s", "must be > 0")
    check(v.sandbox in ("bwrap", "none"), "verification.sandbox", f"must be one of 'bwrap', 'none', got {v.sandbox!r}")
    check(v.sandbox_tmpfs_mb >= 0, "verification.sandbox_tmpfs_mb", "must be >= 0 (0 = no cap)")
    check(v.scratch_mb >= 0, "verification.scratch_mb", "must be >= 0 (0 = no cap)")
    check(v.cpu_time_factor >= 0, "verification.cpu_time_factor", "must be >= 0 (0 = no CPU limit)")
    check(v.process_limit >= 0, "verification.process_limit", "must be >= 0 (0 = no limit)")
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
    for key in ("stuck_after_s", "stuck_factor", "stuck_floor_s", "disk_budget_gb", "slow_phase_factor"):
        check(getattr(cfg.alerts, key) >= 0, f"alerts.{key}", "must be >= 0")
    check(0 <= cfg.alerts.max_error_rate <= 1, "alerts.max_error_rate", "must be in [0, 1]")
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
    return errs
