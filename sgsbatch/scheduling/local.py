"""The local executor: the same round DAG as local processes, for machines without Slurm.

`start_driver` launches `python -m sgsbatch.scheduling.local RUN_DIR` in its own session; the
driver runs every unfinished round phase by phase, up to `run.local_workers` shard supervisors
at once (each retrying its worker like on Slurm; with `verification.streaming` solve and verify
run together, each with up to that many, verify shard j from the start of its solve shard), and
exits when the run is completed (0), a
shard ran out of retries (1, after the verify shards of the solve shards that did finish ran, as
on Slurm; the run shows as stalled) or it was told to stop (SIGTERM, as
`cancel` sends it: the driver sets its stop flag, then signals its process group; the workers
stop, the supervisors return without counting a failure or starting a new worker, and the driver
exits 143). Its pid is in `local/driver.pid`; it
holds `local/driver.lock` (host, pid) while it runs, so a second driver for the run refuses to
start (run/lock.py); `resume` starts a new driver, which skips everything already done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType

from sgsbatch.config.schema import Config
from sgsbatch.errors import RunError
from sgsbatch.round.lifecycle import prepare_round, round_completed
from sgsbatch.run.handle import RunHandle, open_run_dir
from sgsbatch.run.lock import LockHeld, OwnerLock, describe, holder
from sgsbatch.run.paths import RunPaths, command
from sgsbatch.run.shards import Shard, atomic_write_text, unfinished
from sgsbatch.scheduling.liveness import Liveness, StallReason
from sgsbatch.scheduling.supervisor import DONE, FAILED, UPSTREAM, run_supervised

DRIVER_MODULE = "sgsbatch.scheduling.local"
STOP_WAIT_S = 120.0  # how long `cancel` waits for the run's processes before SIGKILL
_STOPPING = threading.Event()  # set in the driver by SIGTERM: supervisors start no new worker


def pid_file(paths: RunPaths) -> Path:
    return paths.local / "driver.pid"


def lock_file(paths: RunPaths) -> Path:
    return paths.local / "driver.lock"


def driver_alive(paths: RunPaths) -> int | None:
    """The pid of this run's live driver, or None."""
    try:
        pid = int(pid_file(paths).read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if DRIVER_MODULE in cmdline and str(paths.root) in cmdline else None


def start_driver(h: RunHandle) -> subprocess.Popen[bytes]:
    owner = holder(lock_file(h.paths))
    if owner is not None:
        raise RunError(f"run {h.cfg.run.name} is already driven by {describe(owner)}; stop it first with "
                       f"`{command('cancel', h.paths)}`")
    h.paths.local.mkdir(parents=True, exist_ok=True)
    log = (h.paths.local / "driver.log").open("ab")
    proc = subprocess.Popen([sys.executable, "-m", DRIVER_MODULE, str(h.paths.root)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, cwd=str(h.paths.root))
    atomic_write_text(pid_file(h.paths), str(proc.pid))
    return proc


def _group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs (zombies waiting to be reaped do not count:
    a driver started by this very process stays a zombie until it is reaped, see `stop_driver`)."""
    proc = Path("/proc")
    if not proc.is_dir():  # no procfs: ask the kernel, zombies included
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended while we looked
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # not our child: init reaps it
        os.waitpid(pid, os.WNOHANG)  # our own child (a driver started by this process): reap it


def stop_driver(paths: RunPaths, wait_s: float = STOP_WAIT_S) -> bool:
    """SIGTERM to the driver (which passes it on to its process group: workers, their children), then
    wait until every process of the group is gone (SIGKILL to the group after `wait_s`). False when
    no driver was running."""
    pid = driver_alive(paths)
    if pid is None:
        return False
    try:
        # to the driver alone: it sets its stop flag before it signals its workers, so a supervisor
        # never sees its worker die of the cancel before it knows it is a cancel (not a crash)
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False  # it ended between the check and the signal
    deadline = time.monotonic() + wait_s
    while _group_alive(pid):
        _reap(pid)
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
        time.sleep(0.2)
    _reap(pid)
    return True


def _supervise(h: RunHandle, cfg: Config, r: int, phase: str, i: int) -> str:
    """Shard i's supervisor, with round r's retries, ending early when the driver is cancelled."""
    return run_supervised(h.paths.root, r, phase, i, max_retries=cfg.run.max_task_retries, stopping=_STOPPING.is_set)


def run_phase(h: RunHandle, r: int, phase: str) -> str:
    cfg = h.refreshed().at(r)  # amended since the driver started: the newest retries, round r's shards
    todo = unfinished(h.paths.phase_dir(r, phase), cfg.shard_count(phase))
    if phase == "verify":  # a verify shard needs its own solve shard only (one may have failed)
        todo = [j for j in todo if Shard(h.paths.phase_dir(r, "solve"), cfg.solve_shard_of(j)).is_done()]
    if not todo:
        return DONE
    with ThreadPoolExecutor(max_workers=min(cfg.run.local_workers, len(todo))) as pool:
        results = list(pool.map(lambda i: _supervise(h, cfg, r, phase, i), todo))
    return _outcome(results)


def _outcome(results: list[str]) -> str:
    if FAILED in results or UPSTREAM in results:
        return FAILED
    return DONE if all(x == DONE for x in results) else "interrupted"


def run_solve_and_verify(h: RunHandle, r: int) -> tuple[str, str]:
    """Solve and verify together (`verification.streaming`): verify shard j's supervisor starts as
    soon as its solve shard has started or ended, as Slurm's `after:` dependency does; each phase
    has up to `run.local_workers` supervisors. Returns each phase's outcome (as `run_phase`)."""
    cfg = h.refreshed().at(r)
    solve_dir = h.paths.phase_dir(r, "solve")
    solve_todo = unfinished(solve_dir, cfg.shard_count("solve"))
    waiting = unfinished(h.paths.phase_dir(r, "verify"), cfg.shard_count("verify"))

    with ThreadPoolExecutor(max_workers=max(1, min(cfg.run.local_workers, len(solve_todo)))) as solvers, \
            ThreadPoolExecutor(max_workers=max(1, min(cfg.run.local_workers, len(waiting)))) as verifiers:
        solving = {i: solvers.submit(_supervise, h, cfg, r, "solve", i) for i in solve_todo}
        verifying = []
        while waiting and not _STOPPING.is_set():
            for j in list(waiting):
                s = Shard(solve_dir, cfg.solve_shard_of(j))
                if s.index not in solving or solving[s.index].done() or s.started() is not None:
                    verifying.append(verifiers.submit(_supervise, h, cfg, r, "verify", j))
                    waiting.remove(j)
            if waiting:
                time.sleep(0.2)
        solved = _outcome([f.result() for f in solving.values()])
        verified = _outcome([f.result() for f in verifying])
    return solved, (verified if not waiting else "interrupted")


def _on_term(_sig: int, _frame: FrameType | None) -> None:
    """A cancel: no new worker starts, and every process of the group (a worker started just before
    the flag was set included) gets SIGTERM; the supervisors then return without counting."""
    if _STOPPING.is_set():
        return
    _STOPPING.set()
    os.killpg(os.getpgrp(), signal.SIGTERM)


def drive(run_dir: Path) -> int:
    paths = RunPaths(run_dir)
    try:
        lock = OwnerLock(lock_file(paths)).acquire(wait_s=5.0)
    except LockHeld as e:
        print(f"sgsbatch local driver: run {paths.name} is already driven by {describe(e.holder)}; exiting",
              file=sys.stderr)
        return 2
    with lock:
        h = open_run_dir(paths)
        atomic_write_text(pid_file(h.paths), str(os.getpid()))  # a reader never sees it empty
        signal.signal(signal.SIGTERM, _on_term)
        r = -1
        while (r := r + 1) < (h := h.refreshed()).cfg.run.rounds:  # `resume --set run.rounds` may extend it
            if round_completed(h, r):
                continue
            prepare_round(h, r)
            failed: list[str] = []
            phases = h.cfg.jobs_of_round(r)  # colocated: init (round 0), then one rollout job of several rounds
            streamed = False
            for phase in phases:
                if phase == "verify" and streamed:
                    continue
                if failed and not (phase == "verify" and failed == ["solve"]):
                    break  # verify still checks the solve shards that finished; nothing later can run
                if phase == "solve" and "verify" in phases and h.refreshed().at(r).verification.streaming:
                    outcomes = list(zip(("solve", "verify"), run_solve_and_verify(h, r), strict=True))
                    streamed = True
                else:
                    outcomes = [(phase, run_phase(h, r, phase))]
                if _STOPPING.is_set():
                    print(f"sgsbatch local driver: stopped (round {r} {phase})", file=sys.stderr)
                    return 143
                for name, result in outcomes:
                    if result == FAILED:
                        failed.append(name)
                    elif result != DONE:
                        print(f"sgsbatch local driver: round {r} {name}: {result}", file=sys.stderr)
                        return 1
            if failed:
                print(f"sgsbatch local driver: round {r} {', '.join(failed)}: a shard ran out of retries",
                      file=sys.stderr)
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
