"""The local executor: the same round DAG as local processes, for machines without Slurm.

`start_driver` launches `python -m sgsbatch.scheduling.local RUN_DIR` in its own session; the
driver runs every unfinished round phase by phase, up to `run.local_workers` shard supervisors
at once (each retrying its worker like on Slurm), and exits when the run is completed (0), a
shard ran out of retries (1; the run shows as stalled) or it was told to stop (SIGTERM/SIGINT:
children stop, files stay consistent). Its pid is in `local/driver.pid`; `resume` starts a new
driver, which skips everything already done.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sgsbatch.round.lifecycle import prepare_round, round_completed
from sgsbatch.run.handle import RunHandle, open_run_dir
from sgsbatch.run.paths import RunPaths, command
from sgsbatch.run.shards import unfinished
from sgsbatch.scheduling.liveness import Liveness, StallReason
from sgsbatch.scheduling.supervisor import DONE, FAILED, run_supervised

DRIVER_MODULE = "sgsbatch.scheduling.local"


def pid_file(paths: RunPaths) -> Path:
    return paths.local / "driver.pid"


def driver_alive(paths: RunPaths) -> int | None:
    """The pid of this run's live driver, or None."""
    try:
        pid = int(pid_file(paths).read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if DRIVER_MODULE in cmdline and str(paths.root) in cmdline else None


def start_driver(h: RunHandle) -> subprocess.Popen[bytes]:
    h.paths.local.mkdir(parents=True, exist_ok=True)
    log = (h.paths.local / "driver.log").open("ab")
    proc = subprocess.Popen([sys.executable, "-m", DRIVER_MODULE, str(h.paths.root)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, cwd=str(h.paths.root))
    pid_file(h.paths).write_text(str(proc.pid))
    return proc


def stop_driver(paths: RunPaths) -> bool:
    pid = driver_alive(paths)
    if pid is None:
        return False
    os.killpg(pid, signal.SIGTERM)
    return True


def run_phase(h: RunHandle, r: int, phase: str) -> str:
    todo = unfinished(h.paths.phase_dir(r, phase), h.cfg.shard_count(phase))
    if not todo:
        return DONE
    with ThreadPoolExecutor(max_workers=min(h.cfg.run.local_workers, len(todo))) as pool:
        results = list(pool.map(lambda i: run_supervised(h.paths.root, r, phase, i,
                                                         max_retries=h.cfg.run.max_task_retries), todo))
    if FAILED in results:
        return FAILED
    return DONE if all(x == DONE for x in results) else "interrupted"


def drive(run_dir: Path) -> int:
    h = open_run_dir(RunPaths(run_dir))
    pid_file(h.paths).write_text(str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for r in range(h.cfg.run.rounds):
        if round_completed(h, r):
            continue
        prepare_round(h, r)
        for phase in h.cfg.phases_of_round(r):
            result = run_phase(h, r, phase)
            if result != DONE:
                print(f"sgsbatch local driver: round {r} {phase}: {result}", file=sys.stderr)
                return 1
    return 0


class LocalExecutor:
    """The round DAG as local processes, driven by one detached driver per run."""

    name = "local"

    def start(self, h: RunHandle, r: int) -> None:
        start_driver(h)  # the driver skips everything already done, whatever r is

    def stop(self, h: RunHandle) -> None:
        stop_driver(h.paths)

    def liveness(self, h: RunHandle, r: int, phase: str, detail: bool = True) -> Liveness:
        pid = driver_alive(h.paths)
        if pid is None:
            return Liveness("stalled", StallReason.local_driver_dead,
                            f"local driver is not running but work is unfinished; run `{command('resume', h.paths)}`")
        return Liveness("running", driver_pid=pid)

    def record_round(self, h: RunHandle, r: int) -> None:
        return None  # no scheduler records beyond the shard files

    def continue_chain(self, h: RunHandle, r: int) -> None:
        return None  # the driver goes on to round r + 1 itself


if __name__ == "__main__":
    sys.exit(drive(Path(sys.argv[1])))
