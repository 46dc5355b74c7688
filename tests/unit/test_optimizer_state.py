"""train.optimizer: which carried optimizer state a round starts from, which are kept, their size, and
the jobs files that carry one AdamW through the run (the GRPO family) or start fresh (the reference's).
The state itself, saved and loaded by DeepSpeed: tests/models/test_optimizer_carry.py."""

from __future__ import annotations

from pathlib import Path

from sgsbatch.backends.optimizer_state import carried_state_bytes, has_master, optimizer_state_bytes
from sgsbatch.config.loading import load_config
from sgsbatch.round.checkpoints import optimizer_state_for, prune_optimizer_states
from sgsbatch.run.checkpoint import publish_dir, staging_dir
from sgsbatch.run.paths import RunPaths

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def test_state_size_is_two_fp32_moments_plus_the_master_the_trainer_keeps() -> None:
    n = 1000
    assert optimizer_state_bytes(n, zero_stage=2, bf16=True, keep_fp32_master=False) == 12 * n  # ZeRO's fp32 partition
    assert optimizer_state_bytes(n, zero_stage=1, bf16=False, keep_fp32_master=False) == 12 * n
    assert optimizer_state_bytes(n, zero_stage=0, bf16=False, keep_fp32_master=False) == 8 * n  # torch AdamW only
    assert optimizer_state_bytes(n, zero_stage=0, bf16=True, keep_fp32_master=False) == 12 * n  # bf16 optimizer
    assert not has_master(0, True, True)  # fp32 module: no second copy
    # on disk DeepSpeed writes the module beside it: bf16 (2 bytes) or fp32 (4)
    assert carried_state_bytes(n, zero_stage=2, bf16=True, keep_fp32_master=False) == 14 * n
    assert carried_state_bytes(n, zero_stage=2, bf16=True, keep_fp32_master=True) == 16 * n
    assert carried_state_bytes(7_000_000_000, zero_stage=2, bf16=True, keep_fp32_master=False) == 98_000_000_000


def _publish(path: Path) -> None:
    tmp = staging_dir(path)
    (tmp / "latest").write_text("state")
    publish_dir(tmp, path, {"kind": "optimizer"})


def test_a_round_starts_from_the_newest_published_state_before_it_and_only_that_is_kept(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    assert optimizer_state_for(paths, "solver", 3) is None  # no state yet: a fresh AdamW
    for r in (0, 2):
        _publish(paths.optimizer_state(r, "solver"))
    _publish(paths.optimizer_state(1, "conjecturer"))
    paths.optimizer_state(3, "solver").mkdir()  # unpublished (no marker): never read
    (paths.optimizer_states("solver") / ".r0004.staging").mkdir()  # a crashed save's leftovers
    assert optimizer_state_for(paths, "solver", 0) is None
    assert optimizer_state_for(paths, "solver", 2) == paths.optimizer_state(0, "solver")
    assert optimizer_state_for(paths, "solver", 4) == paths.optimizer_state(2, "solver")  # round 3 trained nothing
    assert optimizer_state_for(paths, "solver", 9) == paths.optimizer_state(2, "solver")
    deleted = prune_optimizer_states(paths)
    assert sorted(p.name for p in deleted) == [".r0004.staging", "r0000", "r0003"]
    assert [p.name for p in paths.optimizer_states("solver").iterdir()] == ["r0002"]
    assert [p.name for p in paths.optimizer_states("conjecturer").iterdir()] == ["r0001"]
    prune_optimizer_states(paths, keep_newest=False)  # train.optimizer = "fresh": none is read again
    assert not any(paths.optimizer_states("solver").iterdir())
    assert paths.optimizer_state(2, "solver").parent.parent == tmp_path / "checkpoints" / "optimizer"


def test_the_grpo_family_carries_one_optimizer_and_the_reference_starts_fresh() -> None:
    for name in ("grpo", "drgrpo", "dapo", "gspo"):
        assert load_config(JOBS / f"{name}.toml").train.optimizer == "carry", name
    for name in ("sgs", "cispo_solver_only", "tiny"):
        assert load_config(JOBS / f"{name}.toml").train.optimizer == "fresh", name


def test_a_state_saved_by_another_rank_count_is_not_loaded(tmp_path: Path) -> None:
    """A run whose train.gpus changed: the state of 2 ranks is not loaded into 1 (a fresh AdamW, logged);
    a state without the record (older runs) is judged by its weights only."""
    from sgsbatch.backends.batches import TrainSettings
    from sgsbatch.backends.optimizer_state import carry_in, ranks_differ

    weights = tmp_path / "w"
    weights.mkdir()
    state = tmp_path / "s"
    tmp = staging_dir(state)
    (tmp / "latest").write_text("state")
    publish_dir(tmp, state, {"kind": "optimizer", "weights": str(weights.resolve()), "ranks": 2})
    assert ranks_differ(state, 2) is None and ranks_differ(state, 1) == 2

    class NoLoad:  # an engine that must not be asked to load
        def load_checkpoint(self, *a: object, **k: object) -> None:
            raise AssertionError("loaded a state of another rank count")

    assert carry_in(NoLoad(), state, weights, TrainSettings(), "solver", ranks=1) is False
    old = tmp_path / "old"
    tmp = staging_dir(old)
    (tmp / "latest").write_text("state")
    publish_dir(tmp, old, {"kind": "optimizer", "weights": str(weights.resolve())})
    assert ranks_differ(old, 1) is None
