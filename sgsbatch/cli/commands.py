"""The `sgsbatch` command: a thin click layer over the operator commands (ops/) and the run store.

Library code raises typed errors (errors.py); cli/command_line.py turns them into one clean line
on stderr and an exit code from one table (0 ok, 1 the operation failed, 2 usage or bad input,
130 interrupted). Terminal output (status lines, redrawing, colour, Ctrl-C while waiting) is
cli/console.py's; the commands that read results (cli/result_commands.py), check a site
(cli/site_commands.py), show a run's timeline and logs (cli/watch_commands.py) and `config`
(cli/config_commands.py) live in their own modules. Nothing heavy is imported at module level,
so `sgsbatch --help` is instant and never loads torch, deepspeed or vllm.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from sgsbatch.cli import console
from sgsbatch.cli.command_line import (
    clean_errors,
    new_runs_dir_option,
    runs_dir_option,
    set_option,
    site_option,
    typed_site,
    version_option,
)
from sgsbatch.cli.config_commands import config
from sgsbatch.cli.eval_commands import evaluate
from sgsbatch.cli.result_commands import export, fit, metrics, proofs, report
from sgsbatch.cli.site_commands import canary, preflight, verify
from sgsbatch.cli.watch_commands import logs, timeline
from sgsbatch.errors import EXIT_FAILED, EXIT_OK, SgsError, human_bytes
from sgsbatch.run.paths import command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@version_option
def main() -> None:
    """Run SGS (Self-Guided Self-Play) for Lean 4 as chained Slurm jobs with a state database.

    Exit codes, every command: 0 ok, 1 the operation failed, 2 usage or bad input, 130 interrupted.

    \b
    Example:
        sgsbatch launch jobs/tiny.toml --wait
        sgsbatch status
        tensorboard --logdir runs/
    """


for _cmd in (config, evaluate, export, fit, metrics, proofs, report, canary, preflight, verify, logs, timeline):
    main.add_command(_cmd)


def _status_or_error(run_dir: Path) -> dict[str, Any]:
    """One run's status for the all-runs listing; a run that cannot be read is listed with the reason."""
    from sqlalchemy.exc import DBAPIError

    from sgsbatch.run.handle import open_run_dir
    from sgsbatch.run.paths import RunPaths
    from sgsbatch.views.status import run_status

    try:
        return run_status(open_run_dir(RunPaths(run_dir), readonly=True)).to_json()
    except (SgsError, DBAPIError) as e:
        return {"name": run_dir.name, "state": "unreadable", "message": str(e), "round": "?", "rounds": "?",
                "rounds_completed": "?", "metrics": {}, "run_dir": str(run_dir)}


@main.command()
@click.argument("config", type=click.Path(path_type=Path))
@set_option
@click.option("--dry-run", is_flag=True,
              help="Validate, run the pre-flight (site limits on Slurm; vLLM, Lean and the weights on either "
                   "executor) and print the plan; create and submit nothing.")
@click.option("--wait", "wait_", is_flag=True,
              help="Wait for the run to end; exit 0 only if it completed (Ctrl-C: exit 130, the run goes on).")
@click.option("--smoke", is_flag=True,
              help="Run this config's algorithm at tiny scale on CPU (tiny-random models). Its verifier stays the "
                   "config's: a Lean config without `lake` here is refused; add --set verification.backend=simulated "
                   "to smoke-test with the SIMULATED verifier instead.")
@click.option("--rehearse", is_flag=True,
              help="Run this config as written with SIMULATED generation, verifier and trainer (name: -rehearsal).")
@click.option("--strict", is_flag=True, help="Refuse data with malformed rows instead of skipping them (data.strict).")
@click.option("--skip-canary", is_flag=True,
              help="Launch a research config on Slurm without a passed `sgsbatch canary` (recorded in the run).")
@click.option("--from", "parent", metavar="RUN",
              help="Fork RUN: the new run inherits its rounds before --round (shard files, proof store, solve-rate "
                   "history, weights; hard links) and runs the rest with CONFIG; data.* and models.* must match RUN's.")
@click.option("--round", "from_round", type=click.IntRange(min=0), default=None, metavar="N",
              help="With --from: the fork's first own round (0-based): it inherits RUN's rounds 0..N-1, N >= 1.")
