#!/usr/bin/env bash
# Regenerate the two locks that setup.sh installs against (pip constraints files):
#   requirements/cpu.txt  this machine's environment, frozen: what `./setup.sh --dev` installs on a
#                         CPU machine (Python 3.11, Linux x86_64, the CPU build of torch), as CI tests it
#   requirements/gpu.txt  resolved for Linux x86_64 with PyPI's CUDA wheels of torch and vLLM
#                         (`./setup.sh --gpu`; Python 3.11, manylinux_2_28)
# Run it after changing a dependency in pyproject.toml, then run the tests and commit both files:
#   requirements/relock.sh && tests/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tools="$(mktemp -d)"
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools/venv"
"$tools/venv/bin/pip" install -q uv
rm -rf .venv.relock
SGSBATCH_UNLOCKED=1 VENV="$PWD/.venv.relock" ./setup.sh --dev
{
    echo "# The CPU lock (requirements/relock.sh): pip constraints for ./setup.sh on Linux x86_64, Python 3.11."
    # torch without its local label (+cpu): the same pin then admits the CPU and the CUDA build
    .venv.relock/bin/python -m pip freeze --exclude-editable | sed -E 's/^(torch==[^+]+)\+.*/\1/' | LC_ALL=C sort
} >requirements/cpu.txt
rm -rf .venv.relock
"$tools/venv/bin/uv" pip compile pyproject.toml --extra gpu --extra dev --extra postgres --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --no-header --no-annotate -o requirements/gpu.body
{
    echo "# The GPU lock (requirements/relock.sh): pip constraints for ./setup.sh --gpu on Linux x86_64, Python 3.11."
    cat requirements/gpu.body
} >requirements/gpu.txt
rm requirements/gpu.body
echo "relocked: requirements/cpu.txt ($(grep -c == requirements/cpu.txt) pins), requirements/gpu.txt ($(grep -c == requirements/gpu.txt) pins)"
