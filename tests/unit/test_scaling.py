"""The scaling-law fit of the cumulative solve rate (`sgsbatch fit`): recovery, dropping, R0, errors, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sgsbatch.config.loading import load_config
from sgsbatch.config.schema import Config
from sgsbatch.errors import ConfigError, SgsError
from sgsbatch.logic.data import Target
from sgsbatch.run.handle import create_run, open_run
from sgsbatch.state.schema import Metric
from sgsbatch.views.fit import NotEnoughPoints, fit_scaling_law, random_halves, read_points

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import TINY, sgsbatch  # noqa: E402

R0, A, C_MID, B = 0.30, 0.671, 1_252_336.0, 0.585
PER_ROUND = 45_000.0  # about one full-scale round's generations


def curve(c: np.ndarray, r0: float = R0, a: float = A, c_mid: float = C_MID, b: float = B) -> np.ndarray:
    return r0 + (a - r0) / (1.0 + (c_mid / c) ** b)


def points(rounds: int, noise: float = 0.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Generations so far after each round, and solve rates on the curve; round 0 is exactly R0."""
    c = PER_ROUND * np.arange(1, rounds + 1) ** 1.3  # later rounds generate more (more conjectures)
    r = curve(c) + np.random.default_rng(seed).normal(0.0, noise, rounds)
    r[0] = R0
    return c, r


def test_recovers_the_parameters_from_exact_points() -> None:
    c, r = points(60)
    f = fit_scaling_law(c, r)
    assert f.r0 == R0 and f.converged
    assert f.a == pytest.approx(A, rel=1e-6)
    assert f.c_mid == pytest.approx(C_MID, rel=1e-5)
    assert f.b == pytest.approx(B, rel=1e-5)
    assert f.rms < 1e-8
    assert f.points_used + f.points_dropped == 60


def test_recovers_the_parameters_from_noisy_points() -> None:
    c, r = points(120, noise=0.002, seed=3)
    f = fit_scaling_law(c, r)
    assert f.a == pytest.approx(A, abs=0.01)
    assert f.c_mid == pytest.approx(C_MID, rel=0.15)
    assert f.b == pytest.approx(B, rel=0.1)
    assert f.rms == pytest.approx(0.002, rel=0.3)


def test_point_order_does_not_matter() -> None:
    c, r = points(40, noise=0.002, seed=1)
    perm = np.random.default_rng(0).permutation(c.size)
    f1, f2 = fit_scaling_law(c, r), fit_scaling_law(c[perm], r[perm])
    assert f1.r0 == f2.r0 == R0
    assert f1.a == pytest.approx(f2.a, abs=1e-9)


def test_points_below_min_generations_are_dropped() -> None:
    c, r = points(40)
    below = int(np.sum(c < 100_000))
    assert below >= 1
    f = fit_scaling_law(c, r)
    assert (f.points_used, f.points_dropped, f.min_generations) == (40 - below, below, 100_000)
    f = fit_scaling_law(c, r, min_generations=0)
    assert (f.points_used, f.points_dropped) == (40, 0)
    # Points far off the curve below the threshold do not move the fit (only round 0 sets R0).
    bad = r.copy()
    bad[1:below] = 0.99
    assert fit_scaling_law(c, bad).a == pytest.approx(A, rel=1e-6)
    # A point with no generations has no log C: dropped even without a threshold.
    f = fit_scaling_law(np.concatenate([[0.0], c]), np.concatenate([[R0], r]), min_generations=0)
    assert (f.points_used, f.points_dropped) == (40, 1)


def test_r0_is_the_first_observed_value_even_when_dropped() -> None:
    c, r = points(40)
    r2 = r.copy()
    r2[0] = 0.25  # round 0 (below the threshold) moves R0, and with it the fit
    f = fit_scaling_law(c, r2)
    assert f.r0 == 0.25 and f.points_dropped >= 1
    assert f.a != pytest.approx(A, abs=1e-4)
    assert fit_scaling_law(c, r2, r0=R0).a == pytest.approx(A, rel=1e-6)  # an explicit R0 wins


def test_too_few_points_names_the_count_the_key_and_the_remedy() -> None:
    c = np.array([50_000.0, 90_000.0, 150_000.0, 250_000.0, 400_000.0])
    r = curve(c)
    with pytest.raises(NotEnoughPoints) as info:
        fit_scaling_law(c, r)
    msg = str(info.value)
    assert "only 3 point(s)" in msg and "2 dropped" in msg and "at least 4" in msg
    assert "scaling.min_generations" in msg and "--min-generations" in msg and "run more rounds" in msg
    assert isinstance(info.value, SgsError) and isinstance(info.value, ValueError)
    assert fit_scaling_law(c, r, min_generations=50_000).points_used == 5
    # 3 points in all (a 3-round run): a lower threshold cannot help, so it is not advised
    with pytest.raises(NotEnoughPoints) as few:
        fit_scaling_law(c[:3], r[:3])
    assert "--min-generations" not in str(few.value) and "only more rounds help" in str(few.value)
    assert "run.rounds=N`, N >= 4" in str(few.value)
    with pytest.raises(NotEnoughPoints, match="no points"):
        fit_scaling_law([], [])
    with pytest.raises(ValueError, match="one of each"):
        fit_scaling_law([1.0, 2.0], [0.1])


