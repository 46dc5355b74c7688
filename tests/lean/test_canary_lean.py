"""The canary's verification check (canary/lean.py) against the Lean stand-ins, real bubblewrap and
the real process filter: faithful stand-ins pass; a checker that refuses honest proofs, one that
accepts a changed statement, a sandbox that cannot start and a Lean that is not built each fail
it, with the key or site setting to change."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from leanlib import FAKE_CHECKER_COMMAND, FAKE_COMMAND

from sgsbatch.canary.cases import CHEATS, HONEST
from sgsbatch.canary.lean import check_verification
from sgsbatch.canary.rows import Row
from sgsbatch.config.schema import CanaryConfig, Config, VerificationConfig


def _cfg(tmp_path: Path, **kw: object) -> Config:
    base: dict[str, object] = dict(backend="lean", repl_command=FAKE_COMMAND, checker_command=FAKE_CHECKER_COMMAND,
                                   project_dir=str(tmp_path), timeout_s=20.0, header_timeout_s=20.0,
                                   sandbox="bwrap" if shutil.which("bwrap") else "none")
    base.update(kw)
    return replace(Config(), verification=VerificationConfig(**base),  # type: ignore[arg-type]
                   canary=CanaryConfig(loop_timeout_s=1.5))


def _rows(rows: list[Row]) -> dict[str, Row]:
    return {r.check: r for r in rows}


def test_faithful_stand_ins_pass_every_check(tmp_path: Path) -> None:
    rows = _rows(check_verification(_cfg(tmp_path), processes=2))
    assert all(r.ok for r in rows.values()), [r for r in rows.values() if not r.ok]
    for case in HONEST:
        assert rows[f"honest: {case.key}"].figure.startswith("verified")
    for case in CHEATS:
        assert not rows[f"cheat: {case.key}"].figure.startswith("verified")
    assert "refused (statement_changed)" in rows["checker refuses a changed statement"].figure
    assert rows["loop times out"].figure.startswith("timeout")
    assert rows["pool healthy after the loop"].figure.startswith("verified")
    assert "proofs/s per process" in rows["speed"].figure
    quotas = rows["per-slot quotas"]  # this machine has no delegated cgroup v2 group: said, not failed
    assert quotas.ok and quotas.figure.startswith(("none: ", "yes: ")), quotas


def test_the_table_says_where_per_slot_quotas_are_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sgsbatch.canary.lean import _quota_row
    from sgsbatch.verification import cgroups

    group = tmp_path / "cg" / "job_7" / "task_0"
    group.mkdir(parents=True)
    (tmp_path / "cg" / "cgroup.controllers").write_text("cpu pids memory\n")
    (group / "cgroup.controllers").write_text("cpu pids memory\n")
    (group / "cgroup.procs").write_text("")
    (group / "cgroup.subtree_control").write_text("")
    (tmp_path / "self").write_text("0::/job_7/task_0\n")
    monkeypatch.setattr(cgroups, "ROOT", tmp_path / "cg")
    monkeypatch.setattr(cgroups, "SELF", tmp_path / "self")
    row = _quota_row(VerificationConfig(slot_cpus=1.0, slot_pids=512))
    assert row.ok and row.figure == "yes: per-slot cgroups under /job_7/task_0: cpu.max 1 core, pids.max 512 per " \
                                    "slot (REPL and checker together)", row
    assert [p.name for p in group.iterdir() if p.is_dir()] == [cgroups.LEAF], "the probe's slot group is gone"
    (tmp_path / "self").write_text("0::/\n")
    none = _quota_row(VerificationConfig())
    assert none.ok and none.figure.startswith("none: this process is in the root cgroup"), none


def test_a_checker_that_refuses_honest_proofs_fails(tmp_path: Path) -> None:
    rows = _rows(check_verification(_cfg(tmp_path, checker_command=(*FAKE_CHECKER_COMMAND, "--refuse-all")), 2))
    bad = rows["honest: gcd"]
    assert not bad.ok and "recheck_kernel_rejected" in bad.figure and "./setup.sh --lean" in bad.fix


def test_a_checker_that_accepts_a_changed_statement_fails(tmp_path: Path) -> None:
    rows = _rows(check_verification(_cfg(tmp_path, checker_command=(*FAKE_CHECKER_COMMAND, "--accept-all")), 2))
    probe = rows["checker refuses a changed statement"]
    assert not probe.ok and probe.figure.startswith("ACCEPTED") and "SgsKernelCheck" in probe.fix
    assert all(rows[f"honest: {c.key}"].ok for c in HONEST)  # only the probe can see this checker is broken


def test_a_sandbox_that_cannot_start_fails_with_its_cause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel "
                    "does not allow non-privileged user namespaces.' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    rows = check_verification(_cfg(tmp_path, sandbox="bwrap"), 2)
    assert [r.check for r in rows] == ["sandbox starts"]  # nothing else runs unsandboxed
    assert not rows[0].ok and "non-privileged user namespaces" in rows[0].figure
    assert "unprivileged_userns_clone" in rows[0].fix and "verification.sandbox" in rows[0].fix


def test_lean_not_built_fails_naming_the_install(tmp_path: Path) -> None:
    rows = _rows(check_verification(_cfg(tmp_path, repl_command=("lake", "env", "no-such-repl")), 2))
    bad = rows["verifier starts"]
    assert not bad.ok and "./setup.sh --lean" in bad.fix


def test_a_simulated_verifier_is_reported_as_such(tmp_path: Path) -> None:
    rows = check_verification(replace(Config(), verification=VerificationConfig(backend="simulated")), 2)
    assert len(rows) == 1 and "SIMULATED" in rows[0].figure
