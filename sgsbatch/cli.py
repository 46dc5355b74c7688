"""The `sgsbatch` command: a thin click layer over the operator commands (ops/) and the run store.

Library code raises typed errors (errors.py); ops/command_line.py turns them into one clean line
on stderr and an exit code from one table (0 ok, 1 the operation failed, 2 usage or bad input,
130 interrupted). Terminal output (status lines, redrawing, colour, Ctrl-C while waiting) is
ops/console.py's; the commands that read results (ops/result_commands.py) and `config`
(ops/config_commands.py) live in their own modules. Nothing heavy is imported at module level,
so `sgsbatch --help` is instant and never loads torch, deepspeed or vllm.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from sgsbatch.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, SgsError
from sgsbatch.ops import console
from sgsbatch.ops.command_line import (
    clean_errors,
    new_runs_dir_option,
    runs_dir_option,
    set_option,
    site_option,
    version_option,
)
from sgsbatch.ops.config_commands import config
from sgsbatch.ops.result_commands import export, fit, metrics, proofs, report
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


for _cmd in (config, export, fit, metrics, proofs, report):
    main.add_command(_cmd)


def _status_or_error(run_dir: Path) -> dict[str, Any]:
    """One run's status for the all-runs listing; a run that cannot be read is listed with the reason."""
    from sqlalchemy.exc import DBAPIError

    from sgsbatch.ops.status import run_status
    from sgsbatch.run.handle import open_run_dir
    from sgsbatch.run.paths import RunPaths

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
@site_option
@new_runs_dir_option
@clean_errors
def launch(config: Path, overrides: tuple[str, ...], dry_run: bool, wait_: bool, smoke: bool, rehearse: bool,
           strict: bool, skip_canary: bool, site: Path | None, runs_dir: str | None) -> None:
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

    The run directory is RUNS_DIR/<run.name>, RUNS_DIR by the rule of every command: --runs-dir,
    else $SGSBATCH_RUNS_DIR, else run.runs_dir of the jobs or site file (or --set), else ./runs.
    """
    from sgsbatch.ops import control

    if strict:
        overrides = (*overrides, "data.strict=true")
    if dry_run:
        p, _ = control.plan(config, overrides, smoke, rehearse=rehearse, site=site, runs_dir=runs_dir)
        click.echo(p.describe())
        from sgsbatch.ops.progress import projection_text

        click.echo(projection_text(p.cfg))
        from sgsbatch.ops.plan import make_plan, plan_text

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
                  else " [SIMULATED verifier: not Lean]" if st_row.simulated else ""))
    click.echo(f"follow it with `{command('status', h.paths)}`")
    if wait_:
        _wait(h)


@main.command("plan")
@click.argument("config", type=click.Path(path_type=Path))
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: phases, round, run, figures, advice.")
@site_option
@new_runs_dir_option
@clean_errors
def plan_command(config: Path, overrides: tuple[str, ...], as_json: bool, site: Path | None,
                 runs_dir: str | None) -> None:
    """Project CONFIG's run before launch: wall time, GPU- and CPU-hours per phase and round, the run's days.

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
    """
    from sgsbatch.ops.control import load_for_command
    from sgsbatch.ops.plan import make_plan, plan_text

    p = make_plan(load_for_command(config, overrides, site, runs_dir), where=str(config))
    click.echo(json.dumps(p.to_json(), sort_keys=True) if as_json else plan_text(p))


def _wait(h: Any) -> None:
    """`--wait`: a status line at every change; exit 0 only when the run completed, 130 on Ctrl-C."""
    from sgsbatch.ops import control

    with console.run_goes_on(h.paths, "stopped waiting"):  # a line per change: the last one is the run's end
        st = control.wait(h, on_change=lambda s: click.echo(console.status_line(s.to_json())))
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
    from sgsbatch.ops.status import run_status
    from sgsbatch.run.handle import existing_run_paths, list_runs, open_run

    redraw = watch and not as_json and console.is_terminal()
    paths = existing_run_paths(runs_dir, run) if run else None
    with console.run_goes_on(paths, "stopped watching"):
        while True:
            rows = ([run_status(open_run(runs_dir, run, readonly=True)).to_json()] if run
                    else [_status_or_error(p.resolve()) for p in list_runs(runs_dir)])
            if as_json:
                text = json.dumps(rows[0] if run else rows, sort_keys=True)
            elif run:
                text = console.status_text(rows[0])
            else:
                text = "\n".join(console.status_line(st) for st in rows) or f"no runs in {Path(runs_dir).resolve()}"
            console.show(text, redraw)
            if not watch or (rows and all(console.finished(st) for st in rows)):
                return
            time.sleep(interval)
            if not redraw:
                click.echo("")


@main.command()
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
    from sgsbatch.ops.timeline import run_timelines, timeline_text, timelines_json
    from sgsbatch.run.handle import open_run

    tls = run_timelines(open_run(runs_dir, run, readonly=True), round_)
    if as_json:
        click.echo(json.dumps(timelines_json(tls), sort_keys=True))
    else:
        click.echo("\n\n".join(timeline_text(t) for t in tls) or f"run {run}: no completed round yet")


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
    the rounds' job journals, so a running chain goes on. Nothing in the run directory changes.

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


@main.command()
@click.argument("input_path", metavar="INPUT.jsonl", type=click.Path(path_type=Path, allow_dash=True))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Verdicts JSONL (appended to; ids already there are skipped).")
@click.option("--config", "config", type=click.Path(path_type=Path), default=None,
              help="Jobs file for the [verification] settings (default: the package defaults).")
@set_option
@click.option("--processes", default=1, show_default=True, type=click.IntRange(min=1),
              help="REPL processes (one per core).")
@click.option("--quiet", is_flag=True, help="No progress counter on stderr.")
@site_option
@clean_errors
def verify(input_path: Path, out_path: Path, config: Path | None, overrides: tuple[str, ...], processes: int,
           quiet: bool, site: Path | None) -> None:
    """Check INPUT.jsonl ({id, header, theorem, proof} or {id, code} rows; `-`: stdin) and write one verdict per row.

    Verdict rows: {id, verdict, reason, messages, time_s}; verdict is verified, failed, timeout
    or error. The same verifier as the verify phase: static checks, then a pool of Lean REPLs.
    A malformed row gets an error verdict; an input of which no row can be read is refused.
    `statement` reads as `theorem`, so `sgsbatch proofs RUN --json` rows are input rows.

    \b
    Example:
        sgsbatch verify proofs.jsonl --out verdicts.jsonl --processes 8
        sgsbatch verify proofs.jsonl --out v.jsonl --config jobs/sgs.toml --set verification.timeout_s=60
        sgsbatch proofs sgs --json | sgsbatch verify - --out recheck.jsonl   # re-check a run's proofs
    """
    from sgsbatch.config.loading import apply_overrides, build, load_config, load_site
    from sgsbatch.config.schema import Config, semantic_errors
    from sgsbatch.errors import ConfigError
    from sgsbatch.verification.command import verify_file

    if config is not None:
        cfg = load_config(config, overrides, site=site)
    else:  # the package defaults, the site file's [verification] paths, then --set
        base = {"verification": load_site(site).get("verification", {})} if site is not None else {}
        raw = apply_overrides(base, overrides, Path.cwd())
        cfg = build(Config, raw, "--set")
        errs = semantic_errors(cfg)
        if errs:
            raise ConfigError("--set", errs[0][0], errs[0][1])
    try:
        counts = verify_file(input_path, out_path, cfg, progress=not quiet, processes=processes)
    except ValueError as e:
        raise click.UsageError(str(e)) from e
    click.echo(" ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "nothing to check")


@main.command()
@click.argument("config", type=click.Path(path_type=Path))
@set_option
@site_option
@new_runs_dir_option
@clean_errors
def preflight(config: Path, overrides: tuple[str, ...], site: Path | None, runs_dir: str | None) -> None:
    """Check that this site's Slurm accepts every job CONFIG would submit, and this machine has what they load.

    `sbatch --test-only` of each phase's job with the exact options sgsbatch uses, and the site's
    limits: MaxArraySize, MaxJobCount, partitions (state, MaxTime, GPU gres), QOS and association
    limits (sacctmgr). Then this machine: vLLM importable by the jobs' Python, the Lean project
    built with its REPL and kernel checker (and bwrap), each model's weights in the Hugging Face
    cache or at its path. `launch` and `launch --dry-run` run it too, before anything is created
    or submitted (the local executor: the second part only).

    \b
    Examples:
        sgsbatch preflight jobs/sgs.toml
        sgsbatch preflight jobs/sgs.toml --set slurm.solve.partition=gpu
        sgsbatch preflight jobs/sgs.toml --site site.toml
    """
    from sgsbatch.ops.control import load_for_command
    from sgsbatch.scheduling.preflight import PreflightError, check

    rep = check(load_for_command(config, overrides, site, runs_dir))
    if not rep.ok:
        raise PreflightError(rep)
    click.echo(rep.text())


@main.command()
@click.argument("config", type=click.Path(path_type=Path))
@set_option
@click.option("--local", is_flag=True, help="Run the checks here, one job shape after another, not as Slurm jobs.")
@click.option("--json", "as_json", is_flag=True, help="Print the kept result as JSON instead of the table.")
@site_option
@new_runs_dir_option
@clean_errors
def canary(config: Path, overrides: tuple[str, ...], local: bool, as_json: bool, site: Path | None,
           runs_dir: str | None) -> None:
    """Prove every real component of CONFIG where its jobs run, in minutes; exit 2 on any failure.

    One short Slurm job per job shape (partition, account, QOS, GPUs, CPUs, nodes) runs the
    configured models on the configured engine with real prompts, the Guide's replies through the
    parser, the Lean verifier on honest proofs, cheats and a loop, two training steps with a
    stop checkpoint, and the environment against the lock. One table ends it; each failure names
    the key or site setting to change. `launch` on Slurm asks for a passed canary of the same
    config and environment (research configs; --skip-canary to override).

    \b
    Examples:
        sgsbatch canary jobs/sgs.toml
        sgsbatch canary jobs/sgs.toml --set slurm.solve.partition=gpu-debug
        sgsbatch canary jobs/tiny-vllm.toml --local
        sgsbatch canary jobs/sgs.toml --site site.toml   # or: export SGSBATCH_SITE=site.toml

    The result is kept in RUNS_DIR/.canary, RUNS_DIR found as `launch` finds it, where `launch`
    looks for it.
    """
    import json

    from sgsbatch.canary.rows import Row, table
    from sgsbatch.canary.submit import run_canary
    from sgsbatch.errors import SchedulerError
    from sgsbatch.ops.control import load_for_command
    from sgsbatch.scheduling import slurm

    cfg = load_for_command(config, overrides, site, runs_dir)
    if not local and not slurm.available():
        raise SchedulerError("no Slurm controller answers `sinfo`: run the canary where jobs are submitted, or "
                             "pass --local to run its checks on this machine")
    from sgsbatch.scheduling.preflight import require

    require(cfg, site=not local)  # the site's limits and the cheap local checks first: a bad config submits nothing
    result = run_canary(cfg, local=local, echo=lambda s: click.echo(s, err=as_json))
    if as_json:
        click.echo(json.dumps(result, indent=1))
    else:
        click.echo(table([Row.from_dict(r) for r in result["rows"]]))
        click.echo(f"kept as fingerprint {result['fingerprint']} in {Path(cfg.run.runs_dir) / '.canary'}")
    sys.exit(EXIT_OK if result["passed"] else EXIT_USAGE)


# --- issue 14: watching a run (logs) ---


@main.command()
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
    from sgsbatch.ops.logs import choose_log, describe, phase_ended
    from sgsbatch.ops.logs import follow as follow_log
    from sgsbatch.run.handle import existing_run_paths, read_frozen_config

    paths = existing_run_paths(runs_dir, run)
    cfg = read_frozen_config(paths)
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



if __name__ == "__main__":
    main()