@site_option
@new_runs_dir_option
@clean_errors
def launch(config: Path, overrides: tuple[str, ...], dry_run: bool, wait_: bool, smoke: bool, rehearse: bool,
           strict: bool, skip_canary: bool, parent: str | None, from_round: int | None, site: Path | None,
           runs_dir: str | None) -> None:
    """Validate CONFIG, record the run and submit its first round.

    Before anything is created, the pre-flight checks what the jobs will need: on Slurm the site's
    limits, and on either executor that vLLM is installed (generation.backend = "vllm"), that the
    Lean project is built with its REPL and checker (verification.backend = "lean") and that each
    model is in the Hugging Face cache or at its path; every problem names the key to change.

    \b
    Examples:
        sgsbatch launch jobs/tiny.toml --wait
        sgsbatch launch jobs/sgs.toml --dry-run
        sgsbatch launch jobs/sgs.toml --set run.name=r2 --set run.rounds=3
        sgsbatch launch jobs/sgs.toml --rehearse --set run.rounds=2
        sgsbatch launch jobs/sgs.toml --smoke --set verification.backend=simulated   # no Lean here
        sgsbatch launch jobs/sgs.toml --site site.toml --runs-dir /scratch/$USER/runs
        sgsbatch launch jobs/sgs.toml --from sgs --round 20 --set run.name=sgs-lr --set solver.lr=2e-6

    The run directory is RUNS_DIR/<run.name>, RUNS_DIR by the rule of every command: --runs-dir,
    else $SGSBATCH_RUNS_DIR, else run.runs_dir of the jobs or site file (or --set), else ./runs.
    """
    from sgsbatch.ops import control

    if strict:
        overrides = (*overrides, "data.strict=true")
    if (parent is None) != (from_round is None):
        raise click.UsageError("--from RUN and --round N go together (fork RUN: inherit its rounds 0..N-1)")
    if parent is not None and from_round is not None:
        if smoke or rehearse:
            raise click.UsageError("--from forks a run as CONFIG says; it does not take --smoke or --rehearse")
        _fork(config, overrides, parent, from_round, dry_run, wait_, skip_canary, site, runs_dir)
        return
    if dry_run:
        p, _ = control.plan(config, overrides, smoke, rehearse=rehearse, site=site, runs_dir=runs_dir)
        click.echo(p.describe())
        from sgsbatch.views.progress import projection_text

        click.echo(projection_text(p.cfg))
        from sgsbatch.views.plan import make_plan, plan_text

        click.echo(plan_text(make_plan(p.cfg, p.targets, str(config))))
        from sgsbatch.canary.record import clearance, needs_canary

        if p.executor == "slurm" and needs_canary(p.cfg):
            ok, why = clearance(p.cfg)
            click.echo(f"canary: {why}" + ("" if ok else " (launch will refuse: run `sgsbatch canary` first)"))
        click.echo("dry run: nothing created, nothing submitted")
        return
    h = control.launch(config, overrides, smoke, rehearse, skip_canary=skip_canary, site=site, runs_dir=runs_dir)
    st_row = h.row()
    click.echo(f"launched {st_row.name} ({st_row.executor}) in {h.paths.root}"
               + (" [REHEARSAL: SIMULATED generation, verifier and trainer]" if h.cfg.run.rehearsal
                  else f" [SIMULATED {', '.join(h.cfg.simulated_parts())}: not a model or Lean]" if st_row.simulated
                  else ""))
    click.echo(f"follow it with `{command('status', h.paths)}`")
    if wait_:
        _wait(h)


def _fork(config: Path, overrides: tuple[str, ...], parent: str, n: int, dry_run: bool, wait_: bool,
          skip_canary: bool, site: Path | None, runs_dir: str | None) -> None:
    """`launch --from RUN --round N` (ops/fork.py)."""
    from sgsbatch.ops import fork
    from sgsbatch.run import lineage

    h, f, mat = fork.launch(config, overrides, parent, n, site, runs_dir, skip_canary, dry_run)
    click.echo(f.describe())
    if h is None or mat is None:
        click.echo("dry run: nothing created, nothing submitted")
        return
    click.echo(f"launched {h.cfg.run.name} ({h.row().executor}) in {h.paths.root}: {lineage.describe(f.record)}; "
               f"{mat.linked} file(s) hard-linked ({human_bytes(mat.bytes_linked)}), {mat.copied} copied")
    for note in mat.notes:
        click.echo(f"note: {note}")
    click.echo(f"follow it with `{command('status', h.paths)}`")
    if wait_:
        _wait(h)


