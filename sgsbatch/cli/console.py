"""What the commands print about a run on a terminal: status lines and details, redrawing, colour, Ctrl-C.

Covered: `status_line` (one line per run: `status`, `launch --wait`, `resume --wait`, `watch`),
`status_text` (`status RUN`: the line, then its details: times, Slurm jobs with their tasks'
states by count (`job_line`), progress, sparkline, disk, amendments, alarms, and the last completed
round's metrics by group (`metrics_text`, round/metrics.METRIC_GROUPS)), `timing_text` (launch
time, elapsed, round duration, projected finish; round/timing.py computes them), `show` (`status
--watch`: on a terminal the screen is cleared and redrawn; in a file or pipe each refresh is
appended after a blank line), `finished`
(the states `status --watch` stops at) and `run_goes_on` (Ctrl-C while waiting or watching: the
run's jobs go on, and the message says how to follow and how to stop it; exit 130).

Colour: `click.style`; `click.echo` drops the styles where the stream is not a terminal, so files
and pipes never get escape codes. Not covered: JSON output (the commands print `to_json` as is).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from sgsbatch.errors import UserInterrupt, human_bytes
from sgsbatch.round.metrics import CUMULATIVE_SOLVE_RATE, metric_groups
from sgsbatch.run.paths import RunPaths, command
from sgsbatch.run.progress import duration
from sgsbatch.run.quarantine import describe as describe_quarantine
from sgsbatch.views.wording import rounds_text, timing_short, timing_text

STATE_COLOURS = {"completed": "green", "running": "cyan", "pending": "blue", "stalled": "yellow",
                 "failed": "red", "cancelled": "magenta", "unreadable": "red"}
CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen


def is_terminal(err: bool = False) -> bool:
    """Whether stdout (stderr with `err`) is a terminal: redrawing, colour and `\\r` progress only then."""
    return (sys.stderr if err else sys.stdout).isatty()


def status_line(st: dict[str, Any]) -> str:
    """One run in one line: its round as stored (0-based) and the rounds completed (`rounds_text`), its state
    coloured on a terminal."""
    flags = "".join(f" [{x.upper() if x == 'rehearsal' else x}]" for x in ("rehearsal", "simulated", "smoke")
                    if st.get(x))
    rate = st["metrics"].get(CUMULATIVE_SOLVE_RATE)
    rate_s = f" solve rate {rate:.1%}" if rate is not None else ""
    where = rounds_text(st["round"], st["rounds_completed"], st["rounds"], st["state"] == "completed",
                        st.get("phase") or "")
    state = click.style(st["state"], fg=STATE_COLOURS.get(st["state"]), bold=st["state"] in ("failed", "stalled") or None)
    return (f"{st['name']}: {state} {where}{rate_s}{flags}"
            f"{timing_short(st.get('timing'), st['state'])}" + (f" - {st['message']}" if st.get("message") else ""))


def _watch_details(st: dict[str, Any]) -> list[str]:
    """A run's live progress, solve-rate sparkline, disk use, amendments and alarms (views/progress.py)."""
    out = []
    p = st.get("progress")
    if p and p["shards_started"] and p["phase"] == "train":
        t = p.get("train")
        steps = "no optimizer step yet" if not t else (
            f"{t['role']} optimizer step {t['step']}/{t['steps']}, loss {t['loss']:.4g}, {t['tokens']} tokens "
            f"({t['role_tokens']} this role), {t['step_s']:.2f} s/step (slowest {t['slowest_step_s']:.2f} s)")
        out.append(f"  progress: train {steps}; requeues {p['requeues']}, restarts {p['restarts']}")
    elif p and p["shards_started"]:
        total = "?" if p["items_total"] is None else p["items_total"]
        eta = "" if p["eta_s"] is None else f", ETA {duration(p['eta_s'])}"
        slow = p["slowest_shard"]
        out.append(f"  progress: {p['phase']} {p['items_done']}/{total} items, {p['shards_done']}/{p['shards']} "
                   f"shards done, {p['rate_items_per_s']:.2f} items/s{eta}; requeues {p['requeues']}, restarts "
                   f"{p['restarts']}" + (f"; slowest shard {slow['shard']} ({slow['done']}/{slow['total'] or '?'})"
                                         if slow else ""))
    if st.get("solve_rate_curve"):
        out.append(f"  solve rate by round: {st['sparkline']} {st['solve_rate_curve'][-1]:.1%}")
    d = st.get("disk")
    if d:
        used = ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in d["used_bytes"].items())
        out.append(f"  disk: {d['total_bytes'] / 1e9:.2f} GB ({used}); projected {d['projected_bytes'] / 1e9:.1f} GB "
                   f"at the end of its {d['planned_rounds']} rounds ({d['checkpoints_kept_at_end']} checkpoint rounds kept)")
    free = st.get("free_space")
    if free:
        out.append(f"  free space: {human_bytes(free['free_bytes'])} of {human_bytes(free['total_bytes'])} on the file "
                   f"system holding {free['path']}")
    dmg = st.get("damaged") or {}
    for f in dmg.get("found", []):
        out.append(click.style(f"  CORRUPT {f['file']} ({f['reason']}): `{dmg['repair']}` quarantines it, keeps its "
                               f"readable records and rebuilds the database", fg="red"))
    for q in dmg.get("quarantined", []):
        out.append(f"  quarantined: {describe_quarantine(q)}")
    am = st.get("amendments")
    if am:
        out.append(f"  amended after launch: {am['count']} change(s), {am['method']} of method; last: {am['last_text']}")
    w = st.get("watcher")
    if w:
        out.append(f"  watcher job {w['job_id']}: {(w['state'] or 'not in the queue').lower()}"
                   + ("" if w["state"] else f" (again: sgsbatch watch {st['name']} --submit)"))
    ref = st.get("refusals")
    if ref:
        done = "" if ref["shards_done"] == ref["shards"] else f", {ref['shards_done']} of {ref['shards']} shards"
        out.append(f"  refused by the verifier (round {ref['round']}{done}): {ref['text']}")
    for a in st.get("alerts", []):
        out.append(click.style(f"  ALERT {a['metric']}: {a['message']}", fg="red"))
    return out


