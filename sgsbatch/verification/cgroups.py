"""Per-slot cgroups ("nothing outlives its proof"): each pool slot's REPL and checker in a
cgroup v2 group of its own, with `cpu.max` (`verification.slot_cpus` cores) and `pids.max`
(`verification.slot_pids` tasks), where the verify task's cgroup is delegated to the verify user.

Where it applies (`find_group`): the cgroup v2 group this process is in (`0::<path>` in
/proc/self/cgroup, under the v2 mount, /sys/fs/cgroup or /sys/fs/cgroup/unified) when it is not the
root group, offers the controllers needed (its `cgroup.controllers`), and this user can write it
(the directory, its `cgroup.procs` and `cgroup.subtree_control`): a delegated subtree, e.g. a
`systemd-run --user --scope -p Delegate=yes` or a Slurm site that delegates its task cgroups. Under
cgroup v1, in the root group, or in a group owned by root (Slurm's cgroup/v2 without delegation:
the usual case) nothing is made, and `SlotGroups.note` says why (the startup log line, and the
canary's table: canary/lean.py).

What it does (`prepare`, once per process, idempotent): cgroup v2 lets a group hand controllers to
its children only while it holds no process itself, so every process of the task's group moves
into a leaf `sgsbatch-main` beside the slots (they stay there for the task's life), and `+cpu
+pids` are written to the group's `cgroup.subtree_control`. `SlotGroups.make` then makes one group
per slot, `pool-<pid>-<n>-slot-<i>`, with its quotas; a slot's REPL and checker join it between
fork and exec (`limits.Limits.cgroup_procs`: the child writes `0` to its `cgroup.procs`), so every
thread and process a proof starts is inside from its first instruction: a proof's threads share
the slot's `slot_cpus` cores and cannot take CPU from the node's other slots, and the slot's tasks
stop at `pids.max`. A slot's restart writes `cgroup.kill` (Linux 5.14+) after killing the process
group, so nothing the proof started outlives it there either; the pool's close removes the groups.

Not covered: memory per slot (a `memory.max` would count the page cache of Mathlib's mapped
.olean files, shared by every slot; RLIMIT_AS and the job's cgroup bound memory: limits.py); a
site's own cleanup of the leaf when the task ends (systemd removes a delegated subtree with its
unit; what a site's Slurm does only a real cluster shows); anything on cgroup v1.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")  # where cgroup file systems are mounted (tests point it at a fake tree)
SELF = Path("/proc/self/cgroup")
LEAF = "sgsbatch-main"  # where the task's own processes go once its group hands out controllers
PERIOD_US = 100_000  # cpu.max's period
_LOCK = threading.Lock()  # one `prepare` at a time in this process
_POOLS = itertools.count()


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def _write(path: Path, text: str) -> None:
    """One write(2) of `text`, as cgroup files want (on a plain directory, for tests, the file is made)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def controllers_for(cpus: float, pids: int) -> tuple[str, ...]:
    """The controllers the quotas need: cpu for `cpus` > 0, pids for `pids` > 0."""
    return tuple(name for name, on in (("cpu", cpus > 0), ("pids", pids > 0)) if on)


@dataclass(frozen=True)
class Site:
    """The group per-slot groups go under (`group`, with `path` its name in the v2 tree), or why none."""

    group: Path | None
    path: str = ""
    why_not: str = ""


def _v2_mount(root: Path) -> Path | None:
    for mount in (root, root / "unified"):
        if (mount / "cgroup.controllers").is_file():
            return mount
    return None


def find_group(controllers: tuple[str, ...], cgroup_text: str | None = None, root: Path | None = None,
               writable: Callable[[Path], bool] = _writable) -> Site:
    """Where this process may make per-slot groups with `controllers`, or why it may not (reads only;
    `cgroup_text` is /proc/self/cgroup's, `root` the cgroup mount point: module defaults when None)."""
    root = ROOT if root is None else root
    if cgroup_text is None:
        try:
            cgroup_text = SELF.read_text()
        except OSError as e:
            return Site(None, why_not=f"/proc/self/cgroup unreadable ({e.strerror or e})")
    path = next((line.split(":", 2)[2] for line in cgroup_text.splitlines() if line.startswith("0::")), None)
    mount = _v2_mount(root)
    if path is None or mount is None:
        return Site(None, why_not="no cgroup v2 hierarchy here (cgroup v1: per-slot quotas need v2)")
    path = path.strip()
    try:
        on_v2 = set((mount / "cgroup.controllers").read_text().split())
    except OSError:
        on_v2 = set()
    if mount != root and not all(c in on_v2 for c in controllers):  # hybrid: v1 holds the controllers
        return Site(None, why_not=f"the controllers {', '.join(controllers)} are on cgroup v1 here (a hybrid "
                                  "hierarchy): per-slot quotas need them on cgroup v2")
    if path.rstrip("/").endswith("/" + LEAF):  # this process moved itself there before: the group is its parent
        path = path.rstrip("/").rsplit("/", 1)[0] or "/"
    if path in ("", "/"):
        return Site(None, why_not="this process is in the root cgroup (no delegated subtree: a site gives one "
                                  "with systemd's Delegate=yes or a delegating Slurm)")
    group = mount / path.lstrip("/")
    try:
        offered = set((group / "cgroup.controllers").read_text().split())
    except OSError as e:
        return Site(None, path, f"its group {path} cannot be read ({e.strerror or e})")
    missing = [c for c in controllers if c not in offered]
    if missing:
        return Site(None, path, f"the controllers {', '.join(missing)} are not offered to {path} "
                                f"(cgroup.controllers: {' '.join(sorted(offered)) or 'none'})")
    if not all(writable(p) for p in (group, group / "cgroup.procs", group / "cgroup.subtree_control")):
        return Site(None, path, f"{path} is not writable by this user (not delegated to it)")
    return Site(group, path)


