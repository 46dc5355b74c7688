"""The `vllm` generation engine (GPU, or vLLM's CPU build), batching continuously (backends/generation.py:
the interface and the semantics both engines share)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from sgsbatch.backends.generation import (
    EngineStats,
    Generation,
    Request,
    Sample,
    _Engine,
    chat_prompt_ids,
    completion_budget,
    logprobs_mode,
    sample_text,
)


class VllmGenerator(_Engine):
    """vLLM's engine (GPU, or vLLM's CPU build): continuous batching, prompts as token ids, one seed per request.

    `dtype`, `kv_cache_memory_bytes` (0 = vLLM sizes the cache from `gpu_memory_utilization`, which
    on the CPU build is a fraction of the machine's RAM) and `enforce_eager` go to `vllm.LLM` as given.
    """

    def __init__(
        self,
        model_dir: Path,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        seed: int = 0,
        max_model_len: int | None = None,
        logprobs: str = "raw",
        dtype: str = "auto",
        kv_cache_memory_bytes: int = 0,
        enforce_eager: bool = False,
        sleep_mode: bool = False,
    ) -> None:
        import vllm
        from vllm.platforms import current_platform

        kw: dict[str, Any] = {
            "model": str(model_dir),
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed,
            "dtype": dtype,
            "enforce_eager": enforce_eager,
        }
        # a colocated rollout job's engine sleeps while the job trains (`sleep`); vLLM's CPU build has no sleep mode
        self.can_sleep = sleep_mode and current_platform.is_sleep_mode_available()
        if self.can_sleep:
            kw["enable_sleep_mode"] = True
        if kv_cache_memory_bytes > 0:
            kw["kv_cache_memory_bytes"] = kv_cache_memory_bytes
        if max_model_len is not None:
            kw["max_model_len"] = max_model_len
        if _vllm_device() == "cpu":
            # vLLM 0.32's CPU build crashes its engine ("CPU Generator does not use offset",
            # gpu_model_runner._bookkeeping_sync rewinds a seeded request's generator after a partial
            # prefill, which only CUDA generators support) whenever a prompt is prefilled in chunks:
            # every sgsbatch request is seeded, so prompts are prefilled whole on CPU (found by the
            # Guide's ~2k-token prompts; tests/vllm covers it). GPUs keep vLLM's chunked prefill.
            kw["enable_chunked_prefill"] = False
            if max_model_len is not None:
                kw["max_num_batched_tokens"] = max_model_len
        if logprobs_mode(logprobs) != "raw_logprobs":  # vLLM's default: older versions work unchanged
            kw["logprobs_mode"] = logprobs_mode(logprobs)  # vLLM >= 0.10.2 (pyproject's gpu extra)
        with _signals_ignored_by_children():
            self.llm = vllm.LLM(**kw)
        self.engine = self.llm.llm_engine
        self.tokenizer = self.llm.get_tokenizer()
        self.eos_id = int(self.tokenizer.eos_token_id)
        self.max_model_len = max_model_len
        self.stats = EngineStats(engine=f"vllm {vllm.__version__} ({_vllm_device()})")
        self._requests: dict[str, tuple[Request, list[int]]] = {}
        self._empty: list[tuple[Request, Generation]] = []  # no room for a completion: answered at once

    def add(self, request: Request) -> None:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        ids = chat_prompt_ids(self.tokenizer, request.messages)
        self.stats.prompts += 1
        self.stats.sequences += request.n
        self.stats.prompt_tokens += len(ids)
        budget = completion_budget(request.max_tokens, len(ids), self.max_model_len)
        if budget == 0 or request.n <= 0:
            self._empty.append((request, Generation(ids, [Sample("", [], [], "length")] * max(0, request.n))))
            return
        params = SamplingParams(n=request.n, temperature=request.temperature, top_p=request.top_p,
                                max_tokens=budget, seed=request.seed, logprobs=0, detokenize=False,
                                output_kind=RequestOutputKind.FINAL_ONLY)
        self.engine.add_request(request.key, {"prompt_token_ids": ids}, params)
        self._requests[request.key] = (request, ids)

    def in_flight(self) -> int:
        return len(self._requests) + len(self._empty)

    def close(self) -> None:
        """Shut the engine core (a process of its own) and its workers down now: a task's worker
        leaves with os._exit (scheduling/worker.py), which runs no atexit hook of vLLM's."""
        core = getattr(self.engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()

    def update_weights(self, model_dir: Path) -> float:
        """Load `model_dir`'s weights (a checkpoint of the same architecture) into the running engine, in
        place: every worker's `reload_weights` from the files, then the prefix cache reset (KV blocks
        computed under the old weights must not be reused: without it a prompt seen before samples as
        under the old weights). Returns the seconds taken. The engine must be idle. What a job that keeps
        one engine across rollout steps does instead of starting a new one (docs/engines.md, "Design
        input: rollout regime": 22x less than a fresh engine on the CPU build); on GPUs the same call
        reads the files the trainer wrote."""
        import time

        if self.in_flight():
            raise RuntimeError(f"update_weights needs an idle engine; {self.in_flight()} requests in flight")
        t0 = time.perf_counter()
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(model_dir)})
        if not self.llm.reset_prefix_cache():
            raise RuntimeError("vLLM did not reset its prefix cache after the weight update")
        return time.perf_counter() - t0

    def sleep(self, level: int) -> bool:
        """Release the engine's GPU memory while a colocated rollout job trains (vLLM's sleep `level`: 1 offloads
        the weights to CPU memory, 2 discards them, both free the KV cache); False (nothing done) at level 0 or
        without sleep mode. The engine must be idle; `wake_up` before its next use (its prefix cache is reset
        by the `update_weights` that follows)."""
        if level == 0 or not self.can_sleep:
            return False
        if self.in_flight():
            raise RuntimeError(f"sleep needs an idle engine; {self.in_flight()} requests in flight")
        self.llm.sleep(level=level)
        return True

    def wake_up(self) -> None:
        self.llm.wake_up()

    def abort(self) -> None:
        if self._requests:
            self.engine.abort_request(list(self._requests))
        self._requests.clear()
        self._empty.clear()

    def step(self) -> list[tuple[Request, Generation]]:
        import time

        out, self._empty = self._empty, []
        if not self._requests:
            return out
        t0 = time.perf_counter()
        for res in self.engine.step():
            if not res.finished or res.request_id not in self._requests:
                continue
            req, ids = self._requests.pop(res.request_id)
            samples = []
            for comp in cast("list[Any]", res.outputs):  # a generation request: never PoolingOutput
                tok_ids = [int(t) for t in comp.token_ids]
                lps = [float(step[t].logprob) for t, step in zip(tok_ids, comp.logprobs or [], strict=True)]
                stopped = comp.finish_reason != "length"
                samples.append(Sample(sample_text(self.tokenizer, tok_ids, stopped and bool(tok_ids)
                                                  and tok_ids[-1] == self.eos_id), tok_ids, lps,
                                      "stop" if stopped else "length"))
                self.stats.generated_tokens += len(tok_ids)
                self.stats.neg_logprob_sum -= sum(lps)
            out.append((req, Generation(prompt_ids=ids, samples=samples)))
        self.stats.generate_s += time.perf_counter() - t0
        return out


def _vllm_device() -> str:
    """vLLM's platform: "cpu" for vLLM's CPU build, "cuda", ..."""
    from vllm.platforms import current_platform

    return str(current_platform.device_type)


@contextlib.contextmanager
def _signals_ignored_by_children() -> Iterator[None]:
    """SIGUSR2 ignored while vLLM starts its engine-core and worker processes, which inherit that.

    Slurm's warning signal (`--signal=USR2@N`, preemption, `scancel --signal=USR2`) goes to every
    process of the job step: a vLLM child killed by it (SIGUSR2's default action) would turn a clean
    stop after the current item into a crash. The task's own handler is restored for the task.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGUSR2, old)
