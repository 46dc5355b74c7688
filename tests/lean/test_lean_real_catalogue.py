"""Real Lean, issue 38: the tactic catalogue regenerated from the installed sources, Lean core included, and
test_tactic_catalogue.py held against it (the committed catalogue could not read Lean core here: its git
snapshot is over this project's fetch limit). Skipped where `lake` or the built REPL is absent.

The sources: the toolchain's own `.lean` files (`lean --print-prefix`/src/lean: Init, Lean, Std) and the
Lean project's packages (`lean/.lake/packages/<mathlib|batteries|aesop|plausible>`), read as trees
(gen_tactic_catalogue.py --tree); then every check of test_tactic_catalogue.py runs on that file in a
pytest of its own, and must pass with no source left unread (its skip for unread sources must not fire).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from leanlib import need_real_lean

from sgsbatch.config.schema import VerificationConfig
from sgsbatch.verification.lean import resolve_project_dir

pytestmark = pytest.mark.lean
HERE = Path(__file__).parent
PACKAGES = {"mathlib": "mathlib", "batteries": "batteries", "aesop": "aesop", "plausible": "plausible"}


def test_the_catalogue_of_the_installed_sources_holds(tmp_path: Path) -> None:
    need_real_lean()
    project = resolve_project_dir(VerificationConfig().project_dir)
    prefix = subprocess.run(["lake", "env", "lean", "--print-prefix"], cwd=project, capture_output=True, text=True,
                            check=True).stdout.strip()
    # gen_tactic_catalogue reads core's files under src/ (the paths tactics.py cites): a root holding src/
    core = tmp_path / "core"
    core.mkdir()
    (core / "src").symlink_to(Path(prefix) / "src" / "lean")
    trees = [f"lean4={core}", *(f"{label}={project / '.lake' / 'packages' / package}"
                                for label, package in PACKAGES.items())]
    out = tmp_path / "catalogue.tsv"
    gen = subprocess.run([sys.executable, str(HERE / "data" / "gen_tactic_catalogue.py"), "--mirror", str(tmp_path),
                          *(a for t in trees for a in ("--tree", t)), "--out", str(out)],
                         capture_output=True, text=True)
    assert gen.returncode == 0, gen.stderr
    assert "NOT READ" not in out.read_text(), out.read_text().splitlines()[:8]
    held = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           str(HERE / "test_tactic_catalogue.py")],
                          env=dict(os.environ, SGSBATCH_TACTIC_CATALOGUE=str(out)), capture_output=True, text=True)
    assert held.returncode == 0, held.stdout[-4000:]
    assert "did not read" not in held.stdout, held.stdout[-2000:]
