"""The `eval` command: held-out evaluation of a stored round (ops/evaluate.py); cli/commands.py registers it.

Thin: it checks `--round` (run/handle.check_round), opens the run and prints one line per set. Nothing
heavy is imported at module level.
"""

from __future__ import annotations

import json

import click

from sgsbatch.cli.command_line import clean_errors, runs_dir_option
from sgsbatch.run.paths import command


@click.command("eval")
@click.argument("run")
@runs_dir_option
@click.option("--round", "round_", type=int, required=True, metavar="N",
              help="The round whose Solver weights are evaluated (after its training), 0-based as in `status --json`.")
@click.option("--set", "only", default=None, metavar="NAME", help="Only this evaluation set of the run's eval.sets.")
@click.option("--force", is_flag=True, help="Sample and verify again a set already evaluated for this round.")
@click.option("--submit", is_flag=True, help="Run it as a job of its own on the run's executor (Slurm: the solve phase's "
              "resources; local: a detached process) and return; the job's log is named.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per set: its summary and metrics.")
@clean_errors
def evaluate(run: str, runs_dir: str, round_: int, only: str | None, force: bool, submit: bool, as_json: bool) -> None:
    """Evaluate the Solver's weights after round N on RUN's held-out sets (eval.sets), in this process.

    Samples eval.samples proofs per problem with the solve phase's prompt, checks them with the run's
    verifier, writes <run>/eval/r000N/<set>/ and records eval/<set>/pass@<k> for round N (status,
    metrics, the report, TensorBoard's tb/eval). A set already evaluated is not sampled again without --force.

    \b
    Examples:
        sgsbatch eval tiny --round 1
        sgsbatch eval sgs --round 20 --set minif2f_test --json
        sgsbatch eval sgs --round 20 --submit         # a job beside the run's chain
    """
    from sgsbatch.ops.evaluate import evaluate_round, result_text
    from sgsbatch.run.handle import check_round, existing_run_paths, open_run_dir, read_frozen_config

    paths = existing_run_paths(runs_dir, run)
    check_round(round_, read_frozen_config(paths))
    h = open_run_dir(paths)
    if submit:
        if force:
            raise click.UsageError("--force goes without --submit (a submitted job evaluates the sets not yet done)")
        from sgsbatch.ops.evaluate import check_submittable
        from sgsbatch.scheduling.eval_jobs import submit_eval

        check_submittable(h, round_, only)
        job = submit_eval(h, round_, only)
        click.echo(f"submitted the evaluation of run {h.cfg.run.name} round {round_} ({job}); its results: "
                   f"{paths.eval_round_dir(round_)}; `{command('metrics', paths, '--metric', repr('eval/*'))}` once done")
        return
    results = evaluate_round(h, round_, only, force)
    if as_json:
        for res in results:
            click.echo(json.dumps({"run": h.cfg.run.name, "round": round_, **res.summary, "metrics": res.metrics,
                                   "stored": res.reused, "dir": str(paths.eval_dir(round_, res.name))}, sort_keys=True))
    else:
        click.echo(result_text(h, round_, results))
