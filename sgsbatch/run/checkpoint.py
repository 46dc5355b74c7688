"""The checkpoint protocol: a weights directory counts only once its completion marker exists.

Writers fill a fresh staging directory beside the destination and `publish_dir` it: the marker
(JSON: what the directory holds) is written into the staging directory, which is then renamed
into place, so a reader never sees half a checkpoint. Used by the trainer (trained weights), the
init phase (tiny-random base weights and their cache) and the round's weight choice.
Not covered: what goes into the directory (backends/trainer.py, models/tiny.py).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

MARKER = "SGSBATCH_COMPLETE"


def staging_dir(out_dir: Path) -> Path:
    """A fresh, empty sibling directory of `out_dir` to write into before `publish_dir`."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


def is_complete(out_dir: Path) -> bool:
    """True when `out_dir` was published by `publish_dir` (its marker file exists)."""
    return (out_dir / MARKER).is_file()


def read_marker(out_dir: Path) -> dict[str, Any]:
    """The JSON stored in the marker file of a published directory."""
    data = json.loads((out_dir / MARKER).read_text())
    assert isinstance(data, dict)
    return data


def publish_dir(tmp: Path, out_dir: Path, marker: dict[str, Any]) -> bool:
    """Write the marker into `tmp` and rename it to `out_dir`.

    Returns False (and removes `tmp`) when a complete `out_dir` already exists, e.g. when
    another process won the race; raises FileExistsError if `out_dir` exists but is not ours.
    """
    (tmp / MARKER).write_text(json.dumps(marker, sort_keys=True, indent=1) + "\n")
    try:
        os.rename(tmp, out_dir)
        return True
    except OSError:
        if is_complete(out_dir):
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        shutil.rmtree(tmp, ignore_errors=True)
        raise FileExistsError(f"{out_dir} exists and is not a completed sgsbatch directory") from None
