"""The state database schema (sqlmodel tables). Version history and migrations live in db.py.

One database may hold several runs (a PostgreSQL `database_url`), so every row names its run.
Row classes whose concept also exists in memory are named `...Row` (`ProblemRow`, `ReviewRow`);
their table names are unchanged.
Uniqueness constraints make ingestion idempotent: re-ingesting a shard inserts nothing new.
"""

from __future__ import annotations

import enum

from sqlalchemy import Index, UniqueConstraint
from sqlmodel import Field, SQLModel


class RunState(enum.StrEnum):
    pending = "pending"
    running = "running"
    stalled = "stalled"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


class PhaseStatus(enum.StrEnum):
    pending = "pending"
    submitted = "submitted"
    running = "running"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


class SchemaVersion(SQLModel, table=True):
    __tablename__ = "schema_version"
    version: int = Field(primary_key=True)
    applied_at: float = 0.0


class Run(SQLModel, table=True):
    __tablename__ = "runs"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    run_dir: str
    created_at: float
    updated_at: float = 0.0
    config_toml: str
    config_hash: str
    executor: str  # resolved: slurm | local
    state: RunState = RunState.pending
    message: str = ""  # why it is stalled / failed / cancelled
    simulated: bool = False
    smoke: bool = False
    rounds: int
    seed: int = 0
    targets: int = 0


class RunEnvironment(SQLModel, table=True):
    """The software environment a run was launched in (run/environment.py); one row per run."""

    __tablename__ = "run_environments"
    run_id: int = Field(foreign_key="runs.id", primary_key=True)
    captured_at: float
    host: str = ""
    record: str  # the JSON of run/environment.capture()


class Amendment(SQLModel, table=True):
    """One config key changed after launch (`resume --set`, ops/amend.py); also in the run
    directory's amendments.jsonl (run/amendments.py), from which `rebuild` restores these rows."""

    __tablename__ = "amendments"
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    at: float
    key: str
    old: str  # JSON of the value before
    new: str  # JSON of the value after
    kind: str  # operational | method
    from_round: int | None = None  # method: in effect from this round on
    round: int = 0  # the run's current round when it was made
    command: str = ""


class Round(SQLModel, table=True):
    __tablename__ = "rounds"
    __table_args__ = (UniqueConstraint("run_id", "index"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    index: int
    state: str = "pending"  # pending | running | completed
    started_at: float = 0.0
    completed_at: float = 0.0
    unsolved: int = 0
    generations: int = 0  # generations so far, this round included, once completed


class Phase(SQLModel, table=True):
    __tablename__ = "phases"
    __table_args__ = (UniqueConstraint("run_id", "round", "kind"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    round: int
    kind: str
    status: PhaseStatus = PhaseStatus.pending
    shards: int = 1
    started_at: float = 0.0
    completed_at: float = 0.0
    wall_s: float = 0.0


class SlurmJob(SQLModel, table=True):
    __tablename__ = "slurm_jobs"
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    round: int
    phase: str
    job_id: str  # Slurm job id (array: the array's id); local: "local:<pid>"
    shards: str = "[]"  # JSON list: shard index of each array task, in task order
    submitted_at: float = 0.0
    active: bool = True  # false once superseded by a resubmission
    state: str = ""  # last state seen (sacct/squeue); per task in task_states
    task_states: str = "{}"  # JSON {task index: state}
    restarts: int = 0  # Slurm requeues seen (preemption, node failure, self-requeue)


class ProblemRow(SQLModel, table=True):
    __tablename__ = "problems"
    __table_args__ = (UniqueConstraint("run_id", "problem_id"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    problem_id: str
    header: str
    theorem: str


class Conjecture(SQLModel, table=True):
    __tablename__ = "conjectures"
    __table_args__ = (UniqueConstraint("run_id", "round", "target_id", "sample"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    round: int
    target_id: str
    sample: int = 0
    conjecture_id: str | None = None  # set when well-formed and unique
    statement: str | None = None
    status: str  # ok | malformed | duplicate
    reason: str | None = None
    tokens: int = 0


class Attempt(SQLModel, table=True):
    __tablename__ = "attempts"
    __table_args__ = (
        UniqueConstraint("run_id", "round", "problem_id", "sample"),
        Index("ix_attempts_run_problem", "run_id", "problem_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    round: int
    problem_id: str
    is_target: bool
    sample: int
    extracted: bool
    extract_reason: str | None = None
    proof: str | None = None
    verdict: str  # verified | failed | timeout | error | unextracted
    verify_reason: str | None = None
    tokens: int = 0
    finish_reason: str = ""
    verify_s: float = 0.0


class ReviewRow(SQLModel, table=True):
    __tablename__ = "reviews"
    __table_args__ = (UniqueConstraint("run_id", "round", "conjecture_id"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    round: int
    conjecture_id: str
    parsed: bool
    reason: str | None = None
    relevance: float
    redundant: float
    complexity: float
    score: float
    tokens: int = 0


class StoredProof(SQLModel, table=True):
    __tablename__ = "stored_proofs"
    __table_args__ = (UniqueConstraint("run_id", "problem_id", "slot"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    problem_id: str = Field(index=True)
    slot: int  # 0 .. store_cap-1
    round: int
    sample: int = 0
    proof: str


class Checkpoint(SQLModel, table=True):
    __tablename__ = "checkpoints"
    __table_args__ = (UniqueConstraint("run_id", "round", "role"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    round: int  # -1: the base weights
    role: str
    path: str
    steps: int = 0
    sequences: int = 0
    deleted: bool = False


class Metric(SQLModel, table=True):
    __tablename__ = "metrics"
    __table_args__ = (UniqueConstraint("run_id", "round", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    round: int
    name: str
    value: float


class Ingestion(SQLModel, table=True):
    """A (round, phase) whose shards are in the database: ingesting it again is a no-op."""

    __tablename__ = "ingestions"
    __table_args__ = (UniqueConstraint("run_id", "round", "phase"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    round: int
    phase: str
    rows: int = 0
    at: float = 0.0
