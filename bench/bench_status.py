"""`sgsbatch status RUN --json` on a long run with a running 64-shard phase (issue 14's benchmark).

    .venv/bin/python bench/bench_status.py                 # 200 rounds (builds ~8 GB, ~7 min)
    .venv/bin/python bench/bench_status.py --rounds 20     # scaled down

Builds the run with bench/history.py, then times, as subprocesses (median of --repeats):
`sgsbatch status bench --json` (database, shard files, item-log counting, disk walk, alarms),
and two floors measured in the same run: `python -c 'import sgsbatch.cli, sgsbatch.views.status'`
(start-up and imports) and a bare sqlite3 open + one query of the state database. Also times
`ops.progress.phase_progress` and `round.disk.disk_usage` in-process. `--report` also times `sgsbatch report bench
--out <tmp>/report.html` on the same run (issue 14's goal: < 10 s) against the same import floor
and the report's own (`import sgsbatch.cli, sgsbatch.views.report, matplotlib.pyplot`).
Output: bench/out/bench_status-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_db import timed_cmd  # noqa: E402
from history import REPO, build_history, describe  # noqa: E402

from sgsbatch.round.disk import disk_usage  # noqa: E402
from sgsbatch.views.progress import phase_progress  # noqa: E402


def timed(cmd: list[str], n: int) -> tuple[float, str]:
    times, out = timed_cmd(cmd, n)
    return statistics.median(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="Keep the temporary run directory.")
    ap.add_argument("--report", action="store_true", help="Also time `sgsbatch report` on the same run.")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_status-"))
    try:
        t0 = time.time()
        h = build_history(tmp, args.rounds)
        build_s = time.time() - t0
        runs = str(tmp / "runs")
        exe = str(Path(sys.executable).with_name("sgsbatch"))
        cli_s, out = timed([exe, "status", "bench", "--json", "--runs-dir", runs], args.repeats)
        st = json.loads(out)
        assert st["progress"]["phase"] == "verify" and st["progress"]["shards"] == 64, st["progress"]
        import_s, _ = timed([sys.executable, "-c", "import sgsbatch.cli, sgsbatch.views.status"], args.repeats)
        db_s, _ = timed([sys.executable, "-c", f"import sqlite3; sqlite3.connect({str(h.paths.db)!r})"
                         ".execute('select count(*) from rounds').fetchall()"], args.repeats)
        t1 = time.perf_counter()
        phase_progress(h.cfg, h.paths, args.rounds, "verify")
        t2 = time.perf_counter()
        disk_usage(h.cfg, h.paths, args.rounds)
        t3 = time.perf_counter()
        result = {"rounds": args.rounds, "build_s": build_s, "cli_status_median_s": cli_s,
                  "floor_import_median_s": import_s, "floor_sqlite_open_median_s": db_s,
                  "phase_progress_s": t2 - t1, "disk_usage_s": t3 - t2, **describe(h),
                  "items_done": st["progress"]["items_done"], "machine": platform.platform(),
                  "cpus": __import__("os").cpu_count()}
        if args.report:
            html = tmp / "report.html"
            result["cli_report_median_s"], _ = timed([exe, "report", "bench", "--runs-dir", runs, "--out", str(html)],
                                                     max(1, args.repeats // 2))
            result["report_bytes"] = html.stat().st_size
            result["floor_report_import_median_s"], _ = timed(
                [sys.executable, "-c", "import sgsbatch.cli, sgsbatch.views.report, matplotlib.pyplot"], args.repeats)
        print(json.dumps(result, indent=2))
        outdir = REPO / "bench" / "out"
        outdir.mkdir(exist_ok=True)
        (outdir / f"bench_status-{time.strftime('%Y%m%dT%H%M%S')}.json").write_text(json.dumps(result, indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
