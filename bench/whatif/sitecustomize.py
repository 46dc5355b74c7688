"""Bench-only what-if for bench_latency.py --what-if-fast-exit; not part of sgsbatch.

With this directory on PYTHONPATH and SGSBENCH_FAST_EXIT=1, a shard worker (`python -m
sgsbatch.scheduling.worker ...`) that exits with status 0 flushes logging and stdio and leaves with
os._exit(0), skipping interpreter finalization (tearing down torch/transformers modules takes
~0.5-1 s on the 2-core VM). Every other process, and every non-zero exit, is untouched.
"""

import os
import sys
from typing import NoReturn

if os.environ.get("SGSBENCH_FAST_EXIT") == "1":
    _real_exit = sys.exit

    def _fast_exit(code: str | int | None = 0) -> NoReturn:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None and spec.name == "sgsbatch.scheduling.worker" and code in (0, None):
            import logging

            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        _real_exit(code)

    sys.exit = _fast_exit
