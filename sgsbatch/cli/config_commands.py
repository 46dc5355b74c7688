"""`sgsbatch config`: the effective config of a run or a jobs file (`show`), and every key (`keys`).

`show` prints TOML: a run's config as its jobs read it now (config.toml, amendments included), a
jobs file's as `launch` would load it (inherit, the site file, --set, the runs directory, all
checked), or the package defaults. `keys` lists every key with its type, default and help text
from the schema (config/keys.py).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import click

from sgsbatch.cli.command_line import clean_errors, set_option, site_option, typed_site


@click.group()
def config() -> None:
    """Show a run's or a jobs file's effective config, or list every config key.

    \b
    Examples:
        sgsbatch config show sgs
        sgsbatch config keys slurm.solve
    """


@config.command()
@click.argument("target", metavar="[RUN|CONFIG]", required=False)
@set_option
@site_option
@click.option("--runs-dir", default=None, type=click.Path(file_okay=False),
              help="Where RUN is (or, for CONFIG, where its run would go) [default: $SGSBATCH_RUNS_DIR, else runs].")
@clean_errors
def show(target: str | None, overrides: tuple[str, ...], site: Path | None, runs_dir: str | None) -> None:
    """Print the effective config, as TOML, of RUN, of the jobs file CONFIG, or the package defaults.

    RUN: the config its jobs read now (its config.toml, with every `resume --set` amendment).
    CONFIG (a file): the config `launch CONFIG` would run, with its inherits, the site file and
    --set laid over it, checked as `launch` checks it. Neither: the package defaults.

    \b
    Examples:
        sgsbatch config show sgs
        sgsbatch config show jobs/sgs.toml --site site.toml --set run.rounds=3
        sgsbatch config show > defaults.toml
    """
    from sgsbatch.config.loading import to_toml

    if target is not None and not Path(target).is_file():
        from sgsbatch.errors import InputError
        from sgsbatch.run.handle import existing_run_paths, read_frozen_config
        from sgsbatch.run.paths import default_runs_dir

        if overrides or typed_site(site):
            raise click.UsageError("--set and --site apply to a jobs file (CONFIG), not to a run; amend a run "
                                   "with `sgsbatch resume RUN --set KEY=VALUE`")
        if target.endswith(".toml"):
            raise InputError(f"{target}: no such jobs file (a CONFIG is a .toml file; a RUN a run's name or "
                             "directory)")
        paths = existing_run_paths(runs_dir or default_runs_dir(), target)
        click.echo(f"# run {paths.name}: {paths.config} (amendments included)")
        click.echo(to_toml(read_frozen_config(paths)), nl=False)
        return
    if target is not None:
        from sgsbatch.ops.control import load_for_command

        cfg = load_for_command(Path(target), overrides, site, runs_dir)
        click.echo(f"# {target}" + (f" with site file {site}" if site else "") + "".join(f" --set {o}" for o in overrides))
        click.echo(to_toml(cfg), nl=False)
        return
    from sgsbatch.config.loading import Origins, apply_overrides, build, load_site, origin_of
    from sgsbatch.config.schema import Config
    from sgsbatch.errors import ConfigError

    origins: Origins = {}
    raw = apply_overrides(load_site(site) if site is not None else {}, overrides, Path.cwd(), origins)
    try:
        cfg = build(Config, raw, "--set")
    except ConfigError as e:  # blamed on the --set that gave the key, as launch blames it
        raise ConfigError(origin_of(origins, e.key, "--set"), e.key, e.message) from None
    click.echo("# the package defaults" + (f", site file {site}" if site else "") + "".join(f" --set {o}" for o in overrides))
    click.echo(to_toml(cfg), nl=False)


@config.command()
@click.argument("prefix", metavar="[KEY]", required=False, default="")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per key: key, type, default, help, table.")
@click.option("--markdown", is_flag=True, help="A Markdown page (what docs/keys.md is).")
@clean_errors
def keys(prefix: str, as_json: bool, markdown: bool) -> None:
    """List every config key (or those under KEY, a table or a key) with its type, default and help.

    \b
    Examples:
        sgsbatch config keys
        sgsbatch config keys solver
        sgsbatch config keys slurm.train.time_min
        sgsbatch config keys --json > keys.jsonl
        sgsbatch config keys --markdown > docs/keys.md
    """
    from dataclasses import asdict

    from sgsbatch.config.keys import config_keys, keys_markdown, table_help, tables

    if markdown:
        click.echo(keys_markdown(prefix), nl=False)
        return

    infos = config_keys(prefix)
    if as_json:
        for k in infos:
            click.echo(json.dumps(asdict(k), sort_keys=True))
        return
    helps = {name: table_help(obj) for name, obj in tables()}
    table = None
    for k in infos:
        if k.table != table:
            table = k.table
            click.echo(click.style(f"[{table}]", bold=True) + f"  {helps[table]}")
        click.echo(f"  {k.key} = {json.dumps(k.default)}  ({k.kind()})")
        click.echo(textwrap.fill(k.help, width=100, initial_indent="      ", subsequent_indent="      "))