@main.command("plan")
@click.argument("config", metavar="CONFIG|RUN", type=click.Path(path_type=Path))
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: phases, round, run, figures, advice.")
@site_option
@new_runs_dir_option
@clean_errors
def plan_command(config: Path, overrides: tuple[str, ...], as_json: bool, site: Path | None,
                 runs_dir: str | None) -> None:
    """Project CONFIG's run before launch: wall time, GPU- and CPU-hours per phase and round, the run's days.

    CONFIG may also be a launched run (its name in --runs-dir, or its directory): its own config is
    projected, with its completed rounds' actual times against the projection. The same run on the
    SGS reference's layout (one node holding every phase) is printed with the ratio of GPU-hours.

    Work a round comes from the config (targets, samples, conjectures, shards, resources), speed
    from the [projection] figures (published; a passed canary's measurements where it ran the
    same models, engine, verifier, trainer and resources). The round's phases run one after
    another; the advice names the `--set shards.<phase>=N` that shortens the longest one within
    projection.gpu_budget (verify: projection.cpu_budget). Nothing is checked or created:
    `launch --dry-run` prints the same after its pre-flight.

    \b
    Examples:
        sgsbatch plan jobs/sgs.toml
        sgsbatch plan jobs/sgs.toml --set projection.gpu_budget=16
        sgsbatch plan jobs/sgs.toml --set shards.solve=16 --json
        sgsbatch plan sgs --runs-dir runs
    """
    from sgsbatch.config.loading import Origins, data_origin
    from sgsbatch.ops.control import load_for_command
    from sgsbatch.run.paths import default_runs_dir
    from sgsbatch.views.plan import make_plan, plan_text
    from sgsbatch.views.status import launched_plan

    against = ""
    if config.is_file() or config.suffix == ".toml":
        origins: Origins = {}
        cfg = load_for_command(config, overrides, site, runs_dir, origins)
        p = make_plan(cfg, where=data_origin(origins, str(config)))
    elif overrides or typed_site(site):
        from sgsbatch.errors import InputError
        from sgsbatch.run.handle import existing_run_paths

        try:  # a launched run has its own site settings: $SGSBATCH_SITE (README's set-up exports it) is not refused
            existing_run_paths(runs_dir or default_runs_dir(), str(config))
        except InputError as e:
            raise InputError(f"{config} is neither a jobs file nor a launched run: {e}") from None
        raise click.UsageError(f"{config} is a run, not a jobs file: --set and --site apply to a jobs file (a "
                               f"launched run is amended with `sgsbatch resume {config} --set KEY=VALUE`)")
    else:
        p, against = launched_plan(runs_dir or default_runs_dir(), str(config))
    click.echo(json.dumps(p.to_json(), sort_keys=True) if as_json else plan_text(p) + (f"\n{against}" if against else ""))


def _wait(h: Any) -> None:
    """`--wait`: a status line at every change; exit 0 only when the run completed, 130 on Ctrl-C."""
    from sgsbatch.ops import control

    with console.run_goes_on(h.paths, "stopped waiting"):  # a line per change: the last one is the run's end
        st = control.wait(h, on_change=lambda s: click.echo(console.status_line(s.to_json())))
    if st.state == "completed":
        click.echo("\n".join(console.look_at(h.paths)))
    sys.exit(EXIT_OK if st.state == "completed" else EXIT_FAILED)


@main.command()
@click.argument("run", required=False)
@runs_dir_option
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (a list without RUN); its `round` is 0-based, `rounds_completed` a count.")
@click.option("--watch", is_flag=True,
              help="Refresh (redrawn on a terminal) until the run ends or stalls needing a person; Ctrl-C stops "
                   "watching, not the run.")
