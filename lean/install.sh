#!/usr/bin/env bash
# Install Lean v4.15.0, the leanprover-community REPL and (with --lean) Mathlib for sgsbatch.
#
#   lean/install.sh --lean        elan if missing, the toolchain, the REPL, Mathlib (build cache,
#                                 then `lake build` for what is left) in lean/; then a self-check
#   lean/install.sh --lean-core   elan, the toolchain and the REPL only, in lean/core/ (no Mathlib)
#
# Both install bubblewrap (`bwrap`, the sandbox every Lean process runs in: verification.sandbox)
# with apt-get when run as root where apt-get exists; elsewhere they say what to install.
#
# Safe to re-run. Needs network access (elan, GitHub, the Mathlib cache); fails early and says so
# when a download fails. Called by `setup.sh --lean` / `setup.sh --lean-core`.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
ELAN_URL="https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh"
REPL_BIN=".lake/packages/REPL/.lake/build/bin/repl"
CHECK_BIN=".lake/build/bin/sgs_kernel_check"

mode="--lean"
for arg in "$@"; do
    case $arg in
        --lean | --lean-core) mode=$arg ;;
        -h | --help)
            sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "lean/install.sh: unknown option '$arg' (use --lean or --lean-core)" >&2
            exit 2
            ;;
    esac
done

step() { printf '\n==> %s\n' "$*"; }
die() {
    echo "lean/install.sh: $*" >&2
    exit 1
}

TOOLCHAIN="$(tr -d '[:space:]' <"$HERE/lean-toolchain")"
if [[ $mode == --lean-core ]]; then PROJECT="$HERE/core"; else PROJECT="$HERE"; fi

# ------------------------------------------------------------------------------ elan
export PATH="$HOME/.elan/bin:$PATH"
if ! command -v elan >/dev/null; then
    step "installing elan (the Lean toolchain manager) from $ELAN_URL"
    command -v curl >/dev/null || die "curl is needed to download elan; install it (apt-get install curl)"
    tmp="$(mktemp)"
    trap 'rm -f "$tmp"' EXIT
    curl -fsSL --retry 2 --connect-timeout 20 --max-time 120 "$ELAN_URL" -o "$tmp" ||
        die "could not download elan from $ELAN_URL (no network access?). Install elan by hand
(https://github.com/leanprover/elan) or run this on a machine with network access; nothing was installed."
    sh "$tmp" -y --default-toolchain none --no-modify-path || die "the elan installer failed"
fi
command -v elan >/dev/null || die "elan is not on PATH after installing it (expected in $HOME/.elan/bin)"

# ------------------------------------------------------------------------- toolchain
step "installing the toolchain $TOOLCHAIN"
elan toolchain install "$TOOLCHAIN" ||
    die "could not download the Lean toolchain $TOOLCHAIN (no network access?); nothing else was done"
cd "$PROJECT"

# ---------------------------------------------------------------------- dependencies
if [[ $mode == --lean ]]; then
    step "fetching Mathlib's build cache (lake exe cache get) in $PROJECT"
    lake exe cache get || die "could not fetch Mathlib or its build cache (network? disk space?)"
fi

step "building the REPL (leanprover-community/repl v4.15.0)"
# `lake exe` resolves the dependencies, builds the executable and runs it; on empty input it exits.
lake exe repl </dev/null >/dev/null || die "building the REPL failed"
[[ -x $PROJECT/$REPL_BIN ]] || die "the REPL binary is not at $PROJECT/$REPL_BIN after the build"

step "building the kernel re-check (sgs_kernel_check, verification.kernel_recheck)"
lake build sgs_kernel_check || die "building sgs_kernel_check failed (lean/SgsKernelCheck.lean)"
[[ -x $PROJECT/$CHECK_BIN ]] || die "the checker binary is not at $PROJECT/$CHECK_BIN after the build"

if [[ $mode == --lean ]]; then
    step "building what the cache did not cover (lake build)"
    lake build || die "lake build failed"
fi

# --------------------------------------------------------------------------- sandbox
sandbox_set=()
if ! command -v bwrap >/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        step "installing bubblewrap (bwrap: the sandbox Lean runs in, verification.sandbox = \"bwrap\")"
        apt-get install -y -q --no-install-recommends bubblewrap ||
            { apt-get update -q && apt-get install -y -q --no-install-recommends bubblewrap; } ||
            die "could not install bubblewrap with apt-get; install it by hand or set verification.sandbox = \"none\""
    else
        echo "lean/install.sh: bubblewrap (bwrap) is not installed, and verification.sandbox = \"bwrap\" (the default)
needs it: install it (Debian/Ubuntu: apt-get install bubblewrap; RHEL/Fedora: dnf install bubblewrap)
or set verification.sandbox = \"none\". The self-check below runs without the sandbox." >&2
        sandbox_set=(--set verification.sandbox=none)
    fi
fi

# ------------------------------------------------------------------------ self-check
step "self-check: one proof through sgsbatch verify"
check_dir="$(mktemp -d)"
if [[ $mode == --lean ]]; then
    header="import Mathlib"
    theorem="theorem sgs_selfcheck (x : ℝ) : 0 ≤ x ^ 2 := by"
    proof=$'\n  positivity'
else
    header=""
    theorem="theorem sgs_selfcheck (a b : Nat) : a + b = b + a := by"
    proof=$'\n  exact Nat.add_comm a b'
fi
PY="$ROOT/.venv/bin/python"
[[ -x $PY ]] || PY="$(command -v python3)"
"$PY" - "$check_dir/in.jsonl" "$header" "$theorem" "$proof" <<'PYEOF'
import json, sys
path, header, theorem, proof = sys.argv[1:5]
with open(path, "w") as f:
    f.write(json.dumps({"id": "selfcheck", "header": header, "theorem": theorem, "proof": proof}) + "\n")
PYEOF
(cd "$ROOT" && "$PY" -m sgsbatch.cli verify "$check_dir/in.jsonl" --out "$check_dir/out.jsonl" --quiet \
    --set "verification.project_dir=$PROJECT" ${sandbox_set[@]+"${sandbox_set[@]}"}) || die "the self-check could not run (see above)"
verdict="$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["verdict"])' "$check_dir/out.jsonl")"
if [[ $verdict != verified ]]; then
    cat "$check_dir/out.jsonl" >&2
    die "self-check: expected 'verified', got '$verdict'"
fi

cat <<EOF

Lean is ready ($mode).
  elan:          $(command -v elan)
  toolchain:     $TOOLCHAIN ($(lean --version 2>/dev/null | head -1))
  project:       $PROJECT
  REPL:          $PROJECT/$REPL_BIN
  checker:       $PROJECT/$CHECK_BIN
  sandbox:       $(command -v bwrap || echo "bwrap MISSING: install bubblewrap or set verification.sandbox = \"none\"")
EOF
[[ $mode == --lean ]] && echo "  Mathlib:       $PROJECT/.lake/packages/mathlib"
if [[ $mode == --lean-core ]]; then
    echo "  config:        set verification.project_dir = \"$PROJECT\" (Lean core only, no Mathlib)"
else
    echo "  config:        the defaults (verification.project_dir = \"lean\") point here"
fi
echo "  self-check:    verified"
