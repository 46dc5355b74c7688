"""A lost training rank fails its peers within `train.collective_timeout_s`, on 2 CPU ranks (gloo).

The rank script of tests/gpu/ds_ranks.py (`--fault`) runs the real trainer on the tiny model, one
sequence per optimizer step, with a 3 s collective timeout; right after optimizer step 1 one rank
hangs or dies. Asserted: the other rank does not wait in its collective for ever but fails by
itself (exit 1, a timeout or a closed connection in its log), and nothing is exported.
- a hung rank (alive, never joining the next collective): the peer's collective times out; the
  launcher (scheduling/ranks.py) then kills the hung rank.
- a dead rank on another node: two launchers of one rank each, as the train job's tasks on two
  nodes would be; the dead rank's launcher cannot kill the peer, which must fail on its own.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sgsbatch.backends.trainer import free_port
from sgsbatch.scheduling import ranks

SCRIPT = Path(__file__).resolve().parents[1] / "gpu" / "ds_ranks.py"
TIMEOUT = ("--collective-timeout-s", "3")


def _argv(model_dir: Path, work: Path, fault: str) -> list[str]:
    return [sys.executable, str(SCRIPT), str(model_dir), str(work), "--fault", fault, *TIMEOUT]


def test_a_hung_rank_fails_its_peer_at_the_collective_timeout(rank_model_dir: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranks, "KILL_GRACE_S", 1.0)  # the hung rank ignores SIGTERM (its stop request)
    with (tmp_path / "ranks.log").open("wb") as log:
        codes = ranks.launch(_argv(rank_model_dir, tmp_path, "1:1:hang"), ranks.RankLayout(1, 0, 2, "127.0.0.1", free_port()),
                             1, lambda: False, stdout=log)
    text = (tmp_path / "ranks.log").read_text(errors="replace")
    assert "injected hang after optimizer step 1" in text, text[-4000:]
    assert codes[0] == 1 and codes[1] < 0, (codes, text[-4000:])  # rank 0 failed; the launcher killed rank 1
    assert "timed out" in text.lower(), text[-4000:]
    assert not (tmp_path / "fault").exists() and not (tmp_path / "ranks").exists()


def test_a_dead_rank_on_another_node_fails_its_peer(rank_model_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    logs = [tmp_path / f"node{i}.log" for i in range(2)]

    def node(i: int) -> int:
        with logs[i].open("wb") as log:
            return ranks.launch(_argv(rank_model_dir, tmp_path, "1:1:kill9"), ranks.RankLayout(2, i, 1, "127.0.0.1", port),
                                1, lambda: False, stdout=log)[0]

    with ThreadPoolExecutor(2) as pool:
        codes = list(pool.map(node, range(2)))
    text = logs[0].read_text(errors="replace")
    assert "injected kill9" in logs[1].read_text(errors="replace")
    assert codes == [1, -9], (codes, text[-4000:])
    assert not (tmp_path / "fault").exists() and not (tmp_path / "ranks").exists()
