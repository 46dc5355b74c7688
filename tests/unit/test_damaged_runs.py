"""Damaged run directories: every command gives one line naming the file and the repair, the
all-runs `status` still lists every other run, and read-only commands (status, fit) write nothing.

Cases: a 0-byte, garbage or truncated `state.db`, a missing `state.db`, invalid TOML in the run's
`config.toml`, a deleted `config.toml` (the run stays listed; `rebuild --restore-config` writes it
back from the database), and the runs directory default ($SGSBATCH_RUNS_DIR).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from sgsbatch.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import recorded_run as make_run  # noqa: E402


def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _garbage(p: Path) -> None:
    p.write_bytes(bytes(range(256)) * 16)


def _truncated(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:8192])


def _toml(p: Path) -> None:
    p.write_text(p.read_text() + "\nx = [\n")


DAMAGE: dict[str, tuple[str, Callable[[Path], None], str, str]] = {
    # case: (file, damage, words in the message, repair in the message)
    "empty_db": ("state.db", _empty, "state.db is empty", "rebuild bad --runs-dir {runs} --force"),
    "garbage_db": ("state.db", _garbage, "state.db is damaged", "rebuild bad --runs-dir {runs} --force"),
    "truncated_db": ("state.db", _truncated, "state.db is damaged", "rebuild bad --runs-dir {runs} --force"),
    "missing_db": ("state.db", Path.unlink, "state.db is missing", "rebuild bad --runs-dir {runs}`"),
    "bad_toml": ("config.toml", _toml, "config.toml is not valid TOML",
                 "rebuild bad --runs-dir {runs} --restore-config --force"),
    "missing_config": ("config.toml", Path.unlink, "config.toml is missing",
                       "rebuild bad --runs-dir {runs} --restore-config`"),
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir" if path.exists() else "absent"


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_run_is_one_line_and_others_stay_listed(tmp_path: Path, case: str) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "good")
    bad = make_run(runs, "bad")
    name, damage, words, repair = DAMAGE[case]
    damage(bad.paths.root / name)
    bad.db.close()
    before = {str(p): _digest(p) for p in bad.paths.root.rglob("*")}
    for args, code in ((["status", "bad"], 1), (["fit", "bad"], 1), (["cancel", "bad"], 1), (["resume", "bad"], 1),
                       (["status"], 0), (["status", "--json"], 0)):
        res = CliRunner().invoke(main, [*args, "--runs-dir", str(runs)])
        assert res.exit_code == code, (args, res.output)
        assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit), res.exception
        text = res.stderr if code else res.stdout
        assert words in text and repair.format(runs=runs) in text, (args, text)
        if args == ["status"]:
            assert "good: " in res.stdout and "bad: unreadable" in res.stdout
        elif code:
            assert len(res.stderr.strip().splitlines()) == 1
    assert {str(p): _digest(p) for p in bad.paths.root.rglob("*")} == before  # nothing written, nothing created


def test_status_and_fit_write_nothing(tmp_path: Path) -> None:
    h = make_run(tmp_path, "ro")
    h.db.close()
    before = _digest(h.paths.db), h.paths.db.stat().st_mtime_ns
    for args in (["status", "ro"], ["status"], ["fit", "ro"]):
        CliRunner().invoke(main, [*args, "--runs-dir", str(tmp_path)])
    assert (_digest(h.paths.db), h.paths.db.stat().st_mtime_ns) == before


def test_restore_config_from_the_database(tmp_path: Path) -> None:
    h = make_run(tmp_path, "rc")
    original = h.paths.config.read_bytes()
    h.paths.config.unlink()
    res = CliRunner().invoke(main, ["rebuild", "rc", "--runs-dir", str(tmp_path), "--restore-config"])
    assert res.exit_code == 0, res.output
    assert h.paths.config.read_bytes() == original
    h.paths.config.write_text("edited = true\n")
    res = CliRunner().invoke(main, ["rebuild", "rc", "--runs-dir", str(tmp_path), "--restore-config"])
    assert res.exit_code == 2 and "--force" in res.stderr
    res = CliRunner().invoke(main, ["rebuild", "rc", "--runs-dir", str(tmp_path), "--restore-config", "--force"])
    assert res.exit_code == 0 and h.paths.config.read_bytes() == original
    assert [p.read_text() for p in tmp_path.glob("rc/config.toml.edited-*")] == ["edited = true\n"]


def test_runs_dir_follows_the_environment_and_messages_name_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    make_run(tmp_path / "elsewhere", "e1")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["status", "e1"])
    assert res.exit_code == 2 and "no run named 'e1'" in res.stderr
    res = CliRunner().invoke(main, ["status", "e1"], env={"SGSBATCH_RUNS_DIR": str(tmp_path / "elsewhere")})
    assert res.exit_code == 0, res.output
    assert "sgsbatch resume e1`" in res.stdout  # found by the default: no --runs-dir needed
    res = CliRunner().invoke(main, ["status", "e1", "--runs-dir", str(tmp_path / "elsewhere")])
    assert f"sgsbatch resume e1 --runs-dir {tmp_path / 'elsewhere'}`" in res.stdout
