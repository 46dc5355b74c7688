"""`sgsbatch export`'s dataset without a run: the two configs in the Hub's layout load with
`datasets.load_dataset(DIR, config)` offline, a failed Guide review carries its flag and reason,
and `--push-to-hub` pushes each config and then the card (the Hub API replaced by a recording
stand-in: the Hub cannot be reached here). The export of a real run, and `proofs --json | verify -`,
are in tests/integration/test_proofs_command.py.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from sgsbatch.errors import RunError
from sgsbatch.ops import export

HEADER = "import Mathlib\n"
PROOFS = [
    {"id": "t0#0", "problem_id": "t0", "is_conjecture": False, "round": 0, "sample": 3, "slot": 0,
     "header": HEADER, "statement": "theorem t0 : 1 + 1 = 2 := by", "proof": "\n  norm_num",
     "simulated": "verifier"},
    {"id": "c1#0", "problem_id": "c1", "is_conjecture": True, "round": 1, "sample": 0, "slot": 0,
     "header": HEADER, "statement": "theorem c1 : 2 + 2 = 4 := by", "proof": "\n  norm_num",
     "simulated": "verifier"},
]


def _lineage(cid: str, guide: dict[str, Any] | None, weight: float | None = None) -> dict[str, Any]:
    return {"conjecture_id": cid, "target_id": "t0", "round": 1, "statement": f"theorem {cid} : True := by",
            "guide": guide, "verified": 1, "attempts": 8, "solve_rate": 1 / 8, "proof": "trivial",
            "training_weight": weight, "simulated": "verifier"}


GOOD = {"parsed": True, "reason": None, "relevance": 4.0, "redundant": 0.0, "complexity": 1.0, "score": 6.0}
# a failed parse: its sub-scores and score are the round's stand-ins (logic/review.py fill_failed)
FAILED = {"parsed": False, "reason": "missing_relevance", "relevance": 4.0, "redundant": 0.0, "complexity": 1.0,
          "score": 6.0}
CONJ = [export.conjecture_row(_lineage("c1", GOOD, 0.5)), export.conjecture_row(_lineage("c2", FAILED)),
        export.conjecture_row(_lineage("c3", None))]


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)


def _write(out: Path, proofs: list[dict[str, Any]] = PROOFS, conj: list[dict[str, Any]] = CONJ) -> Path:
    out.mkdir()
    export.write_export(out, {"proofs": proofs, "conjectures": conj}, "demo",
                        f"{export.CARD_TITLE}demo: proofs and conjectures\n")
    return out


def _same(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_failed_review_carries_its_flag_and_reason() -> None:
    good, failed, unreviewed = CONJ
    assert (good["reviewed"], good["guide_parsed"], good["guide_failure"]) == (True, True, "")
    assert (good["guide_relevance"], good["guide_score"], good["training_weight"]) == (4.0, 6.0, 0.5)
    assert (failed["reviewed"], failed["guide_parsed"], failed["guide_failure"]) == (True, False, "missing_relevance")
    assert all(math.isnan(failed[f"guide_{k}"]) for k in export.GUIDE_KEYS)  # stand-ins, not measurements
    assert failed["guide_score"] == 6.0 and math.isnan(failed["training_weight"])  # the reward's stand-in
    assert (unreviewed["reviewed"], unreviewed["guide_parsed"], unreviewed["guide_failure"]) == (False, False, "")
    assert math.isnan(unreviewed["guide_score"])


def test_both_configs_load_with_load_dataset(tmp_path: Path) -> None:
    import datasets

    out = _write(tmp_path / "ds")
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "config_name: proofs" in card and "config_name: conjectures" in card
    assert export.is_export(out)
    for config, rows in (("proofs", PROOFS), ("conjectures", CONJ)):
        assert (out / export.data_file(config)).is_file()
        dd = datasets.load_dataset(str(out), config, cache_dir=str(out.parent / "cache"))
        assert list(dd) == ["train"]
        got = dd["train"]
        assert got.column_names == list(export.FEATURES[config])
        assert len(got) == len(rows)
        for want, have in zip(rows, got, strict=True):
            assert all(_same(want[k], have[k]) for k in export.FEATURES[config]), (want, have)
    default = datasets.load_dataset(str(out), cache_dir=str(out.parent / "cache"))  # the card names `proofs` the default
    assert len(default["train"]) == len(PROOFS) and "proof" in default["train"].column_names


def test_a_new_export_in_the_same_directory_loads_its_own_rows(tmp_path: Path) -> None:
    """`datasets` keys its cache of a local copy on the card's metadata, not on the files: the
    card's sizes change with the rows, so the earlier export's cached rows are not served."""
    import shutil

    import datasets

    cache = str(tmp_path / "cache")
    out = _write(tmp_path / "ds")
    assert len(datasets.load_dataset(str(out), "conjectures", cache_dir=cache)["train"]) == len(CONJ)
    shutil.rmtree(out)
    _write(out, conj=CONJ[:1])
    assert len(datasets.load_dataset(str(out), "conjectures", cache_dir=cache)["train"]) == 1


def test_a_config_without_rows_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    out = _write(tmp_path / "ds", conj=[])
    card = (out / "README.md").read_text()
    assert "config_name: conjectures" not in card and not (out / "conjectures").exists()
    assert len(datasets.load_dataset(str(out), "proofs", cache_dir=str(tmp_path / "cache"))["train"]) == len(PROOFS)
    with pytest.raises(ValueError, match="conjectures"):
        datasets.load_dataset(str(out), "conjectures", cache_dir=str(tmp_path / "cache"))
    empty = _write(tmp_path / "empty", proofs=[], conj=[])
    assert export.is_export(empty) and "configs:" not in (empty / "README.md").read_text()
    monkeypatch.setattr(export, "hub_token", lambda: "hf_test")
    with pytest.raises(RunError, match="nothing to push"):
        export.push_to_hub(empty, "me/demo")


def test_push_to_hub_pushes_each_config_then_the_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets
    import huggingface_hub

    out = _write(tmp_path / "ds")
    calls: list[tuple[Any, ...]] = []

    def fake_push(self: datasets.Dataset, repo_id: str, **kw: Any) -> None:
        calls.append(("push_to_hub", repo_id, kw, self.num_rows, tuple(self.column_names)))

    class FakeApi:
        def __init__(self, token: str | None = None) -> None:
            calls.append(("HfApi", token))

        def upload_file(self, **kw: Any) -> None:
            calls.append(("upload_file", kw))

    monkeypatch.setattr(datasets.Dataset, "push_to_hub", fake_push)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    export.push_to_hub(out, "me/demo")
    assert calls == [
        ("push_to_hub", "me/demo", {"config_name": "proofs", "split": "train", "data_dir": "proofs", "token": "hf_test"},
         len(PROOFS), tuple(export.FEATURES["proofs"])),
        ("push_to_hub", "me/demo", {"config_name": "conjectures", "split": "train", "data_dir": "conjectures",
                                    "token": "hf_test"}, len(CONJ), tuple(export.FEATURES["conjectures"])),
        ("HfApi", "hf_test"),
        ("upload_file", {"path_or_fileobj": str(out / "README.md"), "path_in_repo": "README.md", "repo_id": "me/demo",
                         "repo_type": "dataset"}),
    ]
    # the card's data files are where push_to_hub puts each config's shards
    assert all(f"path: {c}/train-*" in (out / "README.md").read_text() for c in export.CONFIGS)


def test_push_to_hub_without_a_token_or_of_a_partial_export_is_refused(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = _write(tmp_path / "ds")
    monkeypatch.setattr(export, "hub_token", lambda: None)
    with pytest.raises(RunError, match="no Hugging Face token"):
        export.push_to_hub(out, "me/demo")
    monkeypatch.setattr(export, "hub_token", lambda: "hf_test")
    (out / export.data_file("conjectures")).unlink()
    with pytest.raises(RunError, match="not a complete export"):
        export.push_to_hub(out, "me/demo")


def test_is_export_knows_only_exports(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "README.md").write_text("# my notes\n")
    assert not export.is_export(other)
    old = tmp_path / "old"
    old.mkdir()
    (old / "dataset_dict.json").write_text("{}")  # an export from before the configs
    assert export.is_export(old)


PUSH = """import sys
from pathlib import Path
from sgsbatch.cli.command_line import clean_errors
from sgsbatch.ops import export
clean_errors(export.push_to_hub)(Path(sys.argv[1]), sys.argv[2])
"""


@pytest.mark.parametrize("offline", [False, True], ids=["closed-port", "hub-offline"])
def test_a_push_that_reaches_no_hub_is_one_line_naming_the_repo_and_the_local_copy(tmp_path: Path,
                                                                                    offline: bool) -> None:
    """A real push (no stand-in) to a Hub on a closed local port, and one with the Hub set offline: exit 1,
    one line naming the repo, the reason and the export on disk; no traceback, and no hang (timeouts of 5 s)."""
    import os
    import subprocess
    import sys

    out = _write(tmp_path / "ds")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_TOKEN="hf_test", HF_HOME=str(tmp_path / "hf-home"), HF_ENDPOINT="http://127.0.0.1:9",
               HF_HUB_ETAG_TIMEOUT="5", HF_HUB_DOWNLOAD_TIMEOUT="5", PYTHONPATH=str(Path(__file__).parents[2]),
               **({"HF_HUB_OFFLINE": "1"} if offline else {}))
    proc = subprocess.run([sys.executable, "-c", PUSH, str(out), "me/demo"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]  # above it, only the datasets library's progress bars
    assert last.startswith("Error: --push-to-hub me/demo: the push to the Hugging Face Hub failed ("), proc.stderr
    assert f"the export is complete on disk in {out}" in last
    if not offline:
        assert "Connection refused" in last
    assert all((out / export.data_file(c)).is_file() for c in export.CONFIGS)  # the local copy is untouched


def test_a_hub_failure_is_a_typed_error_and_other_errors_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from sgsbatch.errors import HubError

    out = _write(tmp_path / "ds")
    monkeypatch.setattr(export, "hub_token", lambda: "hf_test")
    for raised, expected in ((ConnectionError("no route to host"), HubError),
                             (OSError(errno.ENOSPC, "No space left on device"), OSError),  # the CLI's disk-full line
                             (KeyError("bug"), KeyError)):  # a bug stays a traceback
        def fail(*_a: Any, _e: BaseException = raised, **_k: Any) -> None:
            raise _e

        monkeypatch.setattr(export, "_push", fail)
        with pytest.raises(expected) as got:
            export.push_to_hub(out, "me/demo")
        assert type(got.value) is not HubError or "me/demo" in str(got.value) and str(out) in str(got.value)


def test_public_config_keeps_no_absolute_path(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "demo"
    text = "\n".join([
        f'runs_dir = "{tmp_path / "runs"}"',
        f'source = "{Path.home() / "data" / "targets.jsonl"}"  # was ~/data',
        f'log = "{run_dir / "logs" / "x.log"}"',
        f'root = "{run_dir}"',
        'cache_dir = "~/.cache/sgsbatch/tiny-random"',
        'setup = "source /work/venv/bin/activate && cd /scratch/me"',
        'model = "LukeBailey181Pub/D_3k"',
        'url = "https://huggingface.co/datasets/x/y"',
        'rel = "../sgsbatch/embedded/tiny_targets.jsonl"',
        "ratio = 1/2  # a / b",
    ])
    got = export.public_config(text, run_dir).splitlines()
    assert got == [
        'runs_dir = "runs"',
        'source = "targets.jsonl"  # was data',
        'log = "logs/x.log"',
        'root = "."',
        'cache_dir = "tiny-random"',
        'setup = "source activate && cd me"',
        'model = "LukeBailey181Pub/D_3k"',
        'url = "https://huggingface.co/datasets/x/y"',
        'rel = "../sgsbatch/embedded/tiny_targets.jsonl"',
        "ratio = 1/2  # a / b",
    ]


def test_the_card_of_a_real_run_publishes_no_absolute_path_of_this_machine(tmp_path: Path) -> None:
    import re

    from sgsbatch.config.loading import load_config
    from sgsbatch.logic.data import Target
    from sgsbatch.run.handle import create_run

    repo = Path(__file__).resolve().parents[2]
    cfg = load_config(repo / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path / 'runs'}", "run.name=pub",
                                                    f"data.source={repo / 'sgsbatch' / 'embedded' / 'tiny_targets.jsonl'}",
                                                    f"models.tiny.cache_dir={Path.home() / '.cache' / 'tiny'}"])
    h = create_run(cfg, [Target("t0", HEADER, "theorem t0 : True := by")], "local")
    assert str(tmp_path) in h.paths.config.read_text()  # the frozen config does hold them
    export.export_run(h, tmp_path / "ds")
    card = (tmp_path / "ds" / "README.md").read_text()
    for machine in (str(tmp_path), str(tmp_path.resolve()), str(Path.home()), str(repo), "/work", "/tmp"):
        assert machine not in card, machine
    assert not re.search(r"(?<![\w.:/~-])/(?:tmp|work|home|root|scratch)\b", card)
    assert 'runs_dir = "runs"' in card and 'source = "tiny_targets.jsonl"' in card
