"""The config a fork's inherited rounds read (ops/fork.py, run/amendments.config_with): every key that
differs from the parent's is a change of method from the fork's round, at any depth, tuples kept tuples;
the parent's own changes of method before that round come first. No run is created here
(tests/integration/test_fork.py forks real runs)."""

from __future__ import annotations

from pathlib import Path

from sgsbatch.config.loading import load_config
from sgsbatch.run.amendments import METHOD, config_with

TINY = Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml"


def _rec(key: str, old: object, new: object, r: int) -> dict[str, object]:
    return {"at": 0.0, "key": key, "old": old, "new": new, "kind": METHOD, "from_round": r, "round": r, "command": ""}


def test_any_key_at_any_depth_is_rolled_back_for_the_rounds_before_its_change() -> None:
    child = load_config(TINY, ["solver.lr=0.002", "slurm.train.gpus=2", "slurm.solve.setup=['module load x']",
                               "shards.solve=4"])
    records = [_rec("shards.solve", 2, 3, 1),  # the parent's own change, from its round 1
               _rec("shards.solve", 3, 4, 2), _rec("solver.lr", 0.001, 0.002, 2), _rec("slurm.train.gpus", 0, 2, 2),
               _rec("slurm.solve.setup", [], ["module load x"], 2)]
    r0, r1, r2 = (config_with(child, records, r) for r in range(3))
    assert (r0.solver.lr, r0.slurm.train.gpus, r0.slurm.solve.setup, r0.shards.solve) == (0.001, 0, (), 2)
    assert (r1.solver.lr, r1.shards.solve) == (0.001, 3)
    assert (r2.solver.lr, r2.slurm.train.gpus, r2.slurm.solve.setup, r2.shards.solve) == (0.002, 2, ("module load x",), 4)
    assert r2 == child  # the child's own rounds: its config as launched
    assert isinstance(r0.slurm.solve.setup, tuple) and r0.slurm.solve == config_with(r0, records, 0).slurm.solve


def test_an_expert_iteration_window_into_compacted_rounds_is_refused(tmp_path: Path) -> None:
    import pytest

    from sgsbatch.errors import InputError
    from sgsbatch.ops.fork import _require_window
    from sgsbatch.run.paths import RunPaths

    parent = RunPaths(tmp_path / "trunk")
    for k in (0, 1):  # the parent compacted rounds 0 and 1 (round/compaction.py's marker)
        parent.round_dir(k).mkdir(parents=True)
        (parent.round_dir(k) / "compacted").write_text("")
    ei = load_config(TINY, ["solver.selection=stp_improved_ei", "solver.ei_rounds=3"])
    with pytest.raises(InputError, match=r"rounds 1..3 .*compacted round\(s\) 1 .*fork at round 4 or later"):
        _require_window(parent, ei, 3)  # round 3 trains on rounds 1..3
    _require_window(parent, ei, 4)  # rounds 2..4: whole
    _require_window(parent, load_config(TINY, []), 2)  # no window: only round 2's own records


def test_a_fork_after_a_re_sampling_round_needs_its_carried_groups_records(tmp_path: Path) -> None:
    """DAPO's re-sampling: the fork's first round trains the groups the parent's round n - 1 carried
    (rounds/rNNNN/train/rollout.json); their rounds must not be compacted. A round that trained carries none."""
    import json

    import pytest

    from sgsbatch.errors import InputError
    from sgsbatch.ops.fork import _require_window
    from sgsbatch.run.paths import RunPaths

    parent = RunPaths(tmp_path / "trunk")
    for k in (0, 1, 2):
        (parent.phase_dir(k, "train")).mkdir(parents=True)
    (parent.round_dir(1) / "compacted").write_text("")
    (parent.phase_dir(2, "train") / "rollout.json").write_text(json.dumps({"gen_batches": 2, "pending": [[1, "t1"], [2, "t4"]]}))
    (parent.phase_dir(1, "train") / "rollout.json").write_text(json.dumps({"gen_batches": 1, "pending": []}))
    dapo = load_config(TINY, ["conjecturer.enabled=false", "solver.objective=dapo", "solver.rollout_prompts=2",
                              "solver.rollout_max_gen_batches=3"])
    with pytest.raises(InputError, match=r"carried from round\(s\) 1 of run trunk .*compacted"):
        _require_window(parent, dapo, 3)
    _require_window(parent, dapo, 2)  # round 1 trained: nothing carried into round 2
    _require_window(parent, load_config(TINY, []), 3)  # no re-sampling: round 3's own records only
