"""Target loading: the shared D_3k files, JSONL, a saved Hugging Face dataset, malformed rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sgsbatch.logic.data import DataError, Rejected, Target, load_targets

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
D3K = SHARED / "data" / "d3k" / "D_3k_prover_dataset.json"
D3K_SMALL = SHARED / "data" / "d3k" / "D_3k_small_prover_dataset.json"
needs_d3k = pytest.mark.skipif(not D3K.is_file(), reason=f"shared D_3k data not found at {D3K}")

HEADER = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"
)


def row(id_: str, theorem: str | None = None) -> dict[str, str]:
    return {"id": id_, "header": HEADER, "theorem": theorem or f"theorem t_{id_} : 1 + 1 = 2 := by"}


@needs_d3k
def test_full_d3k_loads_all_rows() -> None:
    result = load_targets(D3K)
    assert len(result.targets) == 3323
    assert result.rejected == []
    assert len(set(result.ids)) == 3323
    first = result.targets[0]
    assert first.id == "91bb00d1"
    assert first.header.startswith("import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen ")
    assert all(t.theorem.endswith(":= by") and len(t.id) == 8 for t in result.targets)


@needs_d3k
def test_small_d3k_and_limit() -> None:
    small = load_targets(D3K_SMALL, fmt="reference_json")
    assert len(small.targets) == 100 and small.rejected == []
    assert small.targets[0].id == "785caec0"
    assert load_targets(D3K, limit=10).ids == load_targets(D3K).ids[:10]


def test_jsonl_and_each_malformed_kind(tmp_path: Path) -> None:
    lines = [
        json.dumps(row("aaaa0001")),
        json.dumps({"id": "aaaa0002", "header": HEADER}),  # missing theorem
        json.dumps(row("aaaa0003", "theorem x : 1 = 1 := rfl")),  # does not end in := by
        json.dumps(row("aaaa0001")),  # duplicate id
        json.dumps(["not", "an", "object"]),  # line 5
        "{bad json",  # line 6
        "",
        json.dumps({"header": HEADER, "theorem": "theorem y : True := by"}),  # line 8: no id
        json.dumps({"id": "aaaa0009", "header": 3, "theorem": "theorem z : True := by"}),
        json.dumps(row("aaaa0010", "theorem w : True := by  \n")),  # trailing whitespace is fine
    ]
    path = tmp_path / "targets.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = load_targets(path)
    assert result.ids == ["aaaa0001", "aaaa0010"]
    assert result.targets[1] == Target("aaaa0010", HEADER, "theorem w : True := by")
    assert [r.id_or_line for r in result.rejected] == [
        "aaaa0002",
        "aaaa0003",
        "aaaa0001",
        "line 5",
        "line 6",
        "line 8",
        "aaaa0009",
    ]
    reasons = [r.reason for r in result.rejected]
    assert reasons[0] == "missing field 'theorem'"
    assert reasons[1] == "theorem does not end in ':= by'"
    assert reasons[2] == "duplicate id"
    assert reasons[3].startswith("not a JSON object")
    assert reasons[4].startswith("bad JSON")
    assert reasons[5] == "missing field 'id'"
    assert reasons[6] == "field 'header' is not a string"

    with pytest.raises(DataError) as info:
        load_targets(path, strict=True)
    message = str(info.value)
    assert str(path) in message
    for name in ("aaaa0002", "aaaa0003", "line 5", "line 6", "line 8", "aaaa0009"):
        assert name in message
    assert isinstance(info.value, ValueError)


def test_reference_layout_key_mismatch_and_duplicate_keys(tmp_path: Path) -> None:
    good = json.dumps(row("bbbb0001"))
    text = (
        '{"iterations": [], "target_statements": {'
        f'"bbbb0001": {good}, '
        f'"bbbb0002": {json.dumps(row("cccc0000"))}, '
        f'"bbbb0001": {json.dumps(row("bbbb0001", "theorem other : True := by"))}, '
        '"bbbb0003": "not an object"}}'
    )
    path = tmp_path / "ref.json"
    path.write_text(text, encoding="utf-8")
    result = load_targets(path)
    assert result.ids == ["bbbb0001"]
    assert result.targets[0].theorem == "theorem t_bbbb0001 : 1 + 1 = 2 := by"  # the first one wins
    assert Rejected("bbbb0001", "duplicate key in target_statements") in result.rejected
    assert Rejected("cccc0000", "id does not match its key 'bbbb0002'") in result.rejected
    assert any(r.id_or_line == "key bbbb0003" for r in result.rejected)


def test_reference_layout_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"rows": []}', encoding="utf-8")
    with pytest.raises(DataError, match="target_statements"):
        load_targets(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataError, match="not valid JSON"):
        load_targets(path)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        load_targets(missing)
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_targets(tmp_path / "nope.jsonl", fmt="jsonl")
    with pytest.raises(ValueError, match="unknown format"):
        load_targets(missing, fmt="csv")


def test_saved_hugging_face_dataset(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = [row("dddd0001"), row("dddd0002"), row("dddd0003", "theorem bad : True := trivial")]
    ds = datasets.Dataset.from_list(rows)
    ds.save_to_disk(str(tmp_path / "plain"))
    result = load_targets(tmp_path / "plain")
    assert result.ids == ["dddd0001", "dddd0002"]
    assert result.rejected == [Rejected("dddd0003", "theorem does not end in ':= by'")]

    datasets.DatasetDict({"train": ds}).save_to_disk(str(tmp_path / "dict"))
    assert load_targets(tmp_path / "dict", fmt="hf", limit=1).ids == ["dddd0001"]
    with pytest.raises(DataError, match="no split"):
        load_targets(tmp_path / "dict", fmt="hf", split="test")


def test_data_split_key_picks_the_split(tmp_path: Path) -> None:
    """`data.split` reaches the loader: the run's targets come from the split the config names."""
    datasets = pytest.importorskip("datasets")
    from sgsbatch.ops.control import plan

    datasets.DatasetDict({"train": datasets.Dataset.from_list([row("dddd0001"), row("dddd0002")]),
                          "test": datasets.Dataset.from_list([row("eeee0001")])}).save_to_disk(str(tmp_path / "dd"))
    tiny = Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml"
    base = [f"data.source={tmp_path / 'dd'}", "data.format=hf", "run.executor=local"]
    for split, ids in (("train", ["dddd0001", "dddd0002"]), ("test", ["eeee0001"])):
        p, targets = plan(tiny, [*base, f"data.split={split}"], load_remote=True)
        assert [t.id for t in targets] == ids and p.targets == len(ids)