def evaluations_text(evals: list[dict[str, Any]], last: int = 4) -> str:
    """The evaluated rounds (scheduling/eval_jobs.evaluations), the newest `last`: done, or waiting with its job;
    the newest done round's values of eval/<set>/pass@<k> (`metrics` of its entry) after it."""
    newest = next((e for e in reversed(evals) if e["done"] and e.get("metrics")), None)
    parts = []
    for e in evals[-last:]:
        job = f"job {e['job_id']}, " if e["job_id"] else ""
        values = ", ".join(f"{k} = {v:g}" for k, v in sorted(e["metrics"].items())) if e is newest else ""
        parts.append(f"round {e['round']} done" + (f" ({values})" if values else "") if e["done"] else
                     f"round {e['round']} waiting ({job}{e['sets_done']} of {e['sets']} sets done)")
    more = f"{len(evals) - last} earlier rounds, " if len(evals) > last else ""
    return more + ", ".join(parts) + ("" if newest in evals[-last:] else " (metrics eval/<set>/pass@<k>)")


def status_text(st: dict[str, Any]) -> str:
    """`status RUN`: the status line, then the run's details."""
    out = [status_line(st)]
    if st.get("rehearsal"):
        out.append("  REHEARSAL: SIMULATED generation, verifier and trainer (launch --rehearse)")
    out += [f"  {k}: {st[k]}" for k in ("executor", "run_dir", "targets")]
    if st.get("forked_from"):
        from sgsbatch.run.lineage import describe

        out.append(f"  {describe(st['forked_from'])}")
    if st.get("evaluations"):
        out.append(f"  held-out evaluation: {evaluations_text(st['evaluations'])}")
    if st.get("timing"):
        out.append(f"  time: {timing_text(st['timing'], st['state'])}")
    if st.get("projection"):
        from sgsbatch.views.plan import comparison_text

        out += [f"  projection: {text}" for text in [comparison_text(st["projection"])] if text]
    if st.get("jobs"):
        from sgsbatch.scheduling.slurm import run_tag

        out.append(f"  Slurm jobs (their names start {run_tag(st['name'])}, this run's tag, in `squeue`):")
        out += [job_line(j) for j in st["jobs"]]
    out += _watch_details(st)
    out += metrics_text(st["metrics"], st["rounds_completed"] - 1)  # the last completed round's
    return "\n".join(out)


