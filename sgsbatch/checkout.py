"""Files the package uses at run time: package data, and the checkout around an editable install.

The embedded targets of tiny and smoke runs are package data (`sgsbatch/embedded/`, read through
`importlib.resources`), so they are there in any install. `lean/` (the Lean project the verifier
runs in) belongs to the repository: `checkout_root()` finds it by walking up from the package to
the directory holding `pyproject.toml` and `jobs/`; a relative `verification.project_dir` needs
it. Not covered: a relative project directory without a checkout (a wheel install); that gets a
clear error naming the key to set to an absolute path.
"""

from __future__ import annotations

from importlib import resources
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
    """The 12 small statements of tiny and smoke runs (package data)."""
    return Path(str(resources.files("sgsbatch") / "embedded" / "tiny_targets.jsonl"))
