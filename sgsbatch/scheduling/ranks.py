"""The ranks of a train job: who they are, where they meet, how they start and stop.

A train job runs `ranks_per_node` processes on each of `slurm.train.nodes` nodes (one Slurm task
per node, `--ntasks-per-node=1`; ranks per node = `slurm.train.gpus`, or `train.cpu_ranks` on CPU).
This is the launcher, doing the part of torchrun's job we need and nothing else: the task on
each node starts its ranks with RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT and
`OMP_NUM_THREADS = cpus / ranks_per_node`, passes a stop request (SIGUSR2 or SIGTERM) on to every
rank as SIGUSR2, and kills the rest when one rank dies (its peers would hang in a collective).
torchrun is not used because it dies of SIGUSR2 (it handles only TERM/INT/HUP/QUIT), which lost
every preempted 8-GPU training's progress.

Rendezvous: one node: 127.0.0.1 on a port free right now. Several nodes: the first host of
SLURM_JOB_NODELIST, on a port every node derives from the job id and its restart count (a
requeued job meets on a fresh port). Task 0 (SLURM_NODEID 0) is the only one that prepares,
ends the round and submits the next one (scheduling/chain.py).

Not covered: elastic membership (a node lost means the job is requeued whole).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from sgsbatch.backends.trainer import free_port
from sgsbatch.phases.task import REQUEUE_EXIT

# Variables a rank gets from its launcher; nothing else may carry them over (a later job would
# rendezvous on a port an earlier process still holds, or run on another job's GPUs and threads).
DIST_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
            "ROLE_RANK", "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE", "NODE_RANK", "OMP_NUM_THREADS", "DS_ACCELERATOR")
DIST_PREFIXES = ("TORCHELASTIC_",)
PORT_BASE, PORT_SPAN = 20000, 20000
KILL_GRACE_S = 10.0


@dataclass(frozen=True)
class RankLayout:
    nodes: int
    node_rank: int
    per_node: int
    master_addr: str
    master_port: int

    @property
    def world(self) -> int:
        return self.nodes * self.per_node

    @property
    def first(self) -> bool:
        """True on the task that prepares, ends the round and submits the next one."""
        return self.node_rank == 0

    def global_rank(self, local_rank: int) -> int:
        return self.node_rank * self.per_node + local_rank


def first_host(nodelist: str) -> str:
    """The first host of a Slurm hostlist: "gpu[003-004,010],cpu1" -> "gpu003"."""
    m = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not m or not m.group(1):
        raise ValueError(f"cannot read the first host of SLURM_JOB_NODELIST={nodelist!r}")
    prefix, ranges = m.group(1), m.group(2)
    if ranges is None:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


def rendezvous_port(job_id: str, restarts: int) -> int:
    """A port every node of a job derives alike; another on each restart of the job."""
    digits = int(re.sub(r"\D", "", job_id) or "0")
    return PORT_BASE + (digits * 31 + restarts * 7919) % PORT_SPAN


def is_first_task(env: Mapping[str, str]) -> bool:
    """False only on the second and later Slurm tasks of a multi-node job."""
    return env.get("SLURM_NODEID", "0") == "0" or int(env.get("SLURM_NNODES", "1")) == 1


def layout_from_env(env: Mapping[str, str], nodes: int, per_node: int) -> RankLayout:
    """The layout of this task's ranks: `nodes` and `per_node` from the config, the rest from Slurm."""
    if nodes <= 1:
        return RankLayout(1, 0, per_node, "127.0.0.1", free_port() if per_node > 1 else 0)
    got = int(env.get("SLURM_NNODES", env.get("SLURM_JOB_NUM_NODES", "0")))
    if got != nodes or "SLURM_NODEID" not in env or "SLURM_JOB_NODELIST" not in env:
        raise RuntimeError(f"a train job over {nodes} nodes must run as one Slurm task per node "
                           f"(got SLURM_NNODES={got or 'unset'}, SLURM_NODEID={env.get('SLURM_NODEID', 'unset')})")
    job = env.get("SLURM_ARRAY_JOB_ID") or env.get("SLURM_JOB_ID", "0")
    port = rendezvous_port(job, int(env.get("SLURM_RESTART_COUNT", "0")))
    return RankLayout(nodes, int(env["SLURM_NODEID"]), per_node, first_host(env["SLURM_JOB_NODELIST"]), port)


def rank_env(base: Mapping[str, str], layout: RankLayout, local_rank: int, threads: int) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in DIST_ENV and not k.startswith(DIST_PREFIXES)}
    env.update(MASTER_ADDR=layout.master_addr, MASTER_PORT=str(layout.master_port),
               RANK=str(layout.global_rank(local_rank)), WORLD_SIZE=str(layout.world),
               LOCAL_RANK=str(local_rank), LOCAL_WORLD_SIZE=str(layout.per_node), NODE_RANK=str(layout.node_rank),
               OMP_NUM_THREADS=str(threads))
    return env


def launch(argv: Sequence[str], layout: RankLayout, threads: int, should_stop: Callable[[], bool],
           poll_s: float = 0.2, stdout: IO[bytes] | None = None) -> list[int]:
    """Run this node's ranks to the end; returns their exit codes (local rank order).

    A stop request is passed on to every rank once (SIGUSR2); a rank that dies with anything but
    0 or REQUEUE_EXIT gets its peers killed (SIGTERM, then SIGKILL after KILL_GRACE_S): they would
    otherwise wait in a collective for it forever.
    """
    procs = [subprocess.Popen(list(argv), env=rank_env(os.environ, layout, i, threads), stdout=stdout,
                              stderr=subprocess.STDOUT if stdout is not None else None)
             for i in range(layout.per_node)]
    forwarded, killed_at = False, 0.0
    try:
        while [p.poll() for p in procs].count(None):  # poll every rank (any() would stop at the first)
            if not forwarded and should_stop():
                forwarded = True
                _signal_all(procs, signal.SIGUSR2)
            bad = [p.returncode for p in procs if p.returncode not in (None, 0, REQUEUE_EXIT)]
            if bad and not killed_at:
                killed_at = time.monotonic()
                _signal_all(procs, signal.SIGTERM)
            if killed_at and time.monotonic() - killed_at > KILL_GRACE_S:
                _signal_all(procs, signal.SIGKILL)
            time.sleep(poll_s)
    finally:
        _signal_all(procs, signal.SIGKILL)  # only if we leave early (an exception in this loop)
        for p in procs:
            p.wait()
    return [int(p.returncode) for p in procs]


def _signal_all(procs: Sequence[subprocess.Popen[bytes]], sig: int) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(sig)