def test_random_halves_are_deterministic_for_a_seed() -> None:
    c, r = points(80, noise=0.003, seed=5)
    h1 = random_halves(c, r, halves=6, seed=7)
    h2 = random_halves(c, r, halves=6, seed=7)
    h3 = random_halves(c, r, halves=6, seed=8)
    assert h1 == h2
    assert h1.a_values != h3.a_values
    assert len(h1.a_values) == 6 and h1.points_per_half == fit_scaling_law(c, r).points_used // 2
    assert h1.a_mean == pytest.approx(float(np.mean(h1.a_values)))
    assert h1.a_std == pytest.approx(float(np.std(h1.a_values, ddof=1)))
    assert h1.a_mean == pytest.approx(A, abs=0.03) and 0 < h1.a_std < 0.05
    with pytest.raises(NotEnoughPoints, match="random halves need at least 8"):
        random_halves(c[:8], r[:8], halves=3)


def test_scaling_config_defaults_and_validation(tmp_path: Path) -> None:
    sc = Config().scaling
    assert (sc.min_generations, sc.halves) == (100_000, 20)
    assert (sc.paper_asymptote, sc.paper_c_mid, sc.paper_b) == (0.671, 1_252_336, 0.585)
    assert (sc.paper_halves_asymptote, sc.paper_halves_std) == (0.676, 0.011)
    path = tmp_path / "bad.toml"
    for text, key, words in [("[scaling]\nmin_generations = -1\n", "scaling.min_generations", ">= 0"),
                             ("[scaling]\nhalves = 2.5\n", "scaling.halves", "integer"),
                             ("[scaling]\npaper_asymptote = 67.1\n", "scaling.paper_asymptote", "[0, 1]"),
                             ("[scaling]\nbogus = 1\n", "scaling.bogus", "unknown key")]:
        path.write_text(f'inherit = "{TINY}"\n{text}')
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert str(path) in str(info.value) and key in str(info.value) and words in str(info.value)


def _run_with_curve(runs_dir: Path, name: str, rounds: int, extra: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    cfg = load_config(TINY, [f"run.runs_dir={runs_dir}", f"run.name={name}", "run.executor=local",
                             f"run.rounds={rounds}", *extra])
    targets = [Target(f"t{i}", "import Mathlib\n", f"theorem t{i} : 1 + 1 = 2 := by") for i in range(4)]
    h = create_run(cfg, targets, "local")
    c, r = points(rounds, noise=0.001, seed=11)
    with h.db.write() as s:
        for i in range(rounds):
            for metric, value in (("cumulative_solve_rate", r[i]), ("generations/total", c[i]),
                                  ("generations/round", c[i] - (c[i - 1] if i else 0.0)), ("pass@8", 0.5)):
                s.add(Metric(run_id=h.run_id, round=i, name=metric, value=float(value)))
        s.add(Metric(run_id=h.run_id, round=rounds, name="generations/round", value=1.0))  # a round in progress
    return c, r


def test_read_points_pairs_the_metrics_of_completed_rounds(tmp_path: Path) -> None:
    c, r = _run_with_curve(tmp_path, "pts", 5)
    pts = read_points(open_run(tmp_path, "pts"))
    assert [p.round for p in pts] == [0, 1, 2, 3, 4]
    assert [p.generations for p in pts] == pytest.approx(list(c))
    assert [p.solve_rate for p in pts] == pytest.approx(list(r))


def test_fit_command_json_on_a_run_database(tmp_path: Path, cli_env: dict[str, str]) -> None:
    c, r = _run_with_curve(tmp_path, "curve", 30, ("scaling.halves=5",))
    proc = sgsbatch("fit", "curve", "--runs-dir", str(tmp_path), "--json", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    direct = fit_scaling_law(c, r)
    assert out["run"] == "curve" and out["r0"] == R0 and out["rounds"] == 30
    assert (out["points_used"], out["points_dropped"]) == (direct.points_used, direct.points_dropped)
    assert out["a"] == pytest.approx(A, abs=0.02)
    assert out["c_mid"] == pytest.approx(C_MID, rel=0.3)
    assert out["b"] == pytest.approx(B, rel=0.15)
    assert out["a"] == pytest.approx(direct.a, rel=1e-9)
    assert out["halves"]["halves"] == 5 and out["halves"]["seed"] == 0
    assert out["paper"] == {"a": 0.671, "c_mid": 1252336.0, "b": 0.585, "halves_a_mean": 0.676,
                            "halves_a_std": 0.011}

    text = sgsbatch("fit", "curve", "--runs-dir", str(tmp_path), "--halves", "0", env=cli_env)
    assert text.returncode == 0, text.stderr
    assert "C_mid" in text.stdout and "no random-half refits" in text.stdout
    assert "paper    SGS: A = 67.1%, C_mid = 1,252,336, B = 0.585" in text.stdout

    few = sgsbatch("fit", "curve", "--runs-dir", str(tmp_path), "--min-generations", "1000000000", env=cli_env)
    assert few.returncode == 1
    assert few.stderr.startswith("Error: only 0 point(s)") and "scaling.min_generations" in few.stderr
    assert "Traceback" not in few.stderr

    unknown = sgsbatch("fit", "nope", "--runs-dir", str(tmp_path), env=cli_env)
    assert unknown.returncode == 2 and unknown.stderr.startswith("Error: no run named 'nope'")


def test_fit_help_has_an_example_and_imports_nothing_heavy() -> None:
    code = ("import sys, json\nfrom click.testing import CliRunner\nfrom sgsbatch.cli import main\n"
            "r = CliRunner().invoke(main, ['fit', '--help'])\n"
            "heavy = [m for m in ('torch', 'vllm', 'deepspeed', 'transformers', 'numpy') if m in sys.modules]\n"
            "print(json.dumps({'code': r.exit_code, 'out': r.output, 'heavy': heavy}))\n")
    res = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert res["code"] == 0 and "Example" in res["out"] and "sgsbatch fit" in res["out"]
    assert res["heavy"] == []
