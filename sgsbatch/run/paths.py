"""Where a run keeps its files. The run directory plus the database are the run's whole truth.

    <runs_dir>/<name>/
      config.toml                 the frozen, resolved config (never the jobs file)
      state.db                    SQLite state (unless run.database_url points elsewhere)
      targets.jsonl               the run's targets, as loaded at launch
      amendments.jsonl            config changes after launch (`resume --set`; run/amendments.py)
      rounds/r0003/inputs.json    what round 3 starts from (unsolved targets), written before submission
      rounds/r0003/jobs.jsonl     every Slurm job submitted for round 3 (phase, job id, shards), appended
      rounds/r0003/<phase>/       shard outputs: shard_00007.jsonl (+ .done marker, written last),
                                  .partial.jsonl item logs, .failures crash log, .failed marker,
                                  .lock (the worker that owns the shard: host, pid); a generating
                                  phase's .arrays (prompt ids, token ids, logprobs: run/token_arrays.py)
      rounds/r0003/conjectures.jsonl  the round's unique conjectures, derived once from its conjecture shards
      rounds/r0003/compacted      written last when the round was compacted (round/compaction.py): its
                                  outputs are then shard_00007.jsonl.gz, its .arrays files gone (counts stay)
      checkpoints/init/<role>/    base weights (tiny-random built here)
      checkpoints/r0003/<role>/   weights after round 3's training
      checkpoints/optimizer/<role>/r0003/  with train.optimizer = "carry": the role's AdamW state (DeepSpeed
                                  checkpoint + SGSBATCH_COMPLETE marker) at the end of round 3's training,
                                  loaded by its next trained round; only the newest is kept (round end)
      eval/r0003/<set>/           held-out evaluation of the Solver's weights after round 3 (`sgsbatch eval`,
                                  ops/evaluate.py): results.jsonl (one problem a line: its samples' proofs and
                                  verdicts), then summary.json (pass@k), then the DONE marker, written last;
      eval/r0003/job.json, job.log  the evaluation job submitted for round 3 (scheduling/eval_jobs.py) and its
                                  output (a local one's; a Slurm job's is under slurm/eval/)
      tb/                         TensorBoard event files (tb/eval/: held-out evaluation's points)
      slurm/                      submitit folders (job pickles, logs)
      local/                      local-executor driver pid, lock (host, pid) and logs

Commands find runs in `--runs-dir`, else $SGSBATCH_RUNS_DIR, else ./runs; `launch`, `canary` and
`preflight` put them by the same rule, with the config's run.runs_dir before ./runs
(config/loading.runs_dir_layer). A RUN with a `/` is the path of a run directory
(run/handle.existing_run_paths). `command` writes the complete next command a message tells the
user to run.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

RUNS_DIR_ENV = "SGSBATCH_RUNS_DIR"


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

    def eval_round_dir(self, r: int) -> Path:
        """Held-out evaluation of the Solver's weights after round r: a directory per set, the job's log."""
        return self.root / "eval" / f"r{r:04d}"

    def eval_dir(self, r: int, name: str) -> Path:
        """Held-out evaluation of set `name` with the Solver's weights after round r."""
        return self.eval_round_dir(r) / name

    def eval_job(self, r: int) -> Path:
        """The record of the evaluation job submitted for round r (scheduling/eval_jobs.py)."""
        return self.eval_round_dir(r) / "job.json"

    def eval_done(self, r: int, name: str) -> Path:
        """The completion marker of set `name`'s evaluation after round r, written last."""
        return self.eval_dir(r, name) / "DONE"

    def checkpoint(self, r: int | None, role: str) -> Path:
        """Weights of `role` after round r (None: the base weights the run starts from)."""
        return self.root / "checkpoints" / ("init" if r is None else f"r{r:04d}") / role

    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    def optimizer_states(self, role: str) -> Path:
        """Where `role`'s carried AdamW states live (train.optimizer = "carry"), one directory a round."""
        return self.checkpoints_dir() / "optimizer" / role

    def optimizer_state(self, r: int, role: str) -> Path:
        """`role`'s AdamW state at the end of round r's training (train.optimizer = "carry")."""
        return self.optimizer_states(role) / f"r{r:04d}"


def tree_bytes(path: Path) -> int:
    """Bytes of the files under `path` (or of the file itself; 0 if absent), symlinks not followed; a
    file renamed or deleted while it is walked (a shard's temp file) is skipped."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    stack = [str(path)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except (FileNotFoundError, NotADirectoryError):
            continue
        with it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    try:
                        total += e.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:  # a temp file renamed or a file deleted while we walk
                        continue
    return total


def run_paths(runs_dir: str | Path, name: str) -> RunPaths:
    return RunPaths(Path(runs_dir).resolve() / name)


def default_runs_dir() -> str:
    """Where the commands look for runs without `--runs-dir`: $SGSBATCH_RUNS_DIR, else ./runs."""
    return os.environ.get(RUNS_DIR_ENV) or "runs"


def command(verb: str, paths: RunPaths, *extra: str) -> str:
    """The complete command line for `verb` on this run, e.g. `sgsbatch resume t1 --runs-dir /x/runs`
    (`--runs-dir` left out only where the default finds the run)."""
    words = ["sgsbatch", verb, paths.name]
    if Path(default_runs_dir()).resolve() != paths.root.parent:
        words += ["--runs-dir", shlex.quote(str(paths.root.parent))]
    return " ".join([*words, *extra])
