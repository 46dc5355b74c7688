"""leftover.poisoned on a loaded core: a spinning thread that gets a sliver of a CPU is still found.

Real processes pinned to one CPU (os.sched_setaffinity): a spinner in the tree under test beside
hogs outside it, so the spinner runs about 1/8 of the core, below `idle_cpu_fraction` (the CI
failure this pins: a CPU-used measure saw it idle and the next proof timed out; the run-queue
time alone is not enough either, as the kernel adds a wait only when it ends); a sleeper beside
the same hogs is not poisoned. Not covered: the pool around it (tests/lean/test_lean_leftover_work.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from sgsbatch.verification.leftover import LeftoverLimits, demand, poisoned, usage

SPIN = "while True: pass"
SLEEP = "import time; time.sleep(60)"
READY = "import sys; sys.stdout.write('ready\\n'); sys.stdout.flush()\n"  # then the code under test
HOGS = 7


def _pinned(code: str, cpu: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


@pytest.fixture
def loaded_cpu() -> Iterator[int]:
    """One CPU this test may use, with HOGS busy processes pinned to it for the test's duration."""
    cpu = min(os.sched_getaffinity(0))
    hogs = [_pinned(SPIN, cpu) for _ in range(HOGS)]
    try:
        time.sleep(0.3)
        yield cpu
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _tree(code: str, cpu: int) -> Iterator[int]:
    """The process running `code`, once its interpreter has started (on a loaded CPU Python's own start-up
    takes long and looks busy: a fixed wait made the sleeper look like a spinner when the machine was busy)."""
    proc = subprocess.Popen([sys.executable, "-c", READY + code], stdout=subprocess.PIPE,
                            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(0.1)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_starved_spinner_is_poisoned(loaded_cpu: int) -> None:
    limits = LeftoverLimits()
    for pid in _tree(SPIN, loaded_cpu):
        first = usage(pid)
        time.sleep(0.2)
        second = usage(pid)
        ran = (second.run_ns - first.run_ns) / 1e9 / (second.at - first.at)
        assert ran < limits.idle_cpu_fraction, f"the hogs should starve the spinner (it ran {ran:.2f} of a core)"
        assert demand(first, second) >= ran
        left = poisoned(pid, baseline_threads=1, limits=limits)
        assert left is not None and left.cause == "leftover_cpu", left


def test_a_sleeper_beside_the_same_hogs_is_not_poisoned(loaded_cpu: int) -> None:
    for pid in _tree(SLEEP, loaded_cpu):
        assert poisoned(pid, baseline_threads=1, limits=LeftoverLimits()) is None
