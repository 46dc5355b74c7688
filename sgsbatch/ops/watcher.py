"""`sgsbatch watch RUN --submit`: the run's watcher as a small self-requeuing CPU job on the cluster.

A 200-round run outlives any login session, so `sgsbatch watch` (ops/control.py `watch`) must be
kept alive by something. This is the way sgsbatch offers and tests: one Slurm job of
`slurm.watcher`'s resources (1 CPU, 2 GB, 4 h by default; `[slurm.defaults]` gives it the site's
partition and account like every phase) that runs the watch loop and
- before its time limit (SIGUSR2 `slurm.watcher.signal_delay_s` ahead) finishes the check in
  hand and requeues itself (`scontrol requeue`): the same job id comes back and goes on;
- when preempted or requeued by an administrator, is requeued by Slurm (`--requeue`) and goes on;
- ends when the run ends (completed, failed, cancelled). A stall that needs a person does not end
  it: it keeps watching, so the run goes on by itself once that person has run `resume`.
The watcher holds no state of its own: every check reads the run afresh, so a new instance needs
nothing from the old one. One watcher per run: `watch` holds the run's `watch.lock` (run/lock.py),
and a second watcher, job or terminal, is refused naming the first. The job's id is kept in the
run's `watcher.json`; its log (every instance, appended) is `log_path` (scheduling/watcher.py:
what `status` reads).
Not covered: a cluster where jobs may not run `scontrol requeue` on themselves (the job then ends
at its time limit; a cron line or user systemd unit running `sgsbatch watch` is the fallback, see
docs/operating.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from sgsbatch.errors import RunError, SchedulerError
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.shards import atomic_write_text
from sgsbatch.scheduling.watcher import live_state, log_path, record_path, recorded_job


def submit(h: RunHandle, interval_s: float) -> str:
    """Submit the watcher job for run `h`; returns its Slurm job id. Refused while one is live."""
    import submitit

    from sgsbatch.scheduling.slurm import clean_env, job_name, python_command, resource_parameters

    prior = recorded_job(h.paths)
    if prior is not None and (state := live_state(str(prior["job_id"]))) is not None:
        raise RunError(f"run {h.cfg.run.name} already has a watcher job: {prior['job_id']} ({state}); "
                       f"its log: {log_path(h.paths, str(prior['job_id']))}; to replace it: scancel {prior['job_id']}, "
                       "then submit again")
    res = h.refreshed().cfg.slurm.watcher
    ex = submitit.SlurmExecutor(folder=h.paths.slurm / "watcher" / "%j", max_num_timeout=0,
                                python=python_command())
    params = resource_parameters(res, job_name(h.cfg.run.name, None, "watcher"))
    params["signal_delay_s"] = res.signal_delay_s
    params.pop("gpus_per_node", None)  # the watcher polls; it holds no GPU
    ex.update_parameters(**params)
    try:
        with clean_env():
            job = ex.submit(WatcherJob(), str(h.paths.root), interval_s)
    except Exception as e:  # submitit raises FailedJobError / CalledProcessError with sbatch's message
        raise SchedulerError(f"sbatch refused the watcher job of run {h.cfg.run.name}: {e} "
                             "(its resources are slurm.watcher.*; amend them with `sgsbatch resume "
                             f"{h.cfg.run.name} --set slurm.watcher.partition=...`)") from e
    job_id = str(job.job_id)
    atomic_write_text(record_path(h.paths), json.dumps({"job_id": job_id, "submitted_at": time.time(),
                                                  "interval_s": interval_s}) + "\n")
    return job_id


def _say(text: str) -> None:
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] watcher: {text}", flush=True)


class WatcherJob:
    """What the watcher job runs (submitit pickles it): the watch loop, stopping cleanly on SIGUSR2
    (time limit near: requeue itself) or SIGTERM (preemption, scancel: Slurm decides what follows).

    Checkpointable in submitit's sense: a SIGUSR2 before `__call__` installed its handlers makes
    submitit requeue the job, which starts over (the watcher has no state to save)."""

    def __call__(self, run_dir: str, interval_s: float) -> str:
        from sgsbatch.ops import control
        from sgsbatch.run.handle import open_run_dir
        from sgsbatch.run.paths import RunPaths

        stop, why = threading.Event(), []

        def on_signal(signum: int, frame: FrameType | None) -> None:
            why.append(signal.Signals(signum).name)
            stop.set()

        signal.signal(signal.SIGUSR2, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        job = os.environ.get("SLURM_JOB_ID", "?")
        _say(f"job {job} (restart {os.environ.get('SLURM_RESTART_COUNT', '0')}) watching {run_dir} "
             f"every {interval_s:g} s")
        h = open_run_dir(RunPaths(Path(run_dir)))
        last: list[str] = []

        def report(st: Any, action: str | None) -> None:
            from sgsbatch.views.wording import rounds_text

            line = (f"{st.state} {rounds_text(st.round, st.rounds_completed, st.rounds, st.state == 'completed')}"
                    + (f": {st.message}" if st.message else ""))
            if action or line != (last[-1] if last else None):  # a line per change, not per check
                _say(line + (f" -> {action}" if action else ""))
                last.append(line)

        st = control.watch(h, interval_s, report, stop=stop.is_set, until_person=False)
        if st.state in control.ENDED:
            _say(f"run ended ({st.state}); the watcher ends")
            signal.signal(signal.SIGUSR2, signal.SIG_IGN)
            return st.state
        if "SIGUSR2" in why:  # the time limit is near: come back as the same job
            _say(f"time limit near: requeueing job {job}")
            subprocess.run(["scontrol", "requeue", job], check=False)
            time.sleep(300)  # Slurm ends this instance; never return first (that would complete the job)
        _say(f"stopped by {', '.join(why) or 'request'}")
        return "stopped"

    def checkpoint(self, *args: object, **kwargs: object) -> object:
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, *args, **kwargs)
