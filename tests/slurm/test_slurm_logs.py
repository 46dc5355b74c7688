"""`sgsbatch logs` on a real Slurm run: submitit's logs of a shard's submission plus its worker log."""

from __future__ import annotations

from pathlib import Path

from helpers import SlurmCluster
from runlib import launch_args, sgsbatch


def test_logs_finds_submitit_and_worker_logs(slurm_cluster: SlurmCluster, tmp_path: Path,
                                             cli_env: dict[str, str]) -> None:
    proc = sgsbatch(*launch_args(tmp_path, "slog", "run.executor=slurm", "run.rounds=1"), "--wait", env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = sgsbatch("logs", "slog", "--runs-dir", str(tmp_path), "--round", "0", "--phase", "solve", "--shard", "0",
                   env=cli_env)
    assert res.returncode == 0, res.stderr
    out_files = [line for line in res.stdout.splitlines() if line.startswith("==> ")]
    assert any(f.endswith("_log.out <==") and "/slurm/r0000/solve/" in f for f in out_files), out_files
    assert any(f.endswith("shard_00000.attempt.log <==") for f in out_files), out_files
    assert "attempt 1/1" in res.stderr
    bad = sgsbatch("logs", "slog", "--runs-dir", str(tmp_path), "--round", "0", "--phase", "solve", "--shard", "0",
                   "--attempt", "2", env=cli_env)
    assert bad.returncode != 0 and "has no attempt 2; attempts: 1" in bad.stderr