@click.option("--interval", default=5.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds between refreshes with --watch.")
@clean_errors
def status(run: str | None, runs_dir: str, as_json: bool, watch: bool, interval: float) -> None:
    """Show every run at a glance, or RUN in detail.

    \b
    Examples:
        sgsbatch status
        sgsbatch status tiny --json
        sgsbatch status tiny --watch
        sgsbatch status runs/tiny            # RUN as a path to its run directory
    """
    from sgsbatch.run.handle import existing_run_paths, list_runs, open_run
    from sgsbatch.views.status import refresh, run_status

    redraw = watch and not as_json and console.is_terminal()
    paths = existing_run_paths(runs_dir, run) if run else None
    def read() -> list[dict[str, Any]]:
        return ([run_status(open_run(runs_dir, run, readonly=True)).to_json()] if run
                else [_status_or_error(p.resolve()) for p in list_runs(runs_dir)])

    def show(rows: list[dict[str, Any]]) -> None:
        if as_json:
            text = json.dumps(rows[0] if run else rows, sort_keys=True)
        elif run:
            text = console.status_text(rows[0])
        else:
            text = "\n".join(console.status_line(st) for st in rows) or f"no runs in {Path(runs_dir).resolve()}"
        console.show(text, redraw)

    with console.run_goes_on(paths, "stopped watching"):
        refresh(read, show, watch=watch, interval=interval, between=lambda: None if redraw else click.echo(""))


@main.command()
@click.argument("run")
@runs_dir_option
@click.option("--force", is_flag=True, help="Resubmit unfinished work even if the run looks alive.")
@click.option("--wait", "wait_", is_flag=True,
              help="Wait for the run to end; exit 0 only if it completed (Ctrl-C: exit 130, the run goes on).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Amend the run's config first (repeatable): resources (slurm.<phase>.partition, account, qos, "
                   "time_min, mem, cpus, array_parallelism, extra, signal_delay_s, scratch, setup), alerts.*, run.rounds "
                   "(extend), run.max_task_retries, run.allow_env_drift, run.poll_interval_s, checkpoints "
                   "retention; with --method-change: verification.timeout_s, shards.*, prompts.*.")
@click.option("--method-change", is_flag=True,
              help="Allow --set of keys that change results (verification.timeout_s, shards.*, prompts.*), "
                   "recorded as a change of method from --from-round on.")
@click.option("--from-round", type=int, default=None, metavar="N",
              help="With --method-change: the first round (0-based) to use the new values; a round not yet "
                   "started (the refusal names the first one).")
@clean_errors
def resume(run: str, runs_dir: str, force: bool, wait_: bool, overrides: tuple[str, ...], method_change: bool,
           from_round: int | None) -> None:
    """Repair RUN's broken chain and resubmit only its unfinished work.

    \b
    Examples:
        sgsbatch resume tiny
        sgsbatch resume tiny --set run.rounds=10     # extend the run to 10 rounds
        sgsbatch resume tiny --set slurm.solve.time_min=960 --set slurm.solve.partition=gpu2
        sgsbatch resume tiny --set shards.solve=128 --method-change --from-round 12

    Every amendment is kept in the run's history (`status`, `report`; docs/operating.md: Amending a live run).
    """
    from sgsbatch.ops import control
    from sgsbatch.ops.amend import amend
    from sgsbatch.run.handle import open_run

    if (method_change or from_round is not None) and not overrides:
        raise click.UsageError("--method-change and --from-round go with --set KEY=VALUE")
    h = open_run(runs_dir, run)
    with control.controlling(h):  # the config change and the resume, one command at a time
        if overrides:
            h, changes = amend(h, overrides, method_change=method_change, from_round=from_round)
            click.echo(f"run {run}: " + ("; ".join(changes) if changes else "config unchanged"))
            if h.row().state == "completed":
                return
        click.echo(control.resume_locked(h, force=force))
    if wait_:
        _wait(h)


@main.command()
@click.argument("run")
@runs_dir_option
@clean_errors
def cancel(run: str, runs_dir: str) -> None:
    """Cancel RUN's Slurm jobs (or local driver) and mark it cancelled; nothing recorded is lost.

    \b
    Example:
        sgsbatch cancel tiny      # later: sgsbatch resume tiny
    """
    from sgsbatch.ops import control
    from sgsbatch.run.handle import open_run

    control.cancel(open_run(runs_dir, run))
    click.echo(f"cancelled {run}")


@main.command()
@click.argument("run")
@runs_dir_option
@click.option("--interval", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds between checks.")
@click.option("--max-checks", type=click.IntRange(min=1), default=None,
              help="Stop after this many checks even if the run goes on (default: until it ends).")
@click.option("--submit", is_flag=True,
              help="Run the watcher as a Slurm job (slurm.watcher resources) that requeues itself before its "
                   "time limit and after a preemption, until the run ends; prints its job id and returns.")
@click.option("--notify", "notify_cmd", default=None, metavar="CMD",
              help="Shell command run on every stall and every newly raised alarm, with SGSBATCH_RUN, "
                   "SGSBATCH_RUN_DIR, SGSBATCH_EVENT (stall, needs-person, alarm), SGSBATCH_STATE and "
                   "SGSBATCH_MESSAGE in its environment.")
@clean_errors
def watch(run: str, runs_dir: str, interval: float, max_checks: int | None, submit: bool,
          notify_cmd: str | None) -> None:
    """Drive RUN's chain from outside the cluster's jobs (for sites where jobs may not submit jobs).

    Resumes the run whenever it is stalled for a reason `resume` repairs (a cancelled or failed
    dependency, no live job, a dead local driver). Prints a line when the run's state changes.
    The alarms it sees (stuck shards included) go to TensorBoard under RUN's tb/live_alerts/
    whenever they change.

    Exit status: 0 when the run completed (or --max-checks checks were made); 1 when only a person
    can take it on: a shard ran out of retries (fix the cause, then `sgsbatch resume`), or the run
    failed or was cancelled. So `watch` in cron or a job script ends and says so.

    With --submit the watcher runs on the cluster as a small CPU job that outlives your login
    session (ops/watcher.py): it requeues itself before its time limit, comes back after a
    preemption and ends with the run. One watcher per run.

    \b
    Examples:
        sgsbatch watch tiny --interval 120
        sgsbatch watch sgs --submit --interval 300    # for a 200-round run: survives logouts
        sgsbatch watch sgs --notify 'echo "$SGSBATCH_MESSAGE" | mail -s "sgsbatch $SGSBATCH_RUN: $SGSBATCH_EVENT" me'
    """
    from sgsbatch.ops import control
    from sgsbatch.ops.notify import ALARM, notify
    from sgsbatch.run.handle import open_run

    if submit:
        from sgsbatch.ops import watcher

        if max_checks is not None or notify_cmd is not None:
            raise click.UsageError("--max-checks and --notify are for a watcher in this terminal; a submitted "
                                   "watcher runs until the run ends and logs every change")
        h = open_run(runs_dir, run)
        job_id = watcher.submit(h, interval)
        click.echo(f"watcher job {job_id} submitted for run {run} (every {interval:g} s); its log: "
                   f"{watcher.log_path(h.paths, job_id)}; to stop it: scancel {job_id}")
        return

    last: list[tuple[Any, ...]] = []

    def report(st: Any, action: str | None) -> None:
        key = (st.state, st.round, st.phase, st.message)
        if action or not last or last[-1] != key:
            click.echo(console.status_line(st.to_json()))
        last[:] = [key]
        if action:
            click.echo(action)

    def on_event(st: Any, event: Any) -> None:
        if event.kind == ALARM:
            click.echo(f"  ALERT {event.message}")
        if notify_cmd:
            why = notify(notify_cmd, st, event)
            if why:
                click.echo(f"Warning: {why}", err=True)

    h = open_run(runs_dir, run)
    with console.run_goes_on(h.paths, "stopped watching: nothing resumes its stalls now"):
        st = control.watch(h, interval, report, max_checks=max_checks, on_event=on_event)
    sys.exit(EXIT_FAILED if st.needs_person else EXIT_OK)


@main.command()
@click.argument("run")
@runs_dir_option
@click.option("--force", is_flag=True, help="Move a state.db (or, with --restore-config, a config.toml) that is "
                                           "still there aside (state.db.bad-<time>) first.")
@click.option("--restore-config", is_flag=True,
              help="Only write config.toml back from the copy the database recorded at launch.")
@clean_errors
def rebuild(run: str, runs_dir: str, force: bool, restore_config: bool) -> None:
    """Rebuild RUN's lost or corrupt database from its run directory.

    Every round whose train job finished is ended again from its shard files (attempts,
    verdicts, proofs, conjectures, reviews, metrics, checkpoints); Slurm jobs come back from
    the rounds' job journals, so a running chain goes on. The new database replaces state.db only
    once complete (a failed rebuild leaves it as it was). A corrupt shard file is moved to
    RUN/quarantine/ (kept) and its readable records kept; the report names it. Nothing else in the
    run directory changes.

    \b
    Examples:
        sgsbatch rebuild tiny             # state.db was deleted
        sgsbatch rebuild tiny --force     # state.db is corrupt: keep it aside, rebuild
        sgsbatch rebuild tiny --restore-config   # config.toml lost, damaged or edited
    """
    from sgsbatch.ops.rebuild import rebuild as rebuild_run
    from sgsbatch.ops.rebuild import restore_config as restore
    from sgsbatch.run.handle import existing_run_paths

    if restore_config:
        click.echo(restore(existing_run_paths(runs_dir, run), force=force))
        return
    rep = rebuild_run(existing_run_paths(runs_dir, run), force=force,
                      progress=lambda r: click.echo(f"round {r} ended again", err=True))
    click.echo(rep.describe())


if __name__ == "__main__":
    main()