def task_count(task_id: str) -> int:
    """The tasks one sacct/squeue id stands for: `123` or `123_4` one, `123_[5-63%8]` (an array's
    pending rest, one line in sacct) 59, `123_[1,3-4]` 3; an id it cannot read counts one."""
    _, _, index = task_id.partition("_")
    if not index.startswith("["):
        return 1
    n = 0
    try:
        for part in index.strip("[]").split("%")[0].split(","):
            lo, _, hi = part.partition("-")
            n += int(hi) - int(lo) + 1 if hi else 1
    except ValueError:
        return 1
    return max(n, 1)


def state_counts(task_states: dict[str, str]) -> str:
    """A job's task states by count, most first: `60 COMPLETED, 4 RUNNING` ("" for none)."""
    counts: dict[str, int] = {}
    for task_id, state in task_states.items():
        counts[state or "UNKNOWN"] = counts.get(state or "UNKNOWN", 0) + task_count(task_id)
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))


def job_line(j: dict[str, Any]) -> str:
    """One Slurm job (array) of `status RUN`: `job 123 r0 solve (64 tasks): 60 COMPLETED, 4 RUNNING` and its
    restarts when any; `r0` is the round as in the job's name, its directory (`slurm/r0000`) and `logs --round`."""
    n = len(j.get("shards") or [])
    states = j.get("task_states")
    what = ("task states unknown (no accounting)" if states is None else
            state_counts(states) or "not in accounting yet")
    restarts = j.get("restarts")
    return (f"    job {j['job_id']} r{j['round']} {j['phase']} ({n} task{'' if n == 1 else 's'}): {what}"
            + (f"; {restarts} restart{'' if restarts == 1 else 's'}" if restarts else ""))


METRICS_WIDTH = 118  # a metrics group's line is wrapped past this many characters


def metrics_text(metrics: dict[str, float], round_: int) -> list[str]:
    """The metrics of round `round_` (0-based) in `status RUN`, grouped (round/metrics.METRIC_GROUPS): one line per group, `name = value`
    items wrapped under the group's name past METRICS_WIDTH; [] without metrics."""
    if not metrics:
        return []
    out = [f"  metrics of round {round_} (every round: `sgsbatch metrics RUN`):"]
    for title, names in metric_groups(metrics):
        head = f"    {title}: "
        line = head
        for i, name in enumerate(names):
            item = f"{name} = {metrics[name]:g}" + ("," if i < len(names) - 1 else "")
            if line != head and len(line) + len(item) > METRICS_WIDTH:
                out.append(line.rstrip())
                line = " " * len(head)
            line += item + " "
        out.append(line.rstrip())
    return out


def show(text: str, redraw: bool) -> None:
    """Print one refresh of `status --watch`: redrawn over the last on a terminal, else appended."""
    if redraw:
        click.echo(CLEAR + text, color=True)
    else:
        click.echo(text)


@contextmanager
def run_goes_on(paths: RunPaths | None, stopped: str) -> Iterator[None]:
    """Ctrl-C inside: a UserInterrupt (exit 130) saying what `stopped`, that the run (`paths`; None:
    every run) goes on, and how to follow and how to stop it."""
    try:
        yield
    except KeyboardInterrupt:
        if paths is None:
            raise UserInterrupt(f"interrupted: {stopped}; the runs go on (their jobs are not stopped); "
                                "stop one with `sgsbatch cancel RUN`") from None
        raise UserInterrupt(f"interrupted: {stopped}; run {paths.name} goes on (its jobs are not stopped). "
                            f"Follow it with `{command('status', paths, '--watch')}`; stop it with "
                            f"`{command('cancel', paths)}`") from None


def look_at(paths: RunPaths) -> list[str]:
    """What a completed run offers to look at, as commands to copy (the end of `launch --wait`)."""
    page = shlex.quote(f"{paths.name}.html")
    return ["look at it:",
            f"  {command('status', paths)}  # solve rates, metrics, cost",
            f"  {command('report', paths, '--out', page)}  # one page: curves, proofs, conjectures",
            f"  {command('proofs', paths)}  # every verified proof",
            f"  tensorboard --logdir {shlex.quote(str(paths.root / 'tb'))}"]

