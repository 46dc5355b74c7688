"""The run's own tables of the config: the run, its data, held-out evaluation, the models, the prompts and the
generation engine (assembled in config/schema.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sgsbatch.config.declare import (
    Bound,
    Executor,
    key,
)


@dataclass(frozen=True)
class RunConfig:
    """The run: its name, size, seed, executor, where it lives and how it is driven."""

    name: str = key("sgs", "The run's name: its directory under run.runs_dir, the RUN of every command and "
                           "part of its Slurm job names.")
    rounds: int = key(200, "Rounds to run (a round: conjecture, solve, verify, guide, train); `resume --set "
                           "run.rounds=N` extends a run.",
                      bound=Bound(">= 1", "must be a whole number >= 1, got {value}"))
    seed: int = key(0, "Seed of every sampler, shuffle and random-half fit of the run.",
                    bound=Bound(">= 0", "must be >= 0, got {value}"))
    executor: Executor = key("auto", "Where the jobs run: \"slurm\", \"local\" (this machine, a driver "
                                     "process), or \"auto\" (Slurm when `sinfo` answers, else local).")
    runs_dir: str = key("runs", "Directory the run directory goes in (after --runs-dir and "
                                "$SGSBATCH_RUNS_DIR).")
    database_url: str = key("", "The state database: \"\" = the run's own SQLite file (<run dir>/state.db), or "
                                "an SQLAlchemy URL such as postgresql://user@host/db.")
    max_task_retries: int = key(2, "Crashes of one shard task before the run is stalled for a person.",
                                bound=Bound(">= 0", "must be >= 0"))
    local_workers: int = key(2, "Parallel tasks of the local executor.",
                             bound=Bound(">= 1", "must be >= 1"))
    smoke: bool = key(False, "Set by `launch --smoke` (tiny scale on CPU); not set by hand.")
    submit_from_jobs: bool = key(True, "True: each round's train job submits the next round; false: "
                                       "`sgsbatch watch` drives the chain from outside (sites where jobs may "
                                       "not submit jobs).")
    allow_env_drift: bool = key(False, "True: a task whose torch, transformers, deepspeed, vllm or sgsbatch "
                                       "differs from the launch's runs anyway (else it refuses, naming both "
                                       "versions).")
    poll_interval_s: float = key(30.0, "`launch --wait` / `resume --wait`: seconds between status checks.",
                                 bound=Bound("> 0", "must be > 0 seconds, got {value}"))
    rehearsal: bool = key(False, "Set by `launch --rehearse` (SIMULATED generation, verifier and trainer); "
                                 "refused in a config file.")


@dataclass(frozen=True)
class DataConfig:
    """The target statements the run tries to prove."""

    source: str = key("LukeBailey181Pub/D_3k", "A Hugging Face dataset id, or a path: reference JSON, JSONL or "
                                               "a saved Hugging Face dataset.")
    format: Literal["auto", "reference_json", "jsonl", "hf"] = key("auto", "How to read data.source; \"auto\" "
                                                                           "decides from the file.")
    split: str = key("train", "The split of a Hugging Face dataset (hub id or saved DatasetDict).")
    limit: int = key(0, "Use only the first N targets; 0 = all.",
                     bound=Bound(">= 0", "must be >= 0 (0 = all targets)"))
    strict: bool = key(False, "Refuse data with malformed rows instead of skipping them (launch --strict).")


@dataclass(frozen=True)
class EvalConfig:
    """Held-out evaluation (docs/evaluation.md): the Solver's weights of a round on sets it never trains on,
    through the run's own verifier; `sgsbatch eval RUN --round N` evaluates any stored round."""

    sets: dict[str, str] = field(default_factory=dict, metadata={
        "help": "The evaluation sets, name = source, each source read like data.source (a Hugging Face dataset "
                "id, or a path: reference JSON, JSONL or a saved dataset), e.g. {minif2f_test = "
                "\"path/to/minif2f_test.jsonl\"}; a name is letters, digits and _ . - (it names metrics "
                "eval/<name>/pass@<k> and a directory)."})
    split: str = key("test", "The split of a Hugging Face evaluation set (hub id or saved DatasetDict), unless "
                             "eval.splits names the set.")
    splits: dict[str, str] = field(default_factory=dict, metadata={
        "help": "Per-set splits, name = split, e.g. {minif2f_valid = \"valid\"}; a set not named here uses "
                "eval.split."})
    limit: int = key(0, "Evaluate only the first N problems of each set; 0 = all.")
    every_rounds: int = key(0, "Evaluate the Solver's weights after every N-th round (the rounds r with (r + 1) "
                               "% N == 0); 0 = off: only `sgsbatch eval` evaluates.")
    samples: int = key(8, "Solver samples per evaluation problem (the n of pass@k).")
    pass_k: tuple[int, ...] = key((1, 8), "The k values of pass@k recorded per set (each <= eval.samples), by "
                                          "the unbiased estimator of Chen et al. 2021.")

    def set_data(self, name: str) -> DataConfig:
        """Evaluation set `name` as a `[data]` table for data.load_data_source: its source, its split
        (eval.splits, else eval.split), eval.limit; bad rows are recorded, never fatal."""
        return DataConfig(source=self.sets[name], format="auto", split=self.splits.get(name, self.split),
                          limit=self.limit, strict=False)


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape and warm-up of `tiny-random` models (built offline, CPU runs only)."""

    vocab_size: int = key(512, "Vocabulary size of a tiny-random model.")
    hidden_size: int = key(64, "Hidden size of a tiny-random model.")
    num_layers: int = key(2, "Transformer layers of a tiny-random model.")
    # 2 heads of 32: vLLM's CPU attention accepts head sizes 32, 64, 80, ... (not 64 / 4 = 16), so
    # the tiny configs on transformers and on vLLM build one model (one warm-up, one cache entry)
    num_heads: int = key(2, "Attention heads of a tiny-random model (must divide hidden_size; vLLM needs a "
                            "head size it supports: 32, 64, 80, ...).")
    warmup_examples: int = key(128, "Examples of the warm-up that teaches a tiny-random model the answer format.")
    warmup_epochs: int = key(8, "Epochs of that warm-up.")
    warmup_lr: float = key(3e-3, "Learning rate of that warm-up.")
    warmup_batch_size: int = key(8, "Batch size of that warm-up.")
    cache_dir: str = key("~/.cache/sgsbatch/tiny-random", "Where finished tiny models are kept, "
                                                          "content-addressed; \"\" = no cache.")


@dataclass(frozen=True)
class ModelsConfig:
    """The three roles' models: hub ids, paths to Hugging Face weights, or \"tiny-random\"."""

    solver: str = key("deepseek-ai/DeepSeek-Prover-V2-7B", "The Solver's starting weights.")
    conjecturer: str = key("deepseek-ai/DeepSeek-Prover-V2-7B", "The Conjecturer's starting weights.")
    guide: str = key("LukeBailey181Pub/dspv2_guide", "The Guide (never trained): the reference's fine-tune of "
                                                     "DeepSeek-Prover-V2-7B.")
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)


