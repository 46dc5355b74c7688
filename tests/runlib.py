"""Helpers for tests that run whole tiny runs: launching, and reading a run's outcome back."""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "jobs" / "tiny.toml"


def sgsbatch(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
             timeout: float = 1800, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ if env is None else env)
    return subprocess.run([sys.executable, "-m", "sgsbatch.cli", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=timeout, input=stdin)


def run_env() -> dict[str, str]:
    """This environment for the `sgsbatch` command and the jobs it starts: the interpreter's bin first on
    PATH, no fault injection (a test asks for that itself)."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    env.pop("SGSBATCH_FAULT_INJECT", None)
    return env


def launch_args(runs_dir: Path, name: str, *overrides: str) -> list[str]:
    args = ["launch", str(TINY), "--set", f"run.runs_dir={runs_dir}", "--set", f"run.name={name}"]
    for o in overrides:
        args += ["--set", o]
    return args


def status(runs_dir: Path, name: str) -> dict[str, Any]:
    proc = sgsbatch("status", name, "--runs-dir", str(runs_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


OUTCOME_QUERIES = {
    "attempts": "SELECT round, problem_id, sample, verdict, proof FROM attempts ORDER BY round, problem_id, sample",
    "solved": "SELECT DISTINCT problem_id FROM stored_proofs ORDER BY problem_id",
    "store": "SELECT problem_id, slot, round, sample FROM stored_proofs ORDER BY problem_id, slot",
    "conjectures": "SELECT round, target_id, sample, status, statement FROM conjectures "
                   "ORDER BY round, target_id, sample",
    "reviews": "SELECT round, conjecture_id, score FROM reviews ORDER BY round, conjecture_id",
    "steps": "SELECT round, role, steps, sequences FROM checkpoints ORDER BY round, role",
}


def outcome(run_dir: Path, url: str | None = None) -> dict[str, Any]:
    """What a run produced: attempts with verdicts, solved set, conjectures, reviews, trained steps;
    from its SQLite file, or from `url` (any SQLAlchemy database, e.g. PostgreSQL)."""
    if url is None:
        con = sqlite3.connect(run_dir / "state.db")
        try:
            return {k: con.execute(q).fetchall() for k, q in OUTCOME_QUERIES.items()}
        finally:
            con.close()
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {k: [tuple(r) for r in conn.execute(text(q)).all()] for k, q in OUTCOME_QUERIES.items()}
    finally:
        engine.dispose()


def recorded_run(runs_dir: Path, name: str, executor: str = "local", tiny_targets: bool = False,
                 sets: Sequence[str] = ()) -> Any:
    """A 2-round tiny run recorded (directory, config, database, round 0 prepared) but never started:
    for tests of the commands around a run, not of the run itself. `tiny_targets`: tiny.toml's own
    targets instead of three trivial ones, for a test that runs the init phase (its tiny models are
    then the ones every tiny run builds: one warm-up, cached, instead of one more). `sets`: more `--set`s."""
    from sgsbatch.config.loading import load_config
    from sgsbatch.logic.data import Target, load_targets
    from sgsbatch.round.lifecycle import prepare_round
    from sgsbatch.run.handle import create_run
    from sgsbatch.state.schema import RunState

    cfg = load_config(TINY, [f"run.runs_dir={runs_dir}", f"run.name={name}", f"run.executor={executor}",
                             "run.rounds=2", *sets])
    targets = (load_targets(cfg.data.source, limit=cfg.data.limit or None).targets if tiny_targets else
               [Target(f"t{i}", "import Mathlib\n", f"theorem t{i} : True := by") for i in range(3)])
    h = create_run(cfg, targets, executor)
    prepare_round(h, 0)
    h.set_state(RunState.running)
    return h


# Advice (issue 28): the commands an operator-facing message tells the user to run, run as printed.
PLACEHOLDER = re.compile(r"(=N\b|=\.\.\.|KEY=VALUE|\bRUN\b|<[a-z_ ]+>)")


def advised(message: str) -> list[list[str]]:
    """The `sgsbatch ...` commands a message advises, each as argv; a placeholder fails the test."""
    out = []
    for text in re.findall(r"`(sgsbatch [^`]+)`", message):
        assert not PLACEHOLDER.search(text), f"the advice is not a command one can run: {text!r} in {message!r}"
        out.append(shlex.split(text))
    return out


INFORMATIONAL = ("logs", "status", "proofs")  # commands that show, never change, a run


def repair_steps(message: str) -> list[list[str]]:
    """What an operator does with a message, in order: the commands that show the run (`logs`, ...),
    then the steps before a resume (`rebuild --restore-config`, ...), then the first `resume` it
    advises (a message may offer several alternatives: `--set run.allow_env_drift=true`, or fix the
    cause and `resume`; the first is the one it leads with)."""
    commands = advised(message)
    show = [c for c in commands if c[1] in INFORMATIONAL]
    before = [c for c in commands if c[1] not in INFORMATIONAL and c[1] != "resume"]
    resume = [c for c in commands if c[1] == "resume"][:1]
    return show + before + resume


def run_advice(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run an advised command as printed (`sgsbatch` is this checkout's CLI)."""
    assert argv[0] == "sgsbatch", argv
    return sgsbatch(*argv[1:], env=env)


def finished_job(shard_dir: Path, wait_s: float = 300.0) -> Any:
    """The shard of a job that goes on after its run completed (a colocated rollout job: the run's last round
    ends, then the job hands on, writes its marker and its supervisor records the attempt's end), once that
    is done; `wait_s` is a safety limit, not a measurement."""
    import time

    from sgsbatch.run.attempts import attempts
    from sgsbatch.run.shards import Shard

    shard = Shard(shard_dir, 0)
    deadline = time.monotonic() + wait_s
    while not (shard.is_done() and (tried := attempts(shard)) and tried[-1].end is not None):
        assert time.monotonic() < deadline, f"{shard_dir} did not finish"
        time.sleep(0.2)
    return shard
