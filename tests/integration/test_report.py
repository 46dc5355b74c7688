"""`sgsbatch fit --plot` and `sgsbatch report` (issue 14, parts 5 and 6) on run databases with a known
history (tests/integration/reportlib.py), and the page in real headless Chromium.

The Chromium test runs Debian's `chromium`; it skips only when the browser is absent and
SGSBATCH_REQUIRE_CHROMIUM is unset (CI sets it, so it never skips there).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reportlib import HOSTILE, curve_run, round_seconds, round_start  # noqa: E402
from runlib import sgsbatch  # noqa: E402

from sgsbatch.views.plot import write_fit_plot  # noqa: E402
from sgsbatch.views.report import diff_table, render_report, write_report  # noqa: E402


def _db_points(run_dir: Path) -> dict[int, tuple[float, float]]:
    """round -> (generations/total, cumulative_solve_rate), read with plain sqlite3."""
    con = sqlite3.connect(f"file:{run_dir / 'state.db'}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT round, name, value FROM metrics WHERE name IN "
                           "('generations/total', 'cumulative_solve_rate')").fetchall()
    finally:
        con.close()
    by: dict[int, dict[str, float]] = {}
    for rnd, name, value in rows:
        by.setdefault(rnd, {})[name] = value
    return {r: (m["generations/total"], m["cumulative_solve_rate"]) for r, m in by.items() if len(m) == 2}


def _png(path: Path) -> Any:
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    return imread(str(path))


def _not_blank(pixels: Any) -> bool:
    """Drawn, not a flat area: varied pixels and more than 1% of them not near-white."""
    rgb = np.asarray(pixels, dtype=np.float64)[..., :3]
    if rgb.max() > 1.0:
        rgb = rgb / 255.0
    return bool(rgb.std() > 0.03 and (rgb.min(axis=-1) < 0.9).mean() > 0.01)


def test_fit_plot_draws_the_metrics_rows_of_every_run(tmp_path: Path, cli_env: dict[str, str]) -> None:
    a, b = curve_run(tmp_path, "alpha", 30), curve_run(tmp_path, "beta", 12, simulated=False, costs=False)
    out = tmp_path / "plots" / "fit.png"
    data = write_fit_plot([a, b], out)
    for s, name in zip(data["series"], ("alpha", "beta"), strict=True):
        db = _db_points(tmp_path / name)
        assert s["run"] == name and s["rounds"] == sorted(db)
        assert s["generations"] == [db[r][0] for r in s["rounds"]]
        assert s["solve_rate"] == [db[r][1] for r in s["rounds"]]
        assert s["fit"] is not None and s["fit"]["r0"] == db[0][1]
    assert data["paper"] == {"r0": 0.30, "a": 0.671, "c_mid": 1_252_336.0, "b": 0.585}
    img = _png(out)
    assert img.shape[0] > 300 and img.shape[1] > 500 and _not_blank(img)

    cli_png = tmp_path / "cli.png"
    proc = sgsbatch("fit", "alpha", "beta", "--runs-dir", str(tmp_path), "--plot", str(cli_png), "--json",
                    "--halves", "0", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    reps = json.loads(proc.stdout)
    assert [r["run"] for r in reps] == ["alpha", "beta"] and _not_blank(_png(cli_png))
    single = json.loads(sgsbatch("fit", "alpha", "--runs-dir", str(tmp_path), "--json", "--halves", "0",
                                 env=cli_env).stdout)
    assert single["run"] == "alpha"  # one run: one object, as before


def test_fit_plot_of_a_run_with_too_few_points_draws_them_without_a_curve(tmp_path: Path,
                                                                          cli_env: dict[str, str]) -> None:
    curve_run(tmp_path, "short", 3)
    out = tmp_path / "short.png"
    proc = sgsbatch("fit", "short", "--runs-dir", str(tmp_path), "--plot", str(out), env=cli_env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [f"wrote {out}", proc.stderr.splitlines()[1]]
    assert proc.stderr.splitlines()[1].startswith("Error: only 2 point(s)")
    assert _not_blank(_png(out))  # the points were drawn before the fit was refused
    curve_run(tmp_path, "long", 10)
    both = sgsbatch("fit", "long", "short", "--runs-dir", str(tmp_path), "--plot", str(out), "--json", "--halves", "0",
                    env=cli_env)
    assert both.returncode == 0 and "short: not fitted (too few points)" in both.stderr, both.stderr
    assert [r["run"] for r in json.loads(both.stdout)] == ["long"]
    data = write_fit_plot([curve_run(tmp_path, "short2", 3)], tmp_path / "s2.png")
    assert data["series"][0]["fit"] is None and "at least 4" in data["series"][0]["note"]
    assert len(data["series"][0]["generations"]) == 3


def test_report_is_self_contained_escaped_and_labelled(tmp_path: Path, cli_env: dict[str, str]) -> None:
    curve_run(tmp_path, "sim", 10)
    real = curve_run(tmp_path, "real", 10, simulated=False, costs=False)
    out = tmp_path / "r.html"
    proc = sgsbatch("report", "sim", "--runs-dir", str(tmp_path), "--out", str(out), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert re.search(r"<title>SIMULATED - sgsbatch report: sim</title>", page)
    assert "<script" not in page.lower() and not re.search(r"<img[^>]*onerror", page)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
    assert "<link" not in page.lower() and "@import" not in page
    assert "&lt;script&gt;console.error(&#x27;pwned&#x27;)&lt;/script&gt;" in page
    # fit; solve rate by round and by generations, pass@8, pass@1, round duration; funnel, guide scores
    assert page.count("data:image/png;base64,") == 8
    assert "GPU-hours" in page and "<td>1.50</td>" in page

    from sgsbatch.state.schema import Metric

    with real.db.write() as s:  # a GRPO-family Solver's trainer statistics (round/metrics.train_ratio)
        for i in range(10):
            for name, value in (("clip_fraction_low", 0.01), ("clip_fraction_high", 0.02 + i / 1000),
                                ("sampler_kl", 1e-3), ("seq_ratio_std", 0.01)):
                s.add(Metric(run_id=real.run_id, round=i, name=f"train/solver_{name}", value=value))
    page2, data = render_report([real])
    assert "SIMULATED" not in page2 and data["title"] == "sgsbatch report: real"
    assert 'alt="solver clip fractions per side"' in page2 and 'alt="solver sampler KL and sequence ratio"' in page2
    assert "solver clip fractions" not in page  # the run without them: no such figure
    assert "GPU/CPU-hours: not recorded" in page2
    rd = data["runs"][0]
    assert rd["fit"]["points_used"] == 9 and rd["fit"]["halves"] is not None
    ex = rd["examples"]
    assert {x["round"] for x in ex} == {7, 8, 9} and len(ex) == 3 * 3
    best = [x for x in ex if x["round"] == 9][0]  # highest guide score first
    assert best["review"]["score"] == pytest.approx(0.59) and (best["verified"], best["samples"]) == (2, 8)
    assert [x for x in ex if x["statement"] == HOSTILE][0]["review"] is None
    assert rd["funnel"]["generated"] == [100.0 - i for i in range(10)]

    before = (tmp_path / "sim" / "state.db").read_bytes()
    for args in (("report", "sim", "--out", str(tmp_path / "again.html")), ("fit", "sim", "--plot", str(tmp_path / "f.png"))):
        assert sgsbatch(*args, "--runs-dir", str(tmp_path), env=cli_env).returncode == 0
    assert (tmp_path / "sim" / "state.db").read_bytes() == before  # read-only on the run
    assert not list((tmp_path / "sim").glob("state.db-*"))  # no journal left behind either

    few = sgsbatch("report", "real", "--runs-dir", str(tmp_path), "--out", str(tmp_path / "e.html"),
                   "--examples", "1", env=cli_env)
    assert few.returncode == 0 and (tmp_path / "e.html").read_text().count("<pre>") == 3
    missing = sgsbatch("report", "nope", "--runs-dir", str(tmp_path), "--out", str(out), env=cli_env)
    assert missing.returncode == 2 and missing.stderr.startswith("Error: no run named 'nope'")


def _db_series(run_dir: Path, name: str) -> tuple[list[float], list[float]]:
    con = sqlite3.connect(f"file:{run_dir / 'state.db'}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT round, value FROM metrics WHERE name = ? ORDER BY round", (name,)).fetchall()
    finally:
        con.close()
    return [float(r) for r, _ in rows], [v for _, v in rows]


def test_report_overlays_the_runs_curves_diffs_their_configs_and_times_them(tmp_path: Path) -> None:
    """Two runs: one chart per metric with one line per run (the metrics rows read with sqlite3),
    the config keys that differ, and each run's round times, mean duration and finish."""
    fast = ("scaling.halves=0",)  # no random-half refits: this test is about the comparison
    a = curve_run(tmp_path, "alpha", 10, sets=fast)
    b = curve_run(tmp_path, "beta", 6, simulated=False, costs=False, sets=fast)
    page, data = render_report([a, b])
    curves = data["curves"]
    assert list(curves) == ["Cumulative solve rate by round", "Cumulative solve rate by generations",
                            "pass@8 of the targets", "pass@1 of the targets",
                            "Round duration (first task start to the round's end)"]
    for title, metric in (("Cumulative solve rate by round", "cumulative_solve_rate"), ("pass@1 of the targets", "pass@1"),
                          ("Round duration (first task start to the round's end)", "wall_s/round")):
        assert list(curves[title]) == ["alpha", "beta"]  # one line per run on one chart
        for name in ("alpha", "beta"):
            assert curves[title][name] == _db_series(tmp_path / name, metric), (title, name)
    assert curves["Round duration (first task start to the round's end)"]["beta"][1] == [round_seconds(i) for i in range(6)]
    assert page.count("data:image/png;base64,") == 1 + 5 + 2 * 2  # fit, 5 overlays, funnel and guide per run

    diff = data["config_diff"]
    assert diff["run.rounds"] == [10, 6] and diff["verification.backend"] == ["simulated", "lean"]
    assert "run.name" not in diff and "solver.lr" not in diff
    assert "<h2>Config differences</h2>" in page and "<td>verification.backend</td><td>&quot;simulated&quot;</td>" in page

    t = data["runs"][1]["timing"]
    assert t["round_s"] == {i: round_seconds(i) for i in range(6)}
    assert t["mean_round_s"] == pytest.approx(sum(round_seconds(i) for i in range(6)) / 6)
    assert t["finish_at"] == round_start(5) + round_seconds(5) and t["eta_s"] is None  # completed: no projection
    assert t["elapsed_s"] == t["finish_at"] - (round_start(0) - 60.0)
    assert "finished 2025-06-15" in page and "<th>mean round</th>" in page
    assert diff_table([a]) == ("", {})  # one run: no differences section


