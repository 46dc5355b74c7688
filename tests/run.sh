#!/usr/bin/env bash
# The project's one command to lint and test: ruff, mypy, then pytest (all tiers; the Slurm tier
# skips without a cluster unless SGSBATCH_REQUIRE_SLURM=1, as in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" -m ruff check sgsbatch tests bench
"$PY" -m mypy sgsbatch
exec "$PY" -m pytest -q -rs --durations=25 "$@"  # the slowest tests in every log: what CI time is spent on