def prepare(controllers: tuple[str, ...], cgroup_text: str | None = None, root: Path | None = None,
            writable: Callable[[Path], bool] = _writable) -> Site:
    """`find_group`, then make its children able to get `controllers`: the group's processes move into
    its leaf `sgsbatch-main` and the controllers are enabled in its subtree_control. Idempotent."""
    with _LOCK:
        site = find_group(controllers, cgroup_text, root, writable)
        if site.group is None:
            return site
        group = site.group
        try:
            enabled = (group / "cgroup.subtree_control").read_text().replace("+", " ").split()
            todo = [c for c in controllers if c not in enabled]
            if todo:
                (group / LEAF).mkdir(exist_ok=True)
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                        _write(group / LEAF / "cgroup.procs", pid)
                _write(group / "cgroup.subtree_control", " ".join(f"+{c}" for c in todo))
        except OSError as e:
            return Site(None, site.path, f"enabling {', '.join(controllers)} for the children of {site.path} "
                                         f"failed ({e.strerror or e})")
        return site


@dataclass
class SlotGroups:
    """One pool's per-slot groups (`dirs[i]` for slot i; empty where none) and a line saying what holds."""

    dirs: list[Path] = field(default_factory=list)
    note: str = ""

    @staticmethod
    def make(slots: int, cpus: float, pids: int, *, cgroup_text: str | None = None, root: Path | None = None,
             writable: Callable[[Path], bool] = _writable) -> SlotGroups:
        """A group with `cpus` cores (cpu.max) and `pids` tasks (pids.max) for each of `slots` slots,
        where this process's cgroup is delegated; else no groups and the reason in `note`."""
        assert slots >= 1 and cpus >= 0 and pids >= 0, (slots, cpus, pids)
        controllers = controllers_for(cpus, pids)
        if not controllers:
            return SlotGroups([], "no per-slot cgroup quotas: verification.slot_cpus and slot_pids are 0")
        site = prepare(controllers, cgroup_text, root, writable)
        if site.group is None:
            return SlotGroups([], f"no per-slot cgroup quotas: {site.why_not}")
        tag = f"pool-{os.getpid()}-{next(_POOLS)}"
        made = SlotGroups([], "")
        try:
            for i in range(slots):
                d = site.group / f"{tag}-slot-{i}"
                d.mkdir()
                made.dirs.append(d)
                if cpus > 0:
                    _write(d / "cpu.max", f"{max(1000, round(cpus * PERIOD_US))} {PERIOD_US}")
                if pids > 0:
                    _write(d / "pids.max", str(pids))
        except OSError as e:
            made.remove()
            return SlotGroups([], f"no per-slot cgroup quotas: making {tag}-slot-* under {site.path} failed "
                                  f"({e.strerror or e})")
        quotas = [f"cpu.max {cpus:g} core{'s' if cpus != 1 else ''}" if cpus > 0 else "",
                  f"pids.max {pids}" if pids > 0 else ""]
        return SlotGroups(made.dirs, f"per-slot cgroups under {site.path}: {', '.join(q for q in quotas if q)} "
                                     "per slot (REPL and checker together)")

    def procs(self, slot: int) -> str:
        """The `cgroup.procs` file slot `slot`'s processes join, or "" where there are no groups."""
        return str(self.dirs[slot] / "cgroup.procs") if slot < len(self.dirs) else ""

    def remove(self) -> None:
        """Remove the groups (each empty once its processes are gone: a moment after their kill)."""
        for d in self.dirs:
            for _ in range(50):
                try:
                    if not (d / "cgroup.controllers").exists():  # a plain directory (tests): its files go too
                        for f in d.iterdir():
                            f.unlink()
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY: a process of the slot has not exited yet
                    time.sleep(0.02)
        self.dirs = []


def kill(group: Path | None) -> None:
    """Kill everything left in `group` (`cgroup.kill`, Linux 5.14+; nothing where the file is absent)."""
    if group is not None and (group / "cgroup.kill").exists():
        with contextlib.suppress(OSError):
            _write(group / "cgroup.kill", "1")


def member_of(pid: int, group: Path, root: Path | None = None) -> bool:
    """True when process `pid` is in the v2 group `group` (read from /proc/<pid>/cgroup)."""
    mount = _v2_mount(ROOT if root is None else root)
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False
    path = next((line.split(":", 2)[2].strip() for line in text.splitlines() if line.startswith("0::")), "")
    return mount is not None and mount / path.lstrip("/") == group