def test_report_config_keys_are_validated(tmp_path: Path) -> None:
    from sgsbatch.config.loading import load_config
    from sgsbatch.config.schema import Config
    from sgsbatch.errors import ConfigError

    rc = Config().report
    assert (rc.recent_rounds, rc.examples, rc.score_bins, rc.max_statement_chars) == (3, 5, 20, 600)
    tiny = Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml"
    path = tmp_path / "bad.toml"
    for text, key, words in [("examples = -1", "report.examples", ">= 0"),
                             ("score_bins = 0", "report.score_bins", ">= 1"),
                             ("max_statement_chars = 5", "report.max_statement_chars", ">= 20"),
                             ("bogus = 1", "report.bogus", "unknown key")]:
        path.write_text(f'inherit = "{tiny}"\n[report]\n{text}\n')
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert str(path) in str(info.value) and key in str(info.value) and words in str(info.value)


# ----------------------------------------------------------------------------- headless Chromium
PROBE = """<script>
window.__errors = [];
window.addEventListener("error", function (e) {
  window.__errors.push(e.message || ("failed to load " + ((e.target && (e.target.src || e.target.href)) || "?")));
}, true);
["error", "warn"].forEach(function (k) {
  var orig = console[k];
  console[k] = function () { window.__errors.push(k + ": " + Array.prototype.join.call(arguments, " ")); orig.apply(console, arguments); };
});
window.addEventListener("load", function () {
  var imgs = Array.prototype.map.call(document.images, function (im) {
    var r = im.getBoundingClientRect();
    return {alt: im.alt, ok: im.complete && im.naturalWidth > 0, x: r.left, y: r.top + window.scrollY,
            w: r.width, h: r.height};
  });
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify({errors: window.__errors, images: imgs,
                                    height: document.documentElement.scrollHeight});
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("SGSBATCH_REQUIRE_CHROMIUM"):
            pytest.fail("SGSBATCH_REQUIRE_CHROMIUM is set but no chromium is installed: apt-get install chromium")
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium); CI sets SGSBATCH_REQUIRE_CHROMIUM=1")
    return exe


def _browse(exe: str, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
           "--force-device-scale-factor=1", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
           f"--user-data-dir={page.parent / 'chromium-profile'}", *args, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _probe(exe: str, page: Path) -> tuple[dict[str, Any], list[str]]:
    """Load `page` with the probe injected: what the probe saw, and the console lines Chromium logged."""
    probed = page.with_name("probed-" + page.name)
    probed.write_text(page.read_text().replace("<head>", "<head>" + PROBE, 1))
    proc = _browse(exe, probed, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert m, "the probe did not run: " + proc.stderr[-2000:]
    import html

    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return json.loads(html.unescape(m.group(1))), console


def test_report_opens_in_headless_chromium_and_shows_its_plots(tmp_path: Path) -> None:
    exe = _chromium()
    # the probe itself catches errors: a control page with a console error and a missing image
    control = tmp_path / "control.html"
    control.write_text('<!DOCTYPE html><html><head></head><body><script>console.error("ctl")</script>'
                       '<img alt="gone" src="missing.png"></body></html>')
    seen, console = _probe(exe, control)
    assert any("ctl" in e for e in seen["errors"]) and any("missing.png" in e for e in seen["errors"]), seen
    assert seen["images"][0]["ok"] is False and console, console

    h = curve_run(tmp_path, "shown", 12)
    out = tmp_path / "report.html"
    write_report([h], out)
    seen, console = _probe(exe, out)
    assert seen["errors"] == [] and console == [], (seen["errors"], console)
    imgs = seen["images"]
    assert len(imgs) == 8 and all(i["ok"] and i["w"] > 300 and i["h"] > 150 for i in imgs), imgs

    shot = tmp_path / "shot.png"
    width, height = 1280, int(seen["height"]) + 20
    proc = _browse(exe, tmp_path / ("probed-" + out.name), f"--screenshot={shot}", f"--window-size={width},{height}")
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    pixels = _png(shot)
    assert pixels.shape[0] >= height - 1 and pixels.shape[1] == width
    for im in imgs:
        x0, y0 = int(im["x"]), int(im["y"])
        area = pixels[y0:y0 + int(im["h"]), x0:x0 + int(im["w"])]
        assert area.size and _not_blank(area), im["alt"]
    fit = imgs[0]  # the scaling-law figure stands alone on its row: right of it the page is empty
    beside = pixels[int(fit["y"]):int(fit["y"] + fit["h"]), int(fit["x"] + fit["w"]) + 20:width - 20]
    assert beside.size and not _not_blank(beside)  # the check can say "blank"


def test_report_draws_the_solvers_curves_per_optimizer_step(tmp_path: Path) -> None:
    """The Solver's section per optimizer step (views/train_step_report.py): the points of the rounds that
    ended, at the global step, the last record of a step done twice; a round still training is left out."""
    from sgsbatch.run.progress import record_train_step, train_steps_file
    from sgsbatch.state.schema import Metric

    h = curve_run(tmp_path, "steps", 3)
    assert render_report([h])[1]["runs"][0]["train_steps"] == {}  # no steps recorded: no section
    counts = {0: 2, 1: 3, 2: 2}
    with h.db.write() as s:
        for r, n in counts.items():
            s.add(Metric(run_id=h.run_id, round=r, name="train/solver_steps", value=float(n)))
    for r in (0, 1, 2, 3):  # round 3 is still training (no train/solver_steps yet)
        ks = [1, 2, 2, 3] if r == 1 else list(range(1, counts.get(r, 1) + 1))  # round 1: step 2 done twice
        for j, k in enumerate(ks):
            record_train_step(train_steps_file(h.paths, r), {
                "role": "solver", "step": k, "steps": counts.get(r, 1), "loss": 10 * r + k + j / 10, "tokens": 50,
                "grad_norm": 1.0 + k, "clip_fraction": 0.1, "clip_fraction_low": 0.04, "clip_fraction_high": 0.06,
                "sampler_kl": 1e-3 * k, "ratio_std": 0.01, "ref_kl": None})
        record_train_step(train_steps_file(h.paths, r), {"role": "conjecturer", "step": 1, "steps": 1, "loss": 5.0})
    page, data = render_report([h])
    got = data["runs"][0]["train_steps"]
    assert got["loss"] == ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [1.0, 2.1, 11.0, 12.2, 13.3, 21.0, 22.1])  # 12.1: replaced
    assert got["grad_norm"][0] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0] and "ref_kl" not in got
    for alt in ("Solver: loss per optimizer step", "Solver: tokens clipped per optimizer step",
                "Solver: KL and ratio spread per optimizer step", "Solver: gradient norm per optimizer step"):
        assert f'alt="{alt}' in page, alt
    assert "<h3>Solver per optimizer step</h3>" in page
