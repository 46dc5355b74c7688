"""Where a run keeps its files. The run directory plus the database are the run's whole truth.

    <runs_dir>/<name>/
      config.toml                 the frozen, resolved config (never the jobs file)
      state.db                    SQLite state (unless run.database_url points elsewhere)
      targets.jsonl               the run's targets, as loaded at launch
      rounds/r0003/inputs.json    what round 3 starts from (unsolved targets), written before submission
      rounds/r0003/jobs.jsonl     every Slurm job submitted for round 3 (phase, job id, shards), appended
      rounds/r0003/<phase>/       shard outputs: shard_00007.jsonl (+ .done marker, written last),
                                  .partial.jsonl item logs, .failures crash log, .failed marker
      checkpoints/init/<role>/    base weights (tiny-random built here)
      checkpoints/r0003/<role>/   weights after round 3's training
      tb/                         TensorBoard event files
      slurm/                      submitit folders (job pickles, logs)
      local/                      local-executor driver pid and logs
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def db(self) -> Path:
        return self.root / "state.db"

    @property
    def targets(self) -> Path:
        return self.root / "targets.jsonl"

    @property
    def tb(self) -> Path:
        return self.root / "tb"

    @property
    def slurm(self) -> Path:
        return self.root / "slurm"

    @property
    def local(self) -> Path:
        return self.root / "local"

    def round_dir(self, r: int) -> Path:
        return self.root / "rounds" / f"r{r:04d}"

    def round_inputs(self, r: int) -> Path:
        return self.round_dir(r) / "inputs.json"

    def jobs_journal(self, r: int) -> Path:
        return self.round_dir(r) / "jobs.jsonl"

    def phase_dir(self, r: int, phase: str) -> Path:
        return self.round_dir(r) / phase

    def checkpoint(self, r: int | None, role: str) -> Path:
        """Weights of `role` after round r (None: the base weights the run starts from)."""
        return self.root / "checkpoints" / ("init" if r is None else f"r{r:04d}") / role

    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"


def run_paths(runs_dir: str | Path, name: str) -> RunPaths:
    return RunPaths(Path(runs_dir).resolve() / name)
