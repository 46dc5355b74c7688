"""The train job's ranks: layout from the Slurm environment (one and two nodes), rank variables,
the split of a step over ranks by tokens, the examples file, and what a multi-node job asks of sbatch."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sgsbatch.backends.batches import (
    Example,
    TrainSettings,
    fingerprint,
    load_examples,
    rank_shares,
    save_examples,
)
from sgsbatch.config.loading import load_config
from sgsbatch.logic.data import Target
from sgsbatch.run.handle import create_run
from sgsbatch.scheduling import ranks, slurm

REPO = Path(__file__).resolve().parents[2]


def two_node_env(node: int, restarts: int = 0) -> dict[str, str]:
    return {"SLURM_JOB_ID": "123456", "SLURM_NNODES": "2", "SLURM_NODEID": str(node), "SLURM_PROCID": str(node),
            "SLURM_JOB_NODELIST": "gpu[017-018]", "SLURM_RESTART_COUNT": str(restarts)}


def test_first_host_of_a_hostlist() -> None:
    assert ranks.first_host("gpu[017-018]") == "gpu017"
    assert ranks.first_host("gpu[003,010-012],cpu1") == "gpu003"
    assert ranks.first_host("node7,node9") == "node7"
    assert ranks.first_host("a-b-c") == "a-b-c"
    with pytest.raises(ValueError, match="SLURM_JOB_NODELIST"):
        ranks.first_host("")


def test_two_nodes_meet_on_the_first_host_and_a_port_both_derive() -> None:
    a = ranks.layout_from_env(two_node_env(0), nodes=2, per_node=8)
    b = ranks.layout_from_env(two_node_env(1), nodes=2, per_node=8)
    assert (a.master_addr, a.master_port) == (b.master_addr, b.master_port) == ("gpu017", a.master_port)
    assert ranks.PORT_BASE <= a.master_port < ranks.PORT_BASE + ranks.PORT_SPAN
    assert a.world == b.world == 16 and a.first and not b.first
    assert [b.global_rank(i) for i in (0, 7)] == [8, 15]
    again = ranks.layout_from_env(two_node_env(1, restarts=1), nodes=2, per_node=8)
    assert again.master_port != b.master_port  # a requeued job does not meet on a port a dying one may hold


def test_task_zero_alone_is_first() -> None:
    assert ranks.is_first_task(two_node_env(0)) and not ranks.is_first_task(two_node_env(1))
    assert ranks.is_first_task({}) and ranks.is_first_task({"SLURM_NODEID": "0", "SLURM_NNODES": "1"})


def test_a_multi_node_train_outside_its_allocation_is_refused() -> None:
    with pytest.raises(RuntimeError, match="one Slurm task per node"):
        ranks.layout_from_env({"SLURM_NNODES": "1", "SLURM_NODEID": "0"}, nodes=2, per_node=8)


def test_one_node_uses_loopback() -> None:
    one = ranks.layout_from_env(two_node_env(0), nodes=1, per_node=2)
    assert (one.nodes, one.node_rank, one.world, one.master_addr) == (1, 0, 2, "127.0.0.1") and one.master_port > 0


def test_rank_env_sets_rank_variables_and_drops_inherited_ones() -> None:
    layout = ranks.layout_from_env(two_node_env(1), nodes=2, per_node=4)
    base = {"PATH": "/bin", "RANK": "99", "OMP_NUM_THREADS": "64", "TORCHELASTIC_RUN_ID": "x", "NCCL_DEBUG": "INFO"}
    env = ranks.rank_env(base, layout, 3, threads=16)
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == ("7", "3", "8", "4")
    assert (env["MASTER_ADDR"], env["NODE_RANK"], env["OMP_NUM_THREADS"]) == ("gpu017", "1", "16")
    assert "TORCHELASTIC_RUN_ID" not in env and env["NCCL_DEBUG"] == "INFO" and env["PATH"] == "/bin"


def test_launch_passes_a_stop_request_to_every_rank_and_kills_peers_of_a_dead_rank(tmp_path: Path) -> None:
    """Real processes: rank 1 dies; rank 0 (which would wait forever) is killed, codes come back."""
    script = tmp_path / "rank.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "stop = []\n"
        "signal.signal(signal.SIGUSR2, lambda *a: stop.append(1))\n"
        "open(os.path.join(sys.argv[1], 'rank' + os.environ['RANK']), 'w').write(os.environ['WORLD_SIZE'])\n"
        "if sys.argv[2] == 'die' and os.environ['RANK'] == '1': sys.exit(3)\n"
        "while not stop: time.sleep(0.05)\n"
        "sys.exit(75)\n")
    layout = ranks.layout_from_env({}, nodes=1, per_node=2)
    asked = {"at": time.monotonic() + 1.0}
    codes = ranks.launch([os.sys.executable, str(script), str(tmp_path), "stop"], layout, 1,
                         lambda: time.monotonic() > asked["at"])
    assert codes == [75, 75]
    assert sorted(p.name for p in tmp_path.glob("rank?")) == ["rank0", "rank1"]
    codes = ranks.launch([os.sys.executable, str(script), str(tmp_path), "die"], layout, 1, lambda: False)
    assert codes[1] == 3 and codes[0] != 0  # rank 0 took the SIGTERM the launcher sent (its peer was dead)


def test_a_step_is_split_by_tokens_not_by_count() -> None:
    long, short = Example([1] * 10, [2] * 990, 1.0), Example([1] * 10, [2] * 10, 1.0)
    exs = [long, short, short, short, short]
    shares = rank_shares(exs, [0, 1, 2, 3, 4], "reinforce", 2)
    assert shares == [[0], [1, 2, 3, 4]]  # by count it would be 3 + 2 with 1,020 vs 40 tokens
    # CISPO keeps a group on one rank
    grouped = [Example([1], [2] * n, 1.0, group=g) for n, g in ((50, 0), (50, 0), (10, 1), (10, 2), (10, 2))]
    shares = rank_shares(grouped, [0, 1, 2, 3, 4], "cispo", 2)
    assert shares == [[0, 1], [2, 3, 4]]
    assert rank_shares(grouped[:1], [0], "reinforce", 3) == [[0], [], []]


def _lists(e: Example) -> tuple[Any, ...]:
    lps = None if e.sampler_logprobs is None else [float(x) for x in e.sampler_logprobs]
    return [int(x) for x in e.prompt_ids], [int(x) for x in e.completion_ids], e.weight, e.group, lps


def test_examples_file_round_trips(tmp_path: Path) -> None:
    exs = [Example([1, 2, 3], [4, 5], 0.25, group=7, sampler_logprobs=[-0.1, -2.5e-9]),
           Example([9], [8, 7, 6], -1.0), Example([2**40], [3], 1e-300, group=0, sampler_logprobs=[-1.0])]
    save_examples(tmp_path / "x" / "solver.npz", exs)
    back = load_examples(tmp_path / "x" / "solver.npz")  # numpy views of the file's arrays, equal in value
    assert [_lists(e) for e in back] == [_lists(e) for e in exs] and back[1].sampler_logprobs is None
    assert fingerprint(tmp_path, back, TrainSettings()) == fingerprint(tmp_path, exs, TrainSettings())
    views = [Example(np.array([1, 2, 3], dtype="<i4"), np.array([4, 5], dtype="<i4"), 0.25, group=7,
                     sampler_logprobs=np.array([-0.5, -0.25], dtype="<f4"))]  # as built from an arrays file
    save_examples(tmp_path / "views.npz", views)
    assert [_lists(e) for e in load_examples(tmp_path / "views.npz")] == [_lists(e) for e in views]
    with np.load(tmp_path / "views.npz") as z, np.load(tmp_path / "x" / "solver.npz") as wide:
        # stored narrow where every value is exactly that (float32 logprobs, ids < 2^31), else wide
        assert (z["comps"].dtype, z["lps"].dtype) == (np.int32, np.float32)
        assert (wide["prompts"].dtype, wide["comps"].dtype, wide["lps"].dtype) == (np.int64, np.int32, np.float64)
    save_examples(tmp_path / "empty.npz", [])
    assert load_examples(tmp_path / "empty.npz") == []
    assert not list(tmp_path.glob("**/.*.tmp"))


def test_a_two_node_train_job_asks_for_one_task_per_node(tmp_path: Path) -> None:
    cfg = load_config(REPO / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path}", "run.name=n2", "run.executor=slurm",
                                                   "slurm.train.nodes=2", "slurm.train.gpus=8"])
    h = create_run(cfg, [Target("t0", "", "theorem t0 : True := by")], "slurm")
    p = slurm._parameters(h, 0, "train", 1, None)
    assert (p["nodes"], p["ntasks_per_node"], p["gpus_per_node"]) == (2, 1, 8)
    assert "nodes" not in slurm._parameters(h, 0, "solve", 4, None)


def test_a_round_submitted_from_a_train_job_inherits_none_of_its_resources(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {"SLURM_JOB_ID": "5", "CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "8", "MASTER_PORT": "2",
                 "DS_ACCELERATOR": "cpu", "LOCAL_RANK": "1", "HOME_SITE": "kept", "SUBMITIT_EXECUTOR": "slurm",
                 "SLURMD_NODENAME": "n1"}.items():
        monkeypatch.setenv(k, v)
    with slurm.clean_env():
        seen = dict(os.environ)
    for k in ("SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MASTER_PORT", "DS_ACCELERATOR", "LOCAL_RANK",
              "SUBMITIT_EXECUTOR", "SLURMD_NODENAME"):
        assert k not in seen, k
    assert seen["HOME_SITE"] == "kept" and os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"  # restored afterwards


def test_the_rank_fault_injector_is_armed_for_its_rank_while_the_shard_failed_fewer_times(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sgsbatch.run.shards import Shard
    from sgsbatch.scheduling import worker

    shard = Shard(tmp_path, 0)
    fired: list[str] = []
    monkeypatch.setattr(worker, "_fault", lambda mode, spec: fired.append(f"{mode}@{spec}"))
    monkeypatch.setenv(worker.RANK_FAULT_ENV, "1:2:hang:1,1:3:kill9:2")
    monkeypatch.setenv("RANK", "0")
    assert worker._rank_fault(shard) is None  # another rank's fault
    monkeypatch.setenv("RANK", "1")
    for failures, expected in ((0, ["hang@1:2:hang:1", "kill9@1:3:kill9:2"]), (1, ["kill9@1:3:kill9:2"])):
        while shard.failure_count() < failures:
            shard.record_failure("an earlier attempt")
        fired.clear()
        hook = worker._rank_fault(shard)
        assert hook is not None
        for step in (1, 2, 3, 4):
            hook(step)
        assert fired == expected, failures
    shard.record_failure("the second attempt")
    assert worker._rank_fault(shard) is None  # disarmed: the next attempt trains to the end


def test_rank_zero_alone_records_each_step_and_the_task_hook_runs_on_every_rank(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sgsbatch.backends.trainer import TrainStep
    from sgsbatch.phases.task import Task
    from sgsbatch.phases.train import step_recorder
    from sgsbatch.run.paths import RunPaths
    from sgsbatch.run.progress import train_steps, train_steps_file
    from sgsbatch.run.shards import Shard

    cfg = load_config(REPO / "jobs" / "tiny.toml", [])
    paths = RunPaths(tmp_path / "run")
    hooked: list[int] = []
    task = Task(cfg, paths, 3, "train", Shard(paths.phase_dir(3, "train"), 0), lambda: False, hooked.append)
    for rank in ("1", "0"):
        monkeypatch.setenv("RANK", rank)
        step_recorder(task, "solver")(TrainStep(step=2, steps=5, loss=0.5, tokens=64, step_s=1.5))
    got = train_steps(train_steps_file(paths, 3))
    assert len(got) == 1 and got[0]["role"] == "solver" and got[0]["step"] == 2 and got[0]["tokens"] == 64
    assert got[0]["step_s"] == 1.5 and got[0]["time"] > 0
    assert hooked == [2, 2]
