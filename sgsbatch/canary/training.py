"""The canary's training check: the configured trainer, nodes, GPUs and ZeRO stage, for two steps.

`check_training` (in the train shape's canary job, on every node of it) writes `2 x
solver.batch_size` examples built from the run's real Solver prompts, then starts the configured
ranks twice with the train job's own launcher (scheduling/ranks.py; NCCL on GPUs, gloo on CPU
ranks, the multi-node rendezvous when `slurm.train.nodes > 1`), each rank running this module:

1. `stop`: load the Solver's weights, one optimizer step, then a stop request (what SIGUSR2 asks
   of a real train job): the resumable checkpoint is saved and timed. It must take at most
   `canary.checkpoint_share` of `slurm.train.signal_delay_s`, or a preempted or timed-out train
   job loses its progress; the row names the signal_delay_s that would fit.
2. `resume`: the same call again resumes at step 1 (read back from the checkpoint), makes step 2
   and exports the weights as a round's checkpoint.

Rank 0 of the first node writes each stage's figures to `<workdir>/<stage>.json`. Everything
written is removed afterwards. Not covered: a long run's memory growth, throughput at a real
round's size (bench/bench_trainer.py), a node lost mid-step.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sgsbatch.canary.rows import Row, failed
from sgsbatch.config.schema import TINY_RANDOM, Config
from sgsbatch.run.paths import tree_bytes

C = "training"
STAGES = ("stop", "resume")


def rank_main(spec_file: Path, stage: str) -> int:
    """One rank of one stage (started by the launcher with its rank variables)."""
    from sgsbatch.backends.batches import load_examples
    from sgsbatch.backends.trainer import PROGRESS, TrainingInterrupted, train
    from sgsbatch.config.loading import from_toml_text
    from sgsbatch.phases.train import train_settings

    spec = json.loads(spec_file.read_text())
    work = Path(spec["workdir"])
    cfg = from_toml_text(spec["config"], str(spec_file))
    settings = train_settings(cfg, "solver", 0)
    examples = load_examples(work / "examples.npz")
    state, out = work / "state", work / "weights"
    first = int(os.environ.get("RANK", "0")) == 0
    result: dict[str, Any] = {"stage": stage}
    if stage == "resume" and (state / PROGRESS).is_file():
        result["resumed_at"] = json.loads((state / PROGRESS).read_text())["steps"]
    t0 = time.perf_counter()
    try:
        res = train(spec["weights"], out, examples, settings, state_dir=state, should_stop=lambda: stage == "stop",
                    collective_timeout_s=cfg.train.collective_timeout_s)
        result.update(steps=res.steps, mean_loss=res.mean_loss, seconds=time.perf_counter() - t0)
    except TrainingInterrupted as e:
        result.update(interrupted=str(e), checkpoint_s=e.checkpoint_s, checkpoint_bytes=tree_bytes(state),
                      seconds=time.perf_counter() - t0)
    if first:
        (work / f"{stage}.json").write_text(json.dumps(result) + "\n")
    return 0


def _examples(cfg: Config, weights: Path, targets: list[Any]) -> list[Any]:
    from transformers import AutoTokenizer

    from sgsbatch.backends.batches import Example
    from sgsbatch.backends.generation import chat_prompt_ids
    from sgsbatch.canary.generation import role_messages

    tok = AutoTokenizer.from_pretrained(str(weights))
    prompts = [chat_prompt_ids(tok, m) for m in role_messages(cfg, "solver", targets)]
    completions = [tok(t.theorem, add_special_tokens=False)["input_ids"][:64] or [0] for t in targets]
    n = 2 * cfg.solver.batch_size
    # groups of `solver.samples` and stand-in sampler logprobs: what CISPO and the GRPO family read
    return [Example(prompts[i % len(prompts)], completions[i % len(completions)], 1.0, group=i // cfg.solver.samples,
                    sampler_logprobs=[-1.0] * len(completions[i % len(completions)])) for i in range(n)]


def check_training(cfg: Config, targets: list[Any], workdir: Path) -> list[Row]:
    if cfg.train.backend == "simulated":
        return [Row(C, "trainer", True, "train.backend = \"simulated\": SIMULATED, nothing real to check")]
    if cfg.models.solver == TINY_RANDOM:
        return [Row(C, "weights", True, "tiny-random model (built by a run's init job): not checked")]
    from sgsbatch.backends.batches import save_examples
    from sgsbatch.backends.trainer import free_port
    from sgsbatch.backends.weights import resolve_weights
    from sgsbatch.config.loading import to_toml
    from sgsbatch.scheduling.ranks import launch, layout_from_env

    try:
        weights = resolve_weights(cfg.models.solver)
    except FileNotFoundError as e:
        return [failed(C, "weights", e, f"models.solver: put {cfg.models.solver} where compute nodes can read it")]
    layout = layout_from_env(os.environ, cfg.slurm.train.nodes, cfg.train_ranks_per_node())
    if layout.first:
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        save_examples(workdir / "examples.npz", _examples(cfg, weights, targets))
        spec = {"workdir": str(workdir), "config": to_toml(cfg), "weights": str(weights)}
        (workdir / "spec.json").write_text(json.dumps(spec))
    else:  # the other nodes: wait for the first to write the spec (a shared filesystem, as runs need)
        deadline = time.monotonic() + 600
        while not (workdir / "spec.json").is_file() and time.monotonic() < deadline:
            time.sleep(1)
    rows: list[Row] = []
    try:
        for k, stage in enumerate(STAGES):
            # a fresh port per stage: the first stage's listening socket may linger
            lay = replace(layout, master_port=(layout.master_port + k) if layout.nodes > 1 else free_port())
            argv = [sys.executable, "-m", "sgsbatch.canary.training", str(workdir / "spec.json"), stage]
            t0 = time.perf_counter()
            codes = launch(argv, lay, cfg.train_threads_per_rank(), lambda: False)
            if not layout.first:
                continue
            if any(codes) or not (workdir / f"{stage}.json").is_file():
                rows.append(Row(C, stage, False, f"ranks exited with {codes} after {time.perf_counter() - t0:.0f} s "
                                                 "(their output is in this job's log)",
                                "train.* / slurm.train.* (gpus, nodes, mem) or the DeepSpeed/NCCL install"))
                return rows
            rows += _stage_rows(cfg, stage, json.loads((workdir / f"{stage}.json").read_text()), layout.world)
    finally:
        if layout.first:
            shutil.rmtree(workdir, ignore_errors=True)
    return rows


def _stage_rows(cfg: Config, stage: str, res: dict[str, Any], world: int) -> list[Row]:
    if stage == "stop":
        if "checkpoint_s" not in res:
            return [Row(C, "stop saves a checkpoint", False, f"training ran to its end without stopping: {res}",
                        "solver.batch_size: the canary needs two optimizer steps")]
        secs, delay, share = float(res["checkpoint_s"]), cfg.slurm.train.signal_delay_s, cfg.canary.checkpoint_share
        need = math.ceil(secs / share / 60) * 60
        return [
            Row(C, "load + step 1", True, f"{world} ranks, ZeRO-{cfg.train.zero_stage}, {res['seconds']:.1f} s "
                                          "(weights load, DeepSpeed start, one step, checkpoint)"),
            Row(C, "stop checkpoint fits signal_delay_s", secs <= delay * share,
                f"{res['checkpoint_bytes'] / 1e9:.2f} GB in {secs:.1f} s; slurm.train.signal_delay_s = {delay} "
                f"(at most {share:.0%} of it may go to the checkpoint)",
                f"slurm.train.signal_delay_s = {need} (or a faster filesystem for runs_dir)",
                measures={"checkpoint_bytes_per_s": float(res["checkpoint_bytes"]) / max(secs, 1e-9)}),
        ]
    ok = res.get("resumed_at") == 1 and res.get("steps") == 2
    return [Row(C, "resume at the same step", ok, f"resumed at step {res.get('resumed_at')}, ended at step "
                                                  f"{res.get('steps')} of 2 in {res.get('seconds', 0):.1f} s (export "
                                                  "included)", "" if ok else "the checkpoint did not resume: "
                                                                              "train.zero_stage / the DeepSpeed install")]


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s canary rank {os.environ.get('RANK', '?')} "
                                                   "%(levelname)s %(name)s: %(message)s")
    sys.exit(rank_main(Path(sys.argv[1]), sys.argv[2]))