def _prover_row(name: str, statement: str, split: str | None) -> dict[str, object]:
    """A row of the provers' layout (DeepSeek-Prover's datasets/*.jsonl), written here."""
    out: dict[str, object] = {"name": name, "header": "import Mathlib\n\n", "informal_prefix": "/-- x -/\n",
                              "formal_statement": statement, "goal": "⊢ True"}
    if split is not None:
        out["split"] = split
    return out


def test_provers_layout_and_its_split_column(tmp_path: Path) -> None:
    """miniF2F's one file of `valid` and `test` rows; ProofNet's statements end in `:=`, PutnamBench's some in
    `:=` and `by` on two lines, others in `:= by sorry`."""
    rows = [_prover_row("v1", "theorem v1 : 1 + 1 = 2 := by\n", "valid"),
            _prover_row("t1", "theorem t1 : 2 + 2 = 4 := by\n", "test"),
            _prover_row("t2", "theorem t2 (G : Type) [Group G] : True :=", "test"),
            _prover_row("t3", "theorem t3 : True := by sorry", "test"),
            _prover_row("t4", "theorem t4 : True := trivial", "test"),
            _prover_row("t5", "theorem t5 :\n    True :=\n  by\n", "test")]
    path = tmp_path / "minif2f.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    test = load_targets(path, split="test")
    assert test.ids == ["t1", "t2", "t3", "t5"] and test.other_splits == {"valid": 1}
    assert [t.theorem for t in test.targets] == ["theorem t1 : 2 + 2 = 4 := by",
                                                "theorem t2 (G : Type) [Group G] : True := by",
                                                "theorem t3 : True := by", "theorem t5 :\n    True := by"]
    assert test.targets[0].header == "import Mathlib\n\n"
    assert test.rejected == [Rejected("t4", "theorem does not end in ':= by'")]
    assert load_targets(path, split="valid").ids == ["v1"]
    plain = tmp_path / "putnam.jsonl"  # no split column: every row, whatever the split asked
    plain.write_text(json.dumps(_prover_row("p1", "theorem p1 : True := by\n", None)) + "\n")
    assert load_targets(plain, split="train").ids == ["p1"]


def test_a_split_the_file_does_not_hold_names_the_ones_it_does(tmp_path: Path) -> None:
    from sgsbatch.errors import ConfigError
    from sgsbatch.logic.data import load_data_source

    path = tmp_path / "minif2f.jsonl"
    path.write_text("".join(json.dumps(_prover_row(f"x{i}", f"theorem x{i} : True := by", s)) + "\n"
                            for i, s in enumerate(["valid", "test", "test"])))

    class Data:
        source, format, split, limit, strict = str(path), "auto", "train", 0, False

    with pytest.raises(ConfigError, match=r"of split 'train': its rows are of split\(s\) test \(2\), valid \(1\); "
                                          r"choose one with data.split"):
        load_data_source(Data(), "jobs/x.toml")
