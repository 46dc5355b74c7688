"""The commands that read a run's results: `fit`, `report`, `metrics`, `proofs`, `export`.

Each opens its runs read-only (nothing is written to a run's database) and leaves the work to
its ops/ module (fit.py, report.py, comparison.py, proofs.py, export.py); cli/commands.py registers them.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import click

from sgsbatch.cli.command_line import OutPath, clean_errors, mutually_exclusive, runs_dir_option


@click.command()
@click.argument("runs", metavar="RUN...", nargs=-1, required=True)
@runs_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON: one object for one run, a list for several.")
@click.option("--min-generations", type=click.IntRange(min=0), default=None,
              help="Drop points below this many generations so far [default: the run's scaling.min_generations].")
@click.option("--halves", type=click.IntRange(min=0), default=None,
              help="Random-half refits for the spread of A; 0 = none [default: the run's scaling.halves].")
@click.option("--plot", "plot_path", type=OutPath(dir_okay=False, path_type=Path), default=None,
              help="Also draw every run's points, fitted curve and asymptote, and the paper's SGS curve, as a PNG.")
@clean_errors
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
    from sgsbatch.run.handle import open_run
    from sgsbatch.views.fit import NotEnoughPoints, fit_run, format_report

    handles = [open_run(runs_dir, run, readonly=True) for run in runs]
    if plot_path is not None:
        from sgsbatch.views.plot import write_fit_plot

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


@click.command()
@click.argument("runs", metavar="RUN...", nargs=-1, required=True)
@runs_dir_option
@click.option("--out", "out_path", type=OutPath(dir_okay=False, path_type=Path), required=True,
              help="The HTML file to write (one self-contained page: images inline, no network needed).")
@click.option("--examples", type=click.IntRange(min=0), default=None,
              help="Example conjectures shown per recent round [default: the run's report.examples].")
@clean_errors
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
    from sgsbatch.run.handle import open_run
    from sgsbatch.views.report import write_report

    handles = [open_run(runs_dir, run, readonly=True) for run in runs]
    write_report(handles, out_path, examples=examples)
    click.echo(f"wrote {out_path}")


@click.command()
@click.argument("runs", metavar="RUN...", nargs=-1, required=True)
@runs_dir_option
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header (the default).")
@click.option("--json", "as_json", is_flag=True, help="JSON lines, one object per row (not with --csv).")
@click.option("--metric", "patterns", multiple=True, metavar="PATTERN",
              help="Only metrics whose name matches (shell pattern: 'cost/*', 'pass@?'); repeatable.")
@click.option("--round", "rounds", type=click.IntRange(min=0), multiple=True, help="Only this round (0-based); repeatable.")
@click.option("--out", "out_path", type=OutPath(dir_okay=False, path_type=Path), default=None,
              help="Write the rows to this file instead of standard output.")
@clean_errors
def metrics(runs: tuple[str, ...], runs_dir: str, as_csv: bool, as_json: bool, patterns: tuple[str, ...],
            rounds: tuple[int, ...], out_path: Path | None) -> None:
    """Print every metric of each RUN from its database: one row per run, round and metric.

    Columns: run, round (0-based), metric, value, and the round's start and end (epoch seconds;
    empty while not recorded). The metric names are TensorBoard's (docs/algorithm.md: Metrics).

    \b
    Examples:
        sgsbatch metrics sgs sgs_no_guide --metric cumulative_solve_rate > curves.csv
        sgsbatch metrics sgs --json --metric 'cost/*' --round 0 --round 1
        sgsbatch metrics sgs --out sgs-metrics.csv
    """
    from sgsbatch.errors import InputError
    from sgsbatch.views.comparison import metric_rows, write_rows

    mutually_exclusive(csv=as_csv, json=as_json)
    from sgsbatch.run.handle import check_round, open_run

    handles = [open_run(runs_dir, run, readonly=True) for run in runs]
    for r in rounds:
        check_round(r, *(h.cfg for h in handles))
    rows = metric_rows(handles, patterns, rounds)
    fmt = "json" if as_json else "csv"
    if not rows and patterns:
        raise InputError(f"no metric of {', '.join(runs)} matches --metric {' '.join(patterns)}; "
                         f"`sgsbatch metrics {runs[0]}` lists every one")
    if out_path is None:
        write_rows(rows, sys.stdout, fmt)
        return
    from sgsbatch.run.shards import atomic_write_text

    text = io.StringIO(newline="")
    write_rows(rows, text, fmt)
    atomic_write_text(out_path, text.getvalue())  # whole or not at all: an earlier file stays on a full disk
    click.echo(f"wrote {len(rows)} rows to {out_path}", err=True)


@click.command()
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
                   "`sgsbatch verify` (id, header, statement, proof); `simulated` names the run's SIMULATED "
                   "parts (\"\" when none).")
@clean_errors
def proofs(run: str, runs_dir: str, target: str | None, round_: int | None, conjectures: bool, as_json: bool) -> None:
    """Print RUN's found proofs (the solved store) with their statements, or its conjectures' lineage.

    \b
    Examples:
        sgsbatch proofs sgs --target mathd_algebra_10
        sgsbatch proofs sgs --round 3 --json
        sgsbatch proofs sgs --conjectures --target mathd_algebra_10   # its conjectures: scores, rate, weight
        sgsbatch proofs sgs --json | sgsbatch verify - --out recheck.jsonl   # re-check every stored proof
    """
    from sgsbatch.run.handle import open_run
    from sgsbatch.views.proofs import conjecture_lineage, found_proofs

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
        mark = f" [SIMULATED {row['simulated']}]" if row["simulated"] else ""  # per row: a fork's rounds differ
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
                       f"{scores}; {rate}; {weight}{mark}")
            click.echo(row["statement"] or "")
            if row["proof"]:
                click.echo(row["proof"])
        else:
            click.echo(f"== {row['problem_id']} (round {row['round']}, sample {row['sample']}, slot {row['slot']}){mark}")
            click.echo(row["statement"] or "(statement not recorded)")
            click.echo(row["proof"])
        click.echo("")


@click.command()
@click.argument("run")
@runs_dir_option
@click.option("--out", "out_dir", type=OutPath(file_okay=False, path_type=Path), required=True,
              help="Directory for the dataset (one Parquet file per config) and its card, README.md.")
@click.option("--force", is_flag=True, help="Replace a non-empty --out.")
@click.option("--push-to-hub", "repo", default=None, metavar="REPO",
              help="Also upload it to this Hugging Face dataset repo, config by config, then the card "
                   "(needs HF_TOKEN or `huggingface-cli login`).")
@clean_errors
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
    from sgsbatch.ops.export import check_repo, export_run, push_to_hub
    from sgsbatch.run.handle import open_run

    if repo is not None:
        check_repo(repo)
    counts = export_run(open_run(runs_dir, run, readonly=True), out_dir, force=force)
    click.echo(f"wrote {out_dir}: " + ", ".join(f"{n} {config}" for config, n in counts.items()))
    if repo is not None:
        push_to_hub(out_dir, repo)
        click.echo(f"pushed to https://huggingface.co/datasets/{repo}")
