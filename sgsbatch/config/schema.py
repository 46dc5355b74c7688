"""The run configuration: typed, frozen dataclasses with the SGS reference numbers as defaults.

Every number of the SGS paper (docs/algorithm.md) is a key here with the reference default. Every key is declared with
`key(default, help)`: its help text lives here and nowhere else (`sgsbatch config keys` and the
configuration reference read it through config/keys.py; a test checks that no key lacks one).
Loading TOML files, `inherit`, `--set` overrides and validation live in `config/loading.py`; the
ranges of single keys are declared with them (`key(..., bound=Bound(...))`); the checks across keys live in
`config/validation.py`, which also checks the ranges; this module is only the schema: the root `Config`
over the tables of config/run_keys.py, role_keys.py, job_keys.py and projection_keys.py, with their shared
names and `key` from config/declare.py, all importable from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sgsbatch.config.declare import (
    EVAL_SET_NAME,
    MAX_CPUS,
    MAX_GPUS,
    MAX_TASKS,
    PHASES,
    PUBLISHED_CLIP,
    ROLLOUT_JOB,
    ROUND_PHASES,
    RUN_NAME,
    SELECTIONS,
    SLURM_MEM,
    SLURM_TABLES,
    TINY_RANDOM,
    VLLM_CPU_HEAD_SIZES,
    WINDOW_SELECTIONS,
    Bound,
    Executor,
    key,
)
from sgsbatch.config.job_keys import (
    AlertsConfig,
    CanaryConfig,
    CheckpointConfig,
    RecordsConfig,
    ReportConfig,
    ScalingConfig,
    ShardsConfig,
    SlurmConfig,
    SlurmPhaseConfig,
    VerificationConfig,
)
from sgsbatch.config.projection_keys import (
    ProjectionConfig,
)
from sgsbatch.config.role_keys import (
    ConjecturerConfig,
    ExtractionConfig,
    GuideConfig,
    SearchConfig,
    SolverConfig,
    TrainConfig,
)
from sgsbatch.config.run_keys import (
    DataConfig,
    EvalConfig,
    GenerationConfig,
    ModelsConfig,
    PromptsConfig,
    RunConfig,
    TinyModelConfig,
)

__all__ = [  # the names the package imports from here
    "AlertsConfig", "Bound", "CanaryConfig", "CheckpointConfig", "Config", "ConjecturerConfig", "DataConfig",
    "EVAL_SET_NAME", "EvalConfig", "Executor", "ExtractionConfig", "GenerationConfig", "GuideConfig", "MAX_CPUS",
    "MAX_GPUS", "MAX_TASKS", "ModelsConfig", "PHASES", "PUBLISHED_CLIP", "ProjectionConfig", "PromptsConfig",
    "ROLLOUT_JOB", "ROUND_PHASES", "RUN_NAME", "RecordsConfig", "ReportConfig", "RunConfig", "SELECTIONS",
    "SLURM_MEM", "SLURM_TABLES", "ScalingConfig", "SearchConfig", "ShardsConfig", "SlurmConfig", "SlurmPhaseConfig",
    "SolverConfig", "TINY_RANDOM", "TinyModelConfig", "TrainConfig", "VLLM_CPU_HEAD_SIZES", "VerificationConfig",
    "WINDOW_SELECTIONS", "key",
]


@dataclass(frozen=True)
class Config:
    """A run's whole configuration: one table per part (`sgsbatch config keys` lists every key)."""

    run: RunConfig = field(default_factory=RunConfig)
    data: DataConfig = field(default_factory=DataConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    prompts: PromptsConfig = field(default_factory=PromptsConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
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
    projection: ProjectionConfig = field(default_factory=ProjectionConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    @property
    def simulated(self) -> bool:
        """True when any SIMULATED component (verifier, generation, trainer, a search's tactic environment
        other than Lean) is in use."""
        return (self.verification.backend == "simulated" or self.generation.backend == "simulated"
                or self.train.backend == "simulated" or self.run.rehearsal
                or (self.solver.mode == "search" and self.search.environment != "lean"))

    def simulated_parts(self) -> list[str]:
        """Which components are SIMULATED (or replayed), in words: what launch, the plan and logs name."""
        parts = [name for name, on in (("generation", self.generation.backend == "simulated"),
                                       ("verifier", self.verification.backend == "simulated"),
                                       ("trainer", self.train.backend == "simulated"),
                                       ("tactic environment", self.solver.mode == "search"
                                        and self.search.environment == "simulated"),
                                       ("replayed tactic environment", self.solver.mode == "search"
                                        and self.search.environment == "replay")) if on]
        return parts

    def simulated_label(self) -> str:
        """The SIMULATED parts as one string for a row of results (`proofs`, the export): "generation,
        verifier, trainer"; "" when nothing is simulated."""
        parts = self.simulated_parts() or (["rehearsal"] if self.simulated else [])
        return ", ".join(parts)

    def phase_resources(self, phase: str) -> SlurmPhaseConfig:
        """A phase's Slurm table; the colocated rollout job (`ROLLOUT_JOB`) runs on the train job's."""
        res: SlurmPhaseConfig = getattr(self.slurm, "train" if phase == ROLLOUT_JOB else phase)
        return res

    def train_ranks_per_node(self) -> int:
        """Training processes per node: one per GPU, or `train.cpu_ranks` without GPUs."""
        return self.slurm.train.gpus or self.train.cpu_ranks

    def train_threads_per_rank(self) -> int:
        """CPU threads of each training process: the train task's cpus shared by its node's ranks."""
        return max(1, self.slurm.train.cpus // self.train_ranks_per_node())

    def shard_count(self, phase: str) -> int:
        if phase in ("init", "train", ROLLOUT_JOB):
            return 1
        if phase == "verify":
            return self.shards.verify or self.shards.solve
        count: int = getattr(self.shards, phase)
        return count

    def solve_shard_of(self, verify_shard: int) -> int:
        """The one solve shard whose proofs verify shard j checks (and the only one it waits for)."""
        return verify_shard % self.shard_count("solve")

    def colocated(self) -> bool:
        """Rounds run as rollout steps of a colocated job (solver.colocated_steps), not as a chain of phase jobs."""
        return self.solver.colocated_steps > 0

    def jobs_of_round(self, round_index: int) -> tuple[str, ...]:
        """What an executor starts for a round: its phases, or with `colocated()` the init phase (round 0) and
        one colocated rollout job, which runs the round's solve, verify (as CPU jobs of their own) and train."""
        if self.colocated():
            return (("init",) if round_index == 0 else ()) + (ROLLOUT_JOB,)
        return self.phases_of_round(round_index)

    def phases_of_round(self, round_index: int) -> tuple[str, ...]:
        """The phases a round runs: no conjecture/guide without a Conjecturer, init only in round 0."""
        phases = [p for p in ROUND_PHASES if self.conjecturer.enabled or p not in ("conjecture",)]
        if not (self.conjecturer.enabled and self.conjecturer.train and self.guide.enabled):
            phases = [p for p in phases if p != "guide"]
        return (("init",) if round_index == 0 else ()) + tuple(phases)