_TEMPLATE = ("; a template set shipped with the package (\"reference\": the SGS reference's exact strings, "
             "\"legacy\": sgsbatch's earlier wording) or a path to your own file")


@dataclass(frozen=True)
class PromptsConfig:
    """Prompt templates per role and the Guide's score tags (sgsbatch/logic/prompts.py).

    Each value is the name of a template set shipped with the package (sgsbatch/prompt_templates/
    <name>.json: "reference" = the SGS reference's exact strings, "legacy" = sgsbatch's earlier
    wording) or a path to your own file (resolved like model paths). Checked at load time.
    """

    solver: str = key("reference", "The Solver's prompt" + _TEMPLATE + ".")
    conjecturer: str = key("reference", "The Conjecturer's prompt" + _TEMPLATE + ".")
    conjecturer_unconditioned: str = key("reference", "The Conjecturer's fixed prompt of the \"no problem "
                                                      "conditioning\" ablation" + _TEMPLATE + ".")
    conjecturer_seeded: str = key("reference", "The Conjecturer's seeded prompt (conjecturer.setup = "
                                               "\"seed_statement\": a solved target and one of its proofs)"
                                  + _TEMPLATE + ".")
    guide: str = key("reference", "The Guide's prompt" + _TEMPLATE + ".")
    guide_tags: str = key("reference", "The (begin, end) tags of the Guide's three scores" + _TEMPLATE + ".")


_SIMULATED_ONLY = "SIMULATED generation only (backends/simulated_generation.py): "


