"""The click plumbing every command module shares: clean errors and exit codes, the common options, --version.

`clean_errors` is the one place a command's failure becomes one line on stderr and an exit code
from the table in errors.py (0 ok, 1 failed, 2 usage or bad input, 130 interrupted): typed errors
by their `exit_code`, a database failure as 1, a write that found the disk full or the quota spent
(ENOSPC, EDQUOT; SQLite's "database or disk is full") as 1 with the path and its free space, Ctrl-C as 130 (click alone would say "Aborted!"
and exit 1). Commands that wait on or watch a run turn Ctrl-C into `UserInterrupt` first
(cli/console.py `run_goes_on`), whose message says the run goes on and how to stop it.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from sgsbatch.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    SgsError,
    UserInterrupt,
    disk_full_message,
    is_disk_full,
)
from sgsbatch.run.paths import default_runs_dir

F = TypeVar("F", bound=Callable[..., Any])
OUTPUTS = ("out_path", "out_dir", "plot_path")  # the parameters of --out and --plot (OutPath)


def _thread_errors(args: Any) -> None:
    """threading.excepthook under `clean_errors`: a helper thread that found the disk full (TensorBoard's
    writer) prints no traceback; the command meets the same error when it waits on the thread (its
    flush or close re-raises it) and says it in one line."""
    if is_disk_full(args.exc_value):
        return
    threading.__excepthook__(args)


def clean_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        threading.excepthook = _thread_errors
        try:
            return fn(*args, **kwargs)
        except UserInterrupt as e:
            click.echo("", err=True)
            click.echo(click.style(str(e), fg="yellow"), err=True)
            sys.exit(e.exit_code)
        except SgsError as e:
            click.echo(click.style("Error:", fg="red", bold=True) + f" {e}", err=True)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("\ninterrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Exception as e:
            from sqlalchemy.exc import DBAPIError

            if is_disk_full(e):
                assert isinstance(e, OSError)
                out = next((kwargs[k] for k in OUTPUTS if kwargs.get(k) is not None), None)
                if out is not None and not (e.filename or e.filename2):  # a command with an output writes only it
                    e.filename = str(Path(out).absolute())
                click.echo(click.style("Error:", fg="red", bold=True) + f" {disk_full_message(e, _where(kwargs))}",
                           err=True)
                sys.exit(EXIT_FAILED)
            if isinstance(e, DBAPIError) and "disk is full" in str(e.orig):  # SQLite's SQLITE_FULL
                full = OSError(errno.ENOSPC, f"SQLite: {e.orig}")
                click.echo(click.style("Error:", fg="red", bold=True) + f" {disk_full_message(full, _where(kwargs))}",
                           err=True)
                sys.exit(EXIT_FAILED)
            if not isinstance(e, DBAPIError):
                raise
            click.echo(f"Error: the run's database failed ({e.orig}); if its state.db is damaged, rebuild it "
                       f"from the run directory with `sgsbatch rebuild RUN --force`", err=True)
            sys.exit(EXIT_FAILED)

    return wrapper  # type: ignore[return-value]


def _where(kwargs: dict[str, Any]) -> str | None:
    """The run directory (or runs directory) a command was given: where a write without a file name failed."""
    runs_dir, run = kwargs.get("runs_dir"), kwargs.get("run")
    if isinstance(run, str) and run:
        return run if "/" in run else str(Path(runs_dir or default_runs_dir()) / run)
    return str(runs_dir) if runs_dir else None


class OutPath(click.Path):
    """A path a command writes (`report --out`, `metrics --out`, `fit --plot`, `export --out`, `verify --out`):
    refused before any work (click's usage error, exit 2, naming the option and the path) when the nearest
    part of it that exists above it is a regular file (`--out notes.txt/r.html`) or a directory this user
    cannot write, or when it lies inside a run directory (`--out runs/sgs/state.db` would replace the run's
    database). Not covered: a full disk or a file system that fails mid-write."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        target = Path(os.fsdecode(path)).expanduser().absolute()
        for above in target.parents:
            if not above.exists():
                continue
            if not above.is_dir():
                self.fail(f"{target}: {above} is a file, not a directory; choose a path under a directory", param, ctx)
            if not os.access(above, os.W_OK | os.X_OK):
                self.fail(f"{target}: directory {above} is not writable by this user", param, ctx)
            break
        # a run directory holds what its jobs write: an output there could replace one (--out runs/sgs/state.db)
        run_dir = next((d for d in (target, *target.parents) if (d / "config.toml").is_file()
                        or (d / "state.db").is_file()), None)
        if run_dir is not None:
            where = "is the run directory" if run_dir == target else f"is inside the run directory {run_dir}"
            self.fail(f"{target} {where}, whose files it could replace; choose a path outside it", param, ctx)
        return path


def mutually_exclusive(**given: bool) -> None:
    """The one check of options that contradict each other (`metrics --csv --json`): a click.UsageError
    (exit 2) naming every one given, when more than one is. `given`: option name (without --, `_` for `-`)
    -> whether it was given."""
    names = [f"--{k.replace('_', '-')}" for k, v in given.items() if v]
    if len(names) > 1:
        raise click.UsageError(f"{' and '.join(names)} are mutually exclusive: give one of them")


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
def typed_site(site: Path | None) -> bool:
    """Whether --site was given on the command line, not taken from $SGSBATCH_SITE (which README's set-up exports
    for every command): a command given a launched run refuses only a typed one (the run holds its site's settings)."""
    ctx = click.get_current_context(silent=True)
    return site is not None and (ctx is None or ctx.get_parameter_source("site") != ParameterSource.ENVIRONMENT)


set_option = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                          help="Override a config key (dotted TOML path); repeatable. Values parse as TOML, else "
                               "as strings.")


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from sgsbatch.run.environment import code_version

    click.echo(code_version())
    ctx.exit()


version_option = click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
                              help="Print the version and the git commit of the code that runs, and exit.")
