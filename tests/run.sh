#!/usr/bin/env bash
# The project's one command to lint and test: ruff, mypy, then pytest (all tiers; the Slurm tier
# skips without a cluster unless SGSBATCH_REQUIRE_SLURM=1, as in CI).
#
# With no arguments the Slurm tier (tests/slurm) runs beside the other tiers, in a second pytest:
# its tests spend much of their time waiting on the scheduler (measured: the machine ~50% idle
# during the tier), so CI's wall time is the longer of the two, not their sum. The PostgreSQL
# tier rides in the Slurm tier's pytest (it fills the scheduler's idle time; measured: the other
# tiers took 38 min, the Slurm tier 30, the PostgreSQL tier ~4). Its output is printed with a
# "[slurm]" prefix as it comes. With arguments (a file, -k, --junitxml, ...) one
# pytest runs what they say, as before. SGSBATCH_SERIAL_TESTS=1 runs the whole suite in one pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" -m ruff check sgsbatch tests bench
"$PY" -m mypy sgsbatch
if (($# > 0)) || [[ -n ${SGSBATCH_SERIAL_TESTS:-} ]]; then
    exec "$PY" -m pytest -q -rfEs --durations=25 "$@"  # the slowest tests in every log: what CI time is spent on
fi
"$PY" -m pytest -q -rfEs --durations=15 -p no:cacheprovider tests/slurm tests/postgres 2>&1 | sed -u 's/^/[slurm] /' &
slurm_pid=$!
rc=0
"$PY" -m pytest -q -rfEs --durations=25 --ignore=tests/slurm --ignore=tests/postgres || rc=$?
slurm_rc=0
wait "$slurm_pid" || slurm_rc=$?
echo "tests/run.sh: Slurm tier exit $slurm_rc, other tiers exit $rc"
((rc == 0 && slurm_rc == 0)) || exit $((rc != 0 ? rc : slurm_rc))
