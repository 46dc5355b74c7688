"""The `sgsbatch` command: a thin click layer over the operator commands (ops/) and the run store.

Library code raises typed errors (errors.py); here they become one clean line on stderr and
an exit code (2: bad input, 1: run or scheduler problem). Nothing heavy is imported at module
level, so `sgsbatch --help` is instant and never loads torch, deepspeed or vllm.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from sgsbatch.errors import SgsError
from sgsbatch.round.metrics import CUMULATIVE_SOLVE_RATE
from sgsbatch.run.paths import command, default_runs_dir

F = TypeVar("F", bound=Callable[..., Any])


def _clean_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SgsError as e:
            click.echo(f"Error: {e}", err=True)
            sys.exit(e.exit_code)
        except Exception as e:
            from sqlalchemy.exc import DBAPIError

            if not isinstance(e, DBAPIError):
                raise
            click.echo(f"Error: the run's database failed ({e.orig}); if its state.db is damaged, rebuild it "
                       f"from the run directory with `sgsbatch rebuild RUN --force`", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


runs_dir_option = click.option("--runs-dir", default=default_runs_dir, show_default="$SGSBATCH_RUNS_DIR or runs",
                               type=click.Path(file_okay=False),
                               help="Directory holding the run directories. RUN may also be a path to a run "
                                    "directory (it has a /: runs/sgs, ./sgs, /scratch/runs/sgs).")
# launch, canary, preflight: where runs go, by the rule of every command (config/loading.runs_dir_layer)
new_runs_dir_option = click.option("--runs-dir", default=None, type=click.Path(file_okay=False),
                                   help="Directory the run directory goes in [default: $SGSBATCH_RUNS_DIR, else "
                                        "the config's run.runs_dir, else runs].")
site_option = click.option("--site", type=click.Path(dir_okay=False, path_type=Path), default=None,
                           envvar="SGSBATCH_SITE", show_envvar=True,
                           help="Site file laid over CONFIG (before --set): this cluster's [slurm] settings "
                                "([slurm.defaults] for every phase), run.runs_dir and the like; see "
                                "jobs/site.example.toml.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sgsbatch")
def main() -> None:
    """Run SGS (Self-Guided Self-Play) for Lean 4 as chained Slurm jobs with a state database.

    \b
    Example:
        sgsbatch launch jobs/tiny.toml --wait
        sgsbatch status
        tensorboard --logdir runs/
    """


def _print_status_line(st: dict[str, Any]) -> None:
    flags = "".join(f" [{x.upper() if x == 'rehearsal' else x}]" for x in ("rehearsal", "simulated", "smoke")
                    if st.get(x))
    rate = st["metrics"].get(CUMULATIVE_SOLVE_RATE)
    rate_s = f" solve rate {rate:.1%}" if rate is not None else ""
    phase = f" {st['phase']}" if st.get("phase") else ""
    shown = st["round"] + 1 if isinstance(st["round"], int) else st["round"]  # 1-based for people
    done = "" if st["state"] == "completed" else f" ({st['rounds_completed']} completed)"
    click.echo(f"{st['name']}: {st['state']} round {shown} of {st['rounds']}{phase}"
               f"{done}{rate_s}{flags}" + (f" - {st['message']}" if st.get("message") else ""))


def _print_watch_details(st: dict[str, Any]) -> None:
    """A run's live progress, solve-rate sparkline, disk use and alarms (ops/progress.py)."""
    from sgsbatch.run.progress import duration

    p = st.get("progress")
    if p and p["shards_started"]:
        total = "?" if p["items_total"] is None else p["items_total"]
        eta = "" if p["eta_s"] is None else f", ETA {duration(p['eta_s'])}"
        slow = p["slowest_shard"]
        click.echo(f"  progress: {p['phase']} {p['items_done']}/{total} items, {p['shards_done']}/{p['shards']} shards "
                   f"done, {p['rate_items_per_s']:.2f} items/s{eta}; requeues {p['requeues']}, restarts {p['restarts']}"
                   + (f"; slowest shard {slow['shard']} ({slow['done']}/{slow['total'] or '?'})" if slow else ""))
    if st.get("solve_rate_curve"):
        click.echo(f"  solve rate by round: {st['sparkline']} {st['solve_rate_curve'][-1]:.1%}")
    d = st.get("disk")
    if d:
        used = ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in d["used_bytes"].items())
        click.echo(f"  disk: {d['total_bytes'] / 1e9:.2f} GB ({used}); projected {d['projected_bytes'] / 1e9:.1f} GB "
                   f"at round {d['planned_rounds']} ({d['checkpoints_kept_at_end']} checkpoint rounds kept)")
    am = st.get("amendments")
    if am:
        click.echo(f"  amended after launch: {am['count']} change(s), {am['method']} of method; last: {am['last_text']}")
    w = st.get("watcher")
    if w:
        click.echo(f"  watcher job {w['job_id']}: {(w['state'] or 'not in the queue').lower()}"
                   + ("" if w["state"] else f" (again: sgsbatch watch {st['name']} --submit)"))
    for a in st.get("alerts", []):
        click.echo(f"  ALERT {a['metric']}: {a['message']}")


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
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (dotted TOML path); repeatable. Values parse as TOML, else as strings.")
@click.option("--dry-run", is_flag=True,
              help="Validate, run the pre-flight (site limits on Slurm; vLLM, Lean and the weights on either "
                   "executor) and print the plan; create and submit nothing.")
