"""The commands that check a site and its pieces apart from any run: `preflight`, `canary`, `verify`.

`preflight` asks the site's Slurm and this machine (scheduling/preflight.py), `canary` runs every
real component where its jobs run (canary/), `verify` checks a file of proofs with the verify
phase's verifier (verification/command.py); cli/commands.py registers them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sgsbatch.cli.command_line import OutPath, clean_errors, new_runs_dir_option, set_option, site_option
from sgsbatch.errors import EXIT_OK, EXIT_USAGE


@click.command()
@click.argument("input_path", metavar="INPUT.jsonl", type=click.Path(path_type=Path, allow_dash=True))
@click.option("--out", "out_path", required=True, type=OutPath(dir_okay=False, path_type=Path),
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
    from sgsbatch.config.loading import Origins, apply_overrides, build, load_config, load_site, origin_of
    from sgsbatch.config.schema import Config
    from sgsbatch.config.validation import semantic_errors
    from sgsbatch.errors import ConfigError
    from sgsbatch.verification.command import verify_file

    if config is not None:
        cfg = load_config(config, overrides, site=site)
    else:  # the package defaults, the site file's [verification] paths, then --set
        base = {"verification": load_site(site).get("verification", {})} if site is not None else {}
        origins: Origins = {}
        raw = apply_overrides(base, overrides, Path.cwd(), origins)
        try:
            cfg = build(Config, raw, "--set")
            errs = semantic_errors(cfg)
            if errs:
                raise ConfigError("--set", errs[0][0], errs[0][1])
        except ConfigError as e:  # blamed on the --set that gave the key, as launch blames it
            raise ConfigError(origin_of(origins, e.key, "--set"), e.key, e.message) from None
    try:
        counts = verify_file(input_path, out_path, cfg, progress=not quiet, processes=processes)
    except ValueError as e:
        raise click.UsageError(str(e)) from e
    click.echo(" ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "nothing to check")


@click.command()
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


@click.command()
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
