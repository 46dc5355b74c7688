"""Per-slot cgroup quotas (issue 38, "nothing outlives its proof"; cgroups.py) on a fake cgroup v2 tree.

Real parts: the pool, the stand-in REPL and checker as processes, the child's join between fork
and exec (a real `preexec_fn` writing `0`), the detection on this machine. The cgroup tree is a
temporary directory laid out as cgroup v2 lays it out (`cgroup.controllers`, `cgroup.procs`,
`cgroup.subtree_control` files): these tests show which group is chosen or refused and why, the
files written (leaf move, `+cpu +pids`, `cpu.max`, `pids.max`, `cgroup.kill`) and their removal.
What only a real delegated cgroup v2 tree shows: that the kernel accepts those writes, that a
slot's threads then share `slot_cpus` cores and stop at `pids.max` (the canary's "per-slot
quotas" row says whether a site has one).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from leanlib import settings

from sgsbatch.verification import cgroups as C
from sgsbatch.verification.limits import Limits, cgroup_note
from sgsbatch.verification.pool import ReplPool
from sgsbatch.verification.verdict import VERIFIED, ProofJob

TASK = "/system.slice/job_7/step_0/task_0"


def _tree(root: Path, path: str = TASK, offered: str = "cpuset cpu io memory pids", procs: str = "101\n102\n",
          hybrid: bool = False) -> Path:
    """A fake cgroup v2 mount at `root` (or at root/unified for a hybrid) with the task's group `path`."""
    mount = root / "unified" if hybrid else root
    mount.mkdir(parents=True, exist_ok=True)
    (mount / "cgroup.controllers").write_text("" if hybrid else "cpuset cpu io memory pids\n")
    group = mount / path.lstrip("/")
    group.mkdir(parents=True)
    (group / "cgroup.controllers").write_text(offered + "\n")
    (group / "cgroup.procs").write_text(procs)
    (group / "cgroup.subtree_control").write_text("")
    return group


def test_the_delegated_group_is_found(tmp_path: Path) -> None:
    group = _tree(tmp_path)
    site = C.find_group(("cpu", "pids"), f"0::{TASK}\n", tmp_path)
    assert (site.group, site.path, site.why_not) == (group, TASK, "")
    again = C.find_group(("cpu",), f"0::{TASK}/{C.LEAF}\n", tmp_path)
    assert again.group == group, "a process already moved into the leaf finds the same group"


@pytest.mark.parametrize(("text", "offered", "writable", "hybrid", "why"), [
    ("0::/\n", "cpu pids", True, False, "root cgroup"),
    (f"0::{TASK}\n", "cpuset memory", True, False, "the controllers cpu, pids are not offered"),
    (f"0::{TASK}\n", "cpu pids", False, False, "not writable by this user"),
    (f"4:memory:/slurm/job_8\n0::{TASK}\n", "cpu pids", True, True, "on cgroup v1 here"),
    ("4:memory:/slurm/job_8\n", "cpu pids", True, False, "no cgroup v2 hierarchy"),
])
def test_elsewhere_nothing_is_made_and_the_reason_is_said(tmp_path: Path, text: str, offered: str, writable: bool,
                                                           hybrid: bool, why: str) -> None:
    _tree(tmp_path, offered=offered, hybrid=hybrid)
    site = C.find_group(("cpu", "pids"), text, tmp_path, writable=lambda _p: writable)
    assert site.group is None and why in site.why_not, site
    groups = C.SlotGroups.make(2, 1.0, 64, cgroup_text=text, root=tmp_path, writable=lambda _p: writable)
    assert groups.dirs == [] and groups.note.startswith("no per-slot cgroup quotas: ") and why in groups.note
    assert groups.procs(0) == ""


def test_the_slots_get_their_quotas_and_go_again(tmp_path: Path) -> None:
    group = _tree(tmp_path)
    groups = C.SlotGroups.make(2, 1.0, 2048, cgroup_text=f"0::{TASK}\n", root=tmp_path)
    # the task's processes moved into the leaf (one write per pid: the fake file keeps the last), then
    # the controllers enabled for the children
    assert (group / C.LEAF / "cgroup.procs").read_text() == "102"
    assert (group / "cgroup.subtree_control").read_text() == "+cpu +pids"
    assert len(groups.dirs) == 2 and all(d.parent == group for d in groups.dirs)
    for i, d in enumerate(groups.dirs):
        assert d.name.endswith(f"-slot-{i}")
        assert (d / "cpu.max").read_text() == "100000 100000" and (d / "pids.max").read_text() == "2048"
        assert groups.procs(i) == str(d / "cgroup.procs")
    assert groups.note == f"per-slot cgroups under {TASK}: cpu.max 1 core, pids.max 2048 per slot (REPL and " \
                          "checker together)"
    second = C.SlotGroups.make(1, 1.5, 0, cgroup_text=f"0::{TASK}/{C.LEAF}\n", root=tmp_path)
    (d,) = second.dirs
    assert (d / "cpu.max").read_text() == "150000 100000" and not (d / "pids.max").exists()
    assert (group / C.LEAF / "cgroup.procs").read_text() == "102", "already enabled: nothing moved again"
    groups.remove()
    second.remove()
    assert sorted(p.name for p in group.iterdir() if p.is_dir()) == [C.LEAF]


