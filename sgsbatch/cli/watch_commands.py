"""The commands that show where a run's time went and what its tasks printed: `timeline`, `logs`.

Both read a run's files only (views/timeline.py, views/logs.py), on either executor; cli/commands.py registers them.
"""

from __future__ import annotations

import json

import click

from sgsbatch.cli.command_line import clean_errors, runs_dir_option


@click.command()
@click.argument("run")
@runs_dir_option
@click.option("--round", "round_", type=int, default=None, metavar="N", help="Only round N (0-based).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per completed round.")
@clean_errors
def timeline(run: str, runs_dir: str, round_: int | None, as_json: bool) -> None:
    """Show each completed round's critical path of RUN (waiting, start-up, work per phase) and idle GPU/CPU time.

    \b
    Examples:
        sgsbatch timeline sgs-rehearsal
        sgsbatch timeline sgs-rehearsal --round 1 --json

    From the times the run recorded (shard start, start-up end and end; Slurm submissions); docs/checks.md.
    """
    from sgsbatch.run.handle import open_run
    from sgsbatch.views.timeline import run_timelines, timeline_text, timelines_json

    tls = run_timelines(open_run(runs_dir, run, readonly=True), round_)
    if as_json:
        click.echo(json.dumps(timelines_json(tls), sort_keys=True))
    else:
        click.echo("\n\n".join(timeline_text(t) for t in tls) or f"run {run}: no completed round yet")


@click.command()
@click.argument("run")
@runs_dir_option
@click.option("--round", "round_", type=click.IntRange(min=0), default=None,
              help="Round, 0-based as in `status --json` (default: the latest with files).")
@click.option("--phase", default=None, help="Phase (init, conjecture, guide, solve, verify, train) or `driver` "
              "(the local driver's log); default: the round's latest started phase.")
@click.option("--shard", type=click.IntRange(min=0), default=None,
              help="Shard index; default: the shard out of retries, if one is (else needed when the phase has several).")
@click.option("--attempt", type=click.IntRange(min=1), default=None,
              help="Attempt, 1-based: the K-th start of the shard's worker (retries, requeues and resumes "
                   "included); default: the latest.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing the log as it grows; end when the shard ends.")
@click.option("--poll", default=1.0, show_default=True, type=click.FloatRange(min=0.05),
              help="Seconds between reads with --follow.")
@clean_errors
def logs(run: str, runs_dir: str, round_: int | None, phase: str | None, shard: int | None,
         attempt: int | None, follow: bool, poll: float) -> None:
    """Print the log of one shard of one phase, on either executor, without knowing where it is.

    Without --phase/--shard it shows the shard that ran out of retries, if one did (what a stalled
    run's message points at); the header says which attempt of how many and how it ended.

    \b
    Examples:
        sgsbatch logs tiny                      # the failed shard, else the latest phase of the latest round
        sgsbatch logs tiny --round 1 --phase solve --shard 3
        sgsbatch logs tiny --phase solve --shard 3 --attempt 1
        sgsbatch logs tiny --phase verify --shard 0 --follow
    """
    from sgsbatch.run.handle import check_round, existing_run_paths, read_frozen_config
    from sgsbatch.views.logs import choose_log, describe, phase_ended
    from sgsbatch.views.logs import follow as follow_log

    paths = existing_run_paths(runs_dir, run)
    cfg = read_frozen_config(paths)
    check_round(round_, cfg)
    choice = choose_log(paths, cfg, round_, phase, shard, attempt)
    click.echo(f"# {describe(choice)}", err=True)
    shown = [f for f in choice.files if not (follow and f == choice.live)]
    for f in shown:
        click.echo(f"==> {f} <==")
        click.echo(f.read_text(encoding="utf-8", errors="replace"), nl=False)
    if follow and choice.live is not None:
        click.echo(f"==> {choice.live} <==")
        for text in follow_log(choice.live, lambda: phase_ended(paths, cfg, choice), poll):
            click.echo(text, nl=False)