@click.option("--wait", "wait_", is_flag=True, help="Wait for the run to end; exit 0 only if it completed.")
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
@_clean_errors
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
        st = control.wait(h, on_change=lambda s: _print_status_line(s.to_json()))
        _print_status_line(st.to_json())
        sys.exit(0 if st.state == "completed" else 1)


@main.command()
@click.argument("run", required=False)
@runs_dir_option
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (a list without RUN); its `round` is 0-based, `rounds_completed` a count.")
@click.option("--watch", is_flag=True, help="Refresh every few seconds until interrupted.")
@click.option("--interval", default=5.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds between refreshes with --watch.")
@_clean_errors
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
    from sgsbatch.run.handle import list_runs, open_run

    while True:
        if run:
            st = run_status(open_run(runs_dir, run, readonly=True)).to_json()
            if as_json:
                click.echo(json.dumps(st, sort_keys=True))
            else:
                _print_status_line(st)
                if st.get("rehearsal"):
                    click.echo("  REHEARSAL: SIMULATED generation, verifier and trainer (launch --rehearse)")
                for k in ("executor", "run_dir", "targets"):
                    click.echo(f"  {k}: {st[k]}")
                for j in st.get("jobs", []):
                    click.echo(f"  job {j['job_id']} r{j['round']} {j['phase']}: "
                               f"{j.get('task_states', {})} restarts={j.get('restarts', '?')}")
                _print_watch_details(st)
                for k, v in sorted(st["metrics"].items()):
                    click.echo(f"  {k} = {v:g}")
        else:
            rows = [_status_or_error(p.resolve()) for p in list_runs(runs_dir)]
            if as_json:
                click.echo(json.dumps(rows, sort_keys=True))
            elif not rows:
                click.echo(f"no runs in {Path(runs_dir).resolve()}")
            for st in [] if as_json else rows:
                _print_status_line(st)
        if not watch:
            return
        time.sleep(interval)
        click.echo("")


@main.command()
@click.argument("run")
@runs_dir_option
@click.option("--force", is_flag=True, help="Resubmit unfinished work even if the run looks alive.")
@click.option("--wait", "wait_", is_flag=True, help="Wait for the run to end; exit 0 only if it completed.")
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
@_clean_errors
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
        st = control.wait(h, on_change=lambda s: _print_status_line(s.to_json()))
        sys.exit(0 if st.state == "completed" else 1)


@main.command()
@click.argument("run")
@runs_dir_option
@_clean_errors
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
@_clean_errors
def watch(run: str, runs_dir: str, interval: float, max_checks: int | None, submit: bool) -> None:
    """Drive RUN's chain from outside the cluster's jobs (for sites where jobs may not submit jobs).

    Resumes the run whenever it is stalled for a reason `resume` repairs (a cancelled or failed
    dependency, no live job, a dead local driver); a shard out of retries is reported and left
    for you to fix. The alarms it sees (stuck shards included) go to TensorBoard under
    RUN's tb/live_alerts/ whenever they change. Returns when the run completes, fails or is
    cancelled.

    With --submit the watcher runs on the cluster as a small CPU job that outlives your login
    session (ops/watcher.py): it requeues itself before its time limit, comes back after a
    preemption and ends with the run. One watcher per run.

    \b
    Example:
        sgsbatch watch tiny --interval 120
        sgsbatch watch sgs --submit --interval 300    # for a 200-round run: survives logouts
    """
    from sgsbatch.ops import control
    from sgsbatch.run.handle import open_run

    if submit:
        from sgsbatch.ops import watcher

        if max_checks is not None:
            raise click.UsageError("--max-checks is for a watcher in this terminal; a submitted watcher runs "
                                   "until the run ends")
        h = open_run(runs_dir, run)
        job_id = watcher.submit(h, interval)
        click.echo(f"watcher job {job_id} submitted for run {run} (every {interval:g} s); its log: "
                   f"{watcher.log_path(h.paths, job_id)}; to stop it: scancel {job_id}")
        return

    def report(st: Any, action: str | None) -> None:
        _print_status_line(st.to_json())
        if action:
            click.echo(action)

    control.watch(open_run(runs_dir, run), interval, report, max_checks=max_checks)


@main.command()
@click.argument("run")
@runs_dir_option
@click.option("--force", is_flag=True, help="Move a state.db (or, with --restore-config, a config.toml) that is "
                                           "still there aside (state.db.bad-<time>) first.")
@click.option("--restore-config", is_flag=True,
              help="Only write config.toml back from the copy the database recorded at launch.")
@_clean_errors
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
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (dotted TOML path); repeatable. Values parse as TOML, else as strings.")
@click.option("--processes", default=1, show_default=True, type=click.IntRange(min=1),
              help="REPL processes (one per core).")
@click.option("--quiet", is_flag=True, help="No progress counter on stderr.")
@site_option
@_clean_errors
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
@click.argument("runs", metavar="RUN...", nargs=-1, required=True)
@runs_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON: one object for one run, a list for several.")
@click.option("--min-generations", type=click.IntRange(min=0), default=None,
              help="Drop points below this many generations so far [default: the run's scaling.min_generations].")
@click.option("--halves", type=click.IntRange(min=0), default=None,
              help="Random-half refits for the spread of A; 0 = none [default: the run's scaling.halves].")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also draw every run's points, fitted curve and asymptote, and the paper's SGS curve, as a PNG.")
@_clean_errors
def fit(runs: tuple[str, ...], runs_dir: str, as_json: bool, min_generations: int | None, halves: int | None,
        plot_path: Path | None) -> None:
    """Fit the scaling law of each RUN's cumulative solve rate R over generations so far C.

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), R0 the first observed value, A, C_mid and B by
    least squares on the completed rounds at or above scaling.min_generations; prints the paper's
    SGS fit beside it. With --plot, a run with too few points is drawn without its curve.

    \b
    Examples:
        sgsbatch fit sgs
        sgsbatch fit sgs --json --min-generations 50000 --halves 0
        sgsbatch fit sgs sgs_no_guide --plot fit.png
    """
    from sgsbatch.ops.fit import NotEnoughPoints, fit_run, format_report
    from sgsbatch.run.handle import open_run

    handles = [open_run(runs_dir, run, readonly=True) for run in runs]
    if plot_path is not None:
        from sgsbatch.ops.plot import write_fit_plot

        write_fit_plot(handles, plot_path, min_generations=min_generations)
        click.echo(f"wrote {plot_path}", err=True)
    reps: list[dict[str, Any]] = []
    for h in handles:
        try:
            reps.append(fit_run(h, min_generations=min_generations, halves=halves))
        except NotEnoughPoints:
            if plot_path is None or len(handles) == 1:
                raise
            click.echo(f"{h.cfg.run.name}: not fitted (too few points); drawn without a curve", err=True)
    if as_json:
        click.echo(json.dumps(reps[0] if len(runs) == 1 else reps, sort_keys=True))
    else:
        click.echo("\n\n".join(format_report(rep) for rep in reps))


@main.command()
@click.argument("runs", metavar="RUN...", nargs=-1, required=True)
@runs_dir_option
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The HTML file to write (one self-contained page: images inline, no network needed).")
@click.option("--examples", type=click.IntRange(min=0), default=None,
              help="Example conjectures shown per recent round [default: the run's report.examples].")
@_clean_errors
def report(runs: tuple[str, ...], runs_dir: str, out_path: Path, examples: int | None) -> None:
    """Write one self-contained HTML page about RUN (and more runs side by side) to share.

    The curves (solve rate against rounds and generations, pass@8, the conjecture funnel, guide
    score distributions), the scaling-law fit with its random-half spread, GPU/CPU-hours per
    round, and example conjectures of recent rounds with their guide scores and outcome. Reads the
    run database only; a simulated run's page says SIMULATED in its title.

    \b
    Examples:
        sgsbatch report sgs --out sgs.html
        sgsbatch report sgs sgs_no_guide --out compare.html --examples 5
    """
    from sgsbatch.ops.report import write_report
    from sgsbatch.run.handle import open_run

    handles = [open_run(runs_dir, run, readonly=True) for run in runs]
    write_report(handles, out_path, examples=examples)
    click.echo(f"wrote {out_path}")


@main.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (dotted TOML path); repeatable.")
@site_option
@new_runs_dir_option
@_clean_errors
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
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (dotted TOML path); repeatable.")
@click.option("--local", is_flag=True, help="Run the checks here, one job shape after another, not as Slurm jobs.")
@click.option("--json", "as_json", is_flag=True, help="Print the kept result as JSON instead of the table.")
@site_option
@new_runs_dir_option
@_clean_errors
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
    sys.exit(0 if result["passed"] else 2)


# --- issue 14: watching a run (logs) ---


@main.command()
@click.argument("run")
@runs_dir_option
@click.option("--round", "round_", type=click.IntRange(min=0), default=None,
              help="Round, 0-based as in `status --json` (default: the latest with files).")
@click.option("--phase", default=None, help="Phase (init, conjecture, guide, solve, verify, train) or `driver` "
              "(the local driver's log); default: the round's latest started phase.")
@click.option("--shard", type=click.IntRange(min=0), default=None,
              help="Shard index (needed when the phase has several).")
@click.option("--attempt", type=click.IntRange(min=1), default=None,
              help="Attempt, 1-based (Slurm: the K-th submission of the shard); default: the latest.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing the log as it grows; end when the shard ends.")
@click.option("--poll", default=1.0, show_default=True, type=click.FloatRange(min=0.05),
              help="Seconds between reads with --follow.")
@_clean_errors
def logs(run: str, runs_dir: str, round_: int | None, phase: str | None, shard: int | None,
         attempt: int | None, follow: bool, poll: float) -> None:
    """Print the log of one shard of one phase, on either executor, without knowing where it is.

    \b
    Examples:
        sgsbatch logs tiny                      # the latest phase of the latest round
        sgsbatch logs tiny --round 1 --phase solve --shard 3
        sgsbatch logs tiny --phase solve --shard 3 --attempt 1
        sgsbatch logs tiny --phase verify --shard 0 --follow
    """
    from sgsbatch.ops.logs import choose_log, phase_ended
    from sgsbatch.ops.logs import follow as follow_log
    from sgsbatch.run.handle import existing_run_paths, read_frozen_config

    paths = existing_run_paths(runs_dir, run)
    cfg = read_frozen_config(paths)
    choice = choose_log(paths, cfg, round_, phase, shard, attempt)
    header = f"round {choice.round} {choice.phase} shard {choice.shard} attempt {choice.attempt}/{choice.attempts}"
    click.echo(f"# {header}", err=True)
    shown = [f for f in choice.files if not (follow and f == choice.live)]
    for f in shown:
        click.echo(f"==> {f} <==")
        click.echo(f.read_text(encoding="utf-8", errors="replace"), nl=False)
    if follow and choice.live is not None:
        click.echo(f"==> {choice.live} <==")
        for text in follow_log(choice.live, lambda: phase_ended(paths, cfg, choice), poll):
            click.echo(text, nl=False)


@main.command()
@click.argument("run")
@runs_dir_option
@click.option("--target", default=None, metavar="ID",
              help="Only this problem: a target or conjecture id (with --conjectures: the conjectures of this target).")
@click.option("--round", "round_", type=int, default=None, help="Only this round (0-based).")
@click.option("--conjectures", is_flag=True,
              help="List conjectures with their lineage instead: target, round, Guide sub-scores, solve rate, "
                   "first proof, Conjecturer training weight.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON lines, one object per proof or conjecture; a proof's row is an input row of "
                   "`sgsbatch verify` (id, header, statement, proof).")
@_clean_errors
def proofs(run: str, runs_dir: str, target: str | None, round_: int | None, conjectures: bool, as_json: bool) -> None:
    """Print RUN's found proofs (the solved store) with their statements, or its conjectures' lineage.

    \b
    Examples:
        sgsbatch proofs sgs --target mathd_algebra_10
        sgsbatch proofs sgs --round 3 --json
        sgsbatch proofs sgs --conjectures --target mathd_algebra_10   # its conjectures: scores, rate, weight
        sgsbatch proofs sgs --json | sgsbatch verify - --out recheck.jsonl   # re-check every stored proof
    """
    from sgsbatch.ops.proofs import conjecture_lineage, found_proofs
    from sgsbatch.run.handle import open_run

    h = open_run(runs_dir, run, readonly=True)
    rows = conjecture_lineage(h, target, round_) if conjectures else found_proofs(h, target, round_)
    if as_json:
        for row in rows:
            click.echo(json.dumps(row, sort_keys=True))
        return
    if not rows:
        what = "conjectures" if conjectures else "proofs"
        click.echo(f"run {run}: no {what}" + (f" for {target}" if target else "")
                   + (f" in round {round_}" if round_ is not None else ""), err=True)
        return
    for row in rows:
        if conjectures:
            g = row["guide"]
            scores = ("guide: not reviewed" if g is None else
                      f"guide review failed to parse ({g['reason']}): stand-in score {g['score']:.3f}"
                      if not g["parsed"] else
                      f"guide {g['score']:.3f} (relevance {g['relevance']:.2f}, redundant {g['redundant']:.2f}, "
                      f"complexity {g['complexity']:.2f})")
            rate = "not attempted" if row["solve_rate"] is None else f"{row['verified']}/{row['attempts']} verified"
            weight = "not trained on" if row["training_weight"] is None else f"weight {row['training_weight']:.4f}"
            click.echo(f"== {row['conjecture_id']} (target {row['target_id']}, round {row['round']}): "
                       f"{scores}; {rate}; {weight}")
            click.echo(row["statement"] or "")
            if row["proof"]:
                click.echo(row["proof"])
        else:
            click.echo(f"== {row['problem_id']} (round {row['round']}, sample {row['sample']}, slot {row['slot']})")
            click.echo(row["statement"] or "(statement not recorded)")
            click.echo(row["proof"])
        click.echo("")


@main.command()
@click.argument("run")
@runs_dir_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Directory for the dataset (one Parquet file per config) and its card, README.md.")
@click.option("--force", is_flag=True, help="Replace a non-empty --out.")
@click.option("--push-to-hub", "repo", default=None, metavar="REPO",
              help="Also upload it to this Hugging Face dataset repo, config by config, then the card "
                   "(needs HF_TOKEN or `hf auth login`).")
@_clean_errors
def export(run: str, runs_dir: str, out_dir: Path, force: bool, repo: str | None) -> None:
    """Write RUN's solved store and every unique conjecture (lineage, proof) as a Hugging Face dataset.

    Two configs, `proofs` and `conjectures` (one `train` split each), in the layout of a Hub
    dataset repository, with a card (README.md) whose YAML front matter declares them.

    \b
    Examples:
        sgsbatch export sgs --out sgs-proofs
        sgsbatch export sgs --out sgs-proofs --push-to-hub me/sgs-proofs
        python -c "import datasets; print(datasets.load_dataset('sgs-proofs', 'conjectures'))"
    """
    from sgsbatch.ops.export import export_run, push_to_hub
    from sgsbatch.run.handle import open_run

    counts = export_run(open_run(runs_dir, run, readonly=True), out_dir, force=force)
    click.echo(f"wrote {out_dir}: " + ", ".join(f"{n} {config}" for config, n in counts.items()))
    if repo is not None:
        push_to_hub(out_dir, repo)
        click.echo(f"pushed to https://huggingface.co/datasets/{repo}")


if __name__ == "__main__":
    main()