@dataclass(frozen=True)
class GenerationConfig:
    """The inference engine of the conjecture, solve and guide phases."""

    backend: Literal["vllm", "transformers", "simulated"] = key(
        "vllm", "The engine: \"vllm\", \"transformers\" (CPU and small tests), or \"simulated\" (SIMULATED "
                "replies drawn from statistics, no model loaded).")
    top_p: float = key(1.0, "Nucleus sampling threshold of every role.")
    tensor_parallel_size: int = key(1, "vLLM: GPUs one engine spans.")
    gpu_memory_utilization: float = key(0.9, "vLLM: the fraction of GPU memory its engine takes (vLLM's CPU "
                                             "build: of the machine's RAM).",
                                        bound=Bound("(0, 1]", "must be within (0, 1], got {value}"))
    kv_cache_memory_bytes: int = key(0, "vLLM: > 0 sizes the KV cache itself instead of "
                                        "gpu_memory_utilization; 0 = vLLM decides.",
                                     bound=Bound(">= 0", "must be >= 0 (0 = vLLM sizes the KV cache from gpu_memory_utilization), got {value}"))
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = key(
        "auto", "vLLM's weights/activations dtype; \"auto\" = vLLM's choice (bf16 for an fp32 checkpoint).")
    enforce_eager: bool = key(False, "vLLM: no torch.compile or CUDA graphs (faster start, slower decode; CPU "
                                     "test configs).")
    sleep_level: int = key(2, "vLLM in a colocated rollout job (solver.colocated_steps), on GPUs: the engine's sleep "
                              "level while the job trains (2: weights and KV cache released, the new weights loaded "
                              "at wake-up; 1: weights offloaded to CPU memory; 0: the engine keeps its GPU memory, "
                              "so gpu_memory_utilization must leave the trainer its share). Ignored where vLLM has "
                              "no sleep mode (its CPU build).",
                           bound=Bound("[0, 2]", "must be 0, 1 or 2 (vLLM's sleep levels), got {value}"))
    threads: int = key(0, "torch CPU threads of the transformers backend; 0 = the task's cpus.")
    max_in_flight: int = key(512, "Prompts a generating task keeps in the engine at once (continuous batching).",
                             bound=Bound(">= 1", "must be >= 1, got {value}"))
    max_model_len: int = key(8192, "Prompt + completion tokens per request (the reference serves with 8192).",
                             bound=Bound(">= 2", "must be >= 2, got {value}"))
    logprobs: Literal["raw", "processed"] = key(
        "raw", "The sampled tokens' logprobs CISPO compares with the trainer's: \"raw\" (the reference: plain "
               "log-softmax on both sides) or \"processed\" (both under temperature and top-p).")
    simulated_tokens_per_s: float = key(0.0, _SIMULATED_ONLY + "the decode throughput it sleeps to mimic; "
                                             "0 = no sleep.")
    simulated_solver_tokens: int = key(1500, _SIMULATED_ONLY + "median Solver reply tokens (log-normal, capped "
                                             "by the completion budget).")
    simulated_conjecturer_tokens: int = key(2500, _SIMULATED_ONLY + "median Conjecturer reply tokens.")
    simulated_guide_tokens: int = key(1000, _SIMULATED_ONLY + "median Guide reply tokens.")
    simulated_tactic_tokens: int = key(16, _SIMULATED_ONLY + "median tokens of a search's tactic reply "
                                           "(solver.mode = \"search\").")
    simulated_token_sigma: float = key(0.5, _SIMULATED_ONLY + "sigma of the log-normal token counts.")
    simulated_malformed_solver: float = key(0.03, _SIMULATED_ONLY + "share of malformed Solver replies.")
    simulated_malformed_conjecturer: float = key(0.15, _SIMULATED_ONLY + "share of malformed Conjecturer "
                                                       "replies.")
    simulated_malformed_guide: float = key(0.05, _SIMULATED_ONLY + "share of malformed Guide replies.")
    simulated_r0: float = key(0.3, _SIMULATED_ONLY + "the solve rate the simulated scaling curve starts from.")
    simulated_generations_per_round: int = key(60_000, _SIMULATED_ONLY + "a problem is within reach in round r "
                                                       "when its latent difficulty is below the paper's curve at "
                                                       "C = (r + 1) x this.")
    simulated_difficulty_sharpness: float = key(8.0, _SIMULATED_ONLY + "how sharply reach turns on around the "
                                                     "curve.")
    simulated_success_in_reach: float = key(0.5, _SIMULATED_ONLY + "the chance an attempt at a problem within "
                                                 "reach succeeds.")
