"""The sgsbatch checkout: files the package uses at run time that live beside it, not inside it.

`jobs/data/tiny_targets.jsonl` (the embedded targets of smoke runs) and `lean/` (the Lean project
the verifier runs in) belong to the repository. `checkout_root()` finds it by walking up from the
package to the directory holding `pyproject.toml` and `jobs/`, so it does not depend on how deep a
module sits in the package. Not covered: installs without a checkout (a wheel); they get a clear
error naming what to pass instead.
"""

from __future__ import annotations

from pathlib import Path


def checkout_root() -> Path:
    """The repository directory holding the installed `sgsbatch` package (an editable install)."""
    pkg = Path(__file__).resolve().parent
    for d in pkg.parents:
        if (d / "pyproject.toml").is_file() and (d / "jobs").is_dir() and (d / pkg.name).is_dir():
            return d
    raise FileNotFoundError(f"no sgsbatch checkout around {pkg}: install with `pip install -e .` from a clone "
                            "(./setup.sh), or give absolute paths (data.source, verification.project_dir)")


def embedded_tiny_targets() -> Path:
    return checkout_root() / "jobs" / "data" / "tiny_targets.jsonl"