def test_a_failed_write_makes_no_groups(tmp_path: Path) -> None:
    group = _tree(tmp_path)
    (group / "cgroup.subtree_control").unlink()
    (group / "cgroup.subtree_control").mkdir()  # a write there fails, as EBUSY would on a real tree
    groups = C.SlotGroups.make(2, 1.0, 64, cgroup_text=f"0::{TASK}\n", root=tmp_path)
    assert groups.dirs == [] and "enabling cpu, pids for the children of" in groups.note


def test_no_quota_asked_touches_nothing(tmp_path: Path) -> None:
    group = _tree(tmp_path)
    groups = C.SlotGroups.make(3, 0, 0, cgroup_text=f"0::{TASK}\n", root=tmp_path)
    assert groups.dirs == [] and "slot_cpus and slot_pids are 0" in groups.note
    assert not (group / C.LEAF).exists()


def test_kill_writes_cgroup_kill_where_there_is_one(tmp_path: Path) -> None:
    C.kill(tmp_path)
    assert not (tmp_path / "cgroup.kill").exists(), "a kernel without cgroup.kill: nothing is written"
    (tmp_path / "cgroup.kill").write_text("")
    C.kill(tmp_path)
    assert (tmp_path / "cgroup.kill").read_text() == "1"
    C.kill(None)


def test_the_child_joins_before_exec(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"
    procs.write_text("")
    out = subprocess.run([sys.executable, "-c", "print('ran')"], capture_output=True, text=True, check=True,
                         preexec_fn=Limits(cgroup_procs=str(procs)).preexec())
    assert out.stdout == "ran\n" and procs.read_text() == "0", "the child wrote 0: it joins itself"
    gone = subprocess.run([sys.executable, "-c", "print('ran')"], capture_output=True, text=True, check=True,
                          preexec_fn=Limits(cgroup_procs=str(tmp_path / "no" / "cgroup.procs")).preexec())
    assert gone.stdout == "ran\n", "a join that fails leaves the process where it is (the pool warns)"


def test_the_pool_runs_its_slots_in_their_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    cg = tmp_path / "cg"
    group = _tree(cg)
    (tmp_path / "self.cgroup").write_text(f"0::{TASK}\n")
    monkeypatch.setattr(C, "ROOT", cg)
    monkeypatch.setattr(C, "SELF", tmp_path / "self.cgroup")
    pool = ReplPool(settings(tmp_path, processes=1, slot_cpus=1.0, slot_pids=256))
    (slot_dir,) = pool.slot_groups.dirs
    for name in ("cgroup.kill", "cgroup.procs"):  # what the kernel's cgroupfs gives every group
        (slot_dir / name).write_text("")
    try:
        with caplog.at_level("WARNING"):
            verdicts = [v for _, v, _ in pool.run([ProofJob(f"p{i}", "import Mathlib", f"theorem t{i} : True := by",
                                                            "\n  trivial") for i in range(2)])]
        assert [v.verdict for v in verdicts] == [VERIFIED, VERIFIED], verdicts
        assert (slot_dir / "cgroup.procs").read_text() == "0", "the REPL and the checker joined the slot's group"
        assert (slot_dir / "pids.max").read_text() == "256"
        # a fake tree moves nobody: the pool sees it and says so (on a real tree they are members)
        assert "did not join its slot's cgroup" in caplog.text
        pool._slots[0].reset()  # noqa: SLF001 (white box: a restart empties the group)
        assert (slot_dir / "cgroup.kill").read_text() == "1"
    finally:
        pool.close()
    assert not slot_dir.exists() and pool.slot_groups.dirs == []
    assert sorted(p.name for p in group.iterdir() if p.is_dir()) == [C.LEAF], "the pool's close removed its groups"
    assert "per-slot cgroups under" in cgroup_note(per_slot=C.SlotGroups([], "per-slot cgroups under X").note)


def test_here_the_detection_answers_without_writing() -> None:
    # this machine: whatever its cgroups, find_group only reads and says yes or why not
    site = C.find_group(("cpu", "pids"))
    assert (site.group is None) == bool(site.why_not)
