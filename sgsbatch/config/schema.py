"""The run configuration: typed, frozen dataclasses with the SGS reference numbers as defaults.

Every number of the SGS paper (docs/algorithm.md) is a key here with the reference default. Every key is declared with
`key(default, help)`: its help text lives here and nowhere else (`sgsbatch config keys` and the
configuration reference read it through config/keys.py; a test checks that no key lacks one).
Loading TOML files, `inherit`, `--set` overrides and validation live in `config/loading.py`; the
ranges of single keys are declared with them (`key(..., bound=Bound(...))`); the checks across keys live in
`config/validation.py`, which also checks the ranges; this module is only the schema.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal, TypeVar

Executor = Literal["auto", "slurm", "local"]
PHASES: tuple[str, ...] = ("init", "conjecture", "solve", "verify", "guide", "train")
ROUND_PHASES: tuple[str, ...] = ("conjecture", "solve", "verify", "guide", "train")
ROLLOUT_JOB = "rollout"  # the colocated job of solver.colocated_steps rounds: a job kind, not a phase of a round
# every [slurm.<table>] with a job's resources: the phases and the run's watcher job (ops/watcher.py)
SLURM_TABLES: tuple[str, ...] = (*PHASES, "watcher")
TINY_RANDOM = "tiny-random"
# a run name is a directory name, a command-line word and part of Slurm job names
RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,99}")
# an evaluation set's name: part of metric names (eval/<name>/pass@<k>) and of a directory
EVAL_SET_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
SLURM_MEM = re.compile(r"[0-9]+[KMGT]?")
MAX_TASKS = 10_000  # tasks of one phase array (Slurm's MaxArraySize is 1001 unless raised)
MAX_CPUS, MAX_GPUS = 4096, 64  # per task (per node)
# head sizes vLLM 0.32's CPU attention accepts (vllm/v1/attention/backends/cpu_attn.py
# get_supported_head_sizes; tests/vllm/test_vllm_engine.py checks this copy against the installed vLLM)
VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
# The GRPO family's published clip ranges (eps_low, eps_high) of the importance ratio, used where
# solver.clip_low / clip_high are 0: grpo and dr_grpo PPO's 0.2 (arXiv 1707.06347; TRL GRPOConfig.epsilon,
# verl clip_ratio); dapo 0.2 / 0.28 (DAPO arXiv 2503.14476 §3.1 and its experiments); gspo 3e-4 / 4e-4 on
# the sequence ratio (GSPO arXiv 2507.18071 §5.1; verl examples/gspo_trainer clip_ratio_low/high)
PUBLISHED_CLIP: dict[str, tuple[float, float]] = {
    "grpo": (0.2, 0.2), "dr_grpo": (0.2, 0.2), "dapo": (0.2, 0.28), "gspo": (3e-4, 4e-4)}
# The reference's StatementSelectionMode (sgs/pipeline/config.py:18-24), its values as spelled there, plus
# "auto": the selection each objective has always had here (SolverConfig.selection_mode)
SELECTIONS: tuple[str, ...] = ("hard", "unsolved", "stp_improved_ei", "all_none_0_1", "all", "less_16_proofs")
# the selections that train on stored proofs of the last `solver.ei_rounds` rounds (Expert Iteration)
WINDOW_SELECTIONS: tuple[str, ...] = ("less_16_proofs", "stp_improved_ei")
T = TypeVar("T")


@dataclass(frozen=True)
class Bound:
    """A number key's range, declared with the key and checked by config/validation.py: `spec` is ">= 1",
    "> 0", "<= 64", "< 1", or an interval "[0, 1]", "(0, 1]", "[0, 1)"; `message` is what a config outside it
    is told (`{value}`: the value given)."""

    spec: str
    message: str

    def __post_init__(self) -> None:
        assert _BOUND.fullmatch(self.spec), f"a bound is '>= N', '> N', '<= N', '< N' or an interval: {self.spec!r}"

    def holds(self, value: float) -> bool:
        m = _BOUND.fullmatch(self.spec)
        assert m is not None
        if m["op"]:
            x = float(m["x"])
            return {">=": value >= x, ">": value > x, "<=": value <= x, "<": value < x}[m["op"]]
        lo, hi = float(m["lo"]), float(m["hi"])
        return (lo <= value if m["left"] == "[" else lo < value) and (value <= hi if m["right"] == "]" else value < hi)


_NUMBER = r"-?[0-9][0-9_.e+-]*"
_BOUND = re.compile(rf"(?P<op>>=|>|<=|<) (?P<x>{_NUMBER})|(?P<left>[\[(])(?P<lo>{_NUMBER}), (?P<hi>{_NUMBER})(?P<right>[\])])")


def key(default: T, text: str, bound: Bound | None = None) -> T:
    """A config key: its default, its help text (`sgsbatch config keys`) and, for a number, its range (`bound`),
    written once, here."""
    return field(default=default, metadata={"help": text, "bound": bound})


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


@dataclass(frozen=True)
class SolverConfig:
    """The Solver: sampling, rewards and training."""

    samples: int = key(8, "Proofs sampled per target and per conjecture each round (solver.mode = \"search\": "
                          "independent searches per problem).",
                       bound=Bound(">= 1", "must be >= 1, got {value}"))
    # "search": the solve phase runs tactic-level proof search (sgsbatch/search/, docs/search.md)
    mode: Literal["whole_proof", "search"] = key(
        "whole_proof", "\"whole_proof\": the Solver writes whole proofs (the reference); \"search\": tactic-level "
                       "proof search, the [search] keys (docs/search.md).")
    temperature: float = key(1.0, "Sampling temperature.",
                             bound=Bound(">= 0", "must be >= 0"))
    max_tokens: int = key(8192, "Completion tokens per proof.",
                          bound=Bound(">= 1", "must be >= 1"))
    # reinforce (REINFORCE-1/2), cispo, ei (Expert Iteration), or the GRPO family: grpo, dr_grpo, dapo,
    # gspo (backends/objectives.py; README "Objectives")
    objective: Literal["reinforce", "cispo", "ei", "grpo", "dr_grpo", "dapo", "gspo"] = key(
        "reinforce", "The training objective: \"reinforce\" (the reference's REINFORCE-1/2), \"cispo\", \"ei\" "
                     "(Expert Iteration on stored proofs), or the GRPO family: \"grpo\", \"dr_grpo\", \"dapo\", "
                     "\"gspo\".")
    band_low: float = key(0.0, "The hard band's lower solve rate (exclusive): problems solved more rarely are "
                               "not trained on.",
                          bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    band_high: float = key(0.5, "The hard band's upper solve rate.",
                           bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    band_include_high: bool = key(True, "Whether band_high itself is in the band (0 < s <= 0.5; CISPO: "
                                        "0 < s < 1).")
    store_cap: int = key(16, "Verified proofs kept per problem in the solved store.",
                         bound=Bound(">= 1", "must be >= 1"))
    length_penalty_start: float = key(0.8, "A proof longer than this share of max_tokens gets the length "
                                           "penalty.",
                                      bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    zero_try: bool = key(True, "Proofs using the `try` tactic get weight 0.")
    try_comments: Literal["reference", "lean"] = key(
        "reference", "Comments skipped when looking for `try`: \"reference\" (a non-greedy /- -/ regex, then "
                     "`--` to the line's end) or \"lean\" (as Lean reads them: nested).")
    lr: float = key(3e-6, "Learning rate (constant; a fresh AdamW every round unless train.optimizer "
                                "is \"carry\").",
                    bound=Bound("> 0", "must be > 0"))
    # DAPO (arXiv 2503.14476 §4.1): "a linear warm-up over 20 rollout steps", 16 gradient updates a rollout
    lr_warmup_steps: int = key(0, "The LR rises linearly from lr / this to lr over the Solver's first this many "
                                  "optimizer steps of the run, counted across rounds (0 = constant LR, the "
                                  "reference's).")
    batch_size: int = key(32, "Sequences per optimizer step.",
                          bound=Bound(">= 1", "must be >= 1"))
    train: bool = key(True, "Train the Solver (false: a frozen Solver).")
    ei_rounds: int = key(3, "Expert Iteration trains on the stored proofs of the last this many rounds.",
                         bound=Bound(">= 1", "must be >= 1"))
    # the reference's statement_selection_mode (sgs/pipeline/config.py:18-24; step1_data_gen.py:539-546 and
    # 1040-1126, step2_train.py:436-478); "stp_improved_ei" is declared there but never implemented
    # (step1_data_gen.py:1057 raises): here it is STP's Expert Iteration, per its comment "at most 16/64 proofs
    # per problem" (docs/algorithm.md, "STP")
    selection: Literal["auto", "hard", "unsolved", "stp_improved_ei", "all_none_0_1", "all", "less_16_proofs"] = key(
        "auto", "Which problems the Solver trains on (the reference's statement_selection_mode): \"auto\" = the "
                "objective's own (reinforce: hard, cispo: all_none_0_1, ei: less_16_proofs, GRPO family: every "
                "sampled group); \"hard\" = the band_* keys; \"unsolved\" = targets first solved this round and "
                "conjectures with s > 0; \"all_none_0_1\" = 0 < s < 1; \"all\" = s > 0; \"less_16_proofs\" = "
                "Expert Iteration (sample targets with < store_cap stored proofs, train on stored proofs of the last "
                "ei_rounds rounds); \"stp_improved_ei\" = STP's (every target and conjecture's verified proofs of "
                "the last ei_rounds rounds, at most proof_cap distinct per problem).")
    # STP keeps at most 16 distinct proofs per statement (kfdong/STP RL/RL_step3_final_model.py:176-187, its
    # Expert Iteration and final re-training); the reference's comment: "at most 16/64 proofs per problem"
    proof_cap: int = key(16, "selection = \"stp_improved_ei\": distinct verified proofs per problem trained on "
                             "(STP: kfdong/STP RL/RL_step3_final_model.py:176-187).",
                         bound=Bound(">= 1", "must be >= 1, got {value}"))
    cispo_clip_max: float = key(4.0, "CISPO: importance weights are clamped to [0, this].")
    cispo_eps: float = key(1e-6, "CISPO: added to the group's reward std before dividing.")
    # The GRPO family (grpo, dr_grpo, dapo, gspo). The importance ratio is clipped to
    # [1 - clip_low, 1 + clip_high]; 0 = the objective's published value (PUBLISHED_CLIP above)
    clip_low: float = key(0.0, "GRPO family: the ratio's lower clip 1 - clip_low (0 = the objective's published "
                               "value: 0.2; GSPO 3e-4).",
                          bound=Bound("[0.0, 1.0)", "must be within [0, 1) (0 = the published value), got {value}"))
    clip_high: float = key(0.0, "GRPO family: the ratio's upper clip 1 + clip_high (0 = the published value: 0.2; "
                                "DAPO 0.28; GSPO 4e-4).",
                           bound=Bound(">= 0.0", "must be >= 0 (0 = the published value), got {value}"))
    # KL to a reference policy frozen at the run's initial Solver weights (backends/reference.py), added per
    # token inside the objective's token average (DeepSeekMath arXiv 2402.03300 eq. (3); TRL GRPOTrainer
    # `per_token_loss + beta * per_token_kl`). 0 = off: TRL GRPOConfig.beta's default; DAPO §2.3, Dr. GRPO
    # and GSPO drop it; DeepSeekMath uses 0.04 (jobs/grpo.toml)
    kl_beta: float = key(0.0, "GRPO family: weight of the per-token KL to the reference policy (the run's "
                              "initial Solver weights); 0 = off (TRL's default); DeepSeekMath 0.04.",
                         bound=Bound(">= 0.0", "must be >= 0 (0 = no KL term), got {value}"))
    kl_estimator: Literal["k3", "k1"] = key(
        "k3", "kl_beta > 0: the per-token KL estimate: \"k3\" = exp(ref - logp) - (ref - logp) - 1 "
              "(DeepSeekMath eq. 4; TRL; verl low_var_kl), \"k1\" = logp - ref (verl kl).")
    # verl's kl_penalty clamps low_var_kl (k3) to [-10, 10] per token; DeepSeekMath and TRL do not (0, the default)
    kl_clamp: float = key(0.0, "kl_beta > 0: each token's KL estimate is clamped to [-kl_clamp, kl_clamp] (no "
                               "gradient outside; verl's low_var_kl: 10); 0 = no clamp (DeepSeekMath, TRL).",
                          bound=Bound(">= 0", "must be >= 0 (0 = no clamp), got {value}"))
    # A = (r - mean) / (std + eps), unbiased std (verl compute_grpo_outcome_advantage's epsilon; TRL: 1e-4)
    grpo_eps: float = key(1e-6, "GRPO, DAPO, GSPO: added to the group's reward std before dividing.",
                          bound=Bound("> 0", "must be > 0, got {value}"))
    # DAPO's overlong reward shaping (arXiv 2503.14476 §3.4; verl reward_manager/dapo.py overlong_buffer):
    # past (1 - overlong_buffer) * max_tokens the reward drops linearly to -overlong_penalty at max_tokens.
    # 0.2 = the paper's experiments: a 4,096-token cache of 20,480 (verl overlong_buffer.len = 4096); 0 = off
    overlong_buffer: float = key(0.2, "DAPO: share of max_tokens at the end over which the reward drops "
                                      "linearly (0 = no overlong shaping).",
                                 bound=Bound("[0.0, 1.0)", "must be within [0, 1) (a fraction of solver.max_tokens; 0 = off), got {value}"))
    overlong_penalty: float = key(1.0, "DAPO: the reward's drop at max_tokens (verl's penalty_factor).",
                                  bound=Bound(">= 0", "must be >= 0, got {value}"))
    # DAPO §3.4's Overlong Filtering (the masking it compares with the shaping above; its final recipe uses the
    # shaping): a truncated sample's tokens leave the loss; its reward still counts in its group's advantages
    overlong_filter: bool = key(False, "DAPO: mask the loss of truncated samples (finish_reason \"length\"; DAPO "
                                       "§3.4 Overlong Filtering), their rewards still in the group's advantages.")
    dapo_incorrect_reward: float = key(-1.0, "DAPO: the reward of an unverified proof (1 for a verified one).")
    # The GRPO family's rollout regime (docs/objectives.md, "Rollout steps"): a round is one rollout step of
    # `rollout_prompts` prompts, trained in rollout_prompts x samples / batch_size updates on the policy that
    # sampled them; the next round samples with the updated weights (verl's dataloader: a seeded shuffle a pass,
    # drop_last). 0 = every target every round (the SGS reference: its rounds are not rollout steps)
    rollout_prompts: int = key(0, "Targets a round samples: 0 = every target (the reference); N = a rollout batch "
                                  "of the next N of a seeded shuffle of the targets, reshuffled each pass (verl's "
                                  "train_batch_size; DAPO 512, DeepSeekMath 1,024 samples / group).",
                               bound=Bound(">= 0", "must be >= 0 (0 = every target), got {value}"))
    # DAPO's dynamic sampling (arXiv 2503.14476 §3.2; verl recipe/dapo: gen_prompt_bsz = 3 x train_prompt_bsz):
    # draw ceil(rollout_prompts x this) targets, drop uniform groups, train the first rollout_prompts groups kept
    rollout_oversample: float = key(1.0, "DAPO with rollout_prompts > 0: a round samples rollout_prompts x this "
                                         "targets and trains the first rollout_prompts groups its dynamic "
                                         "sampling keeps, in draw order (verl's DAPO recipe: 3).",
                                    bound=Bound(">= 1.0", "must be >= 1, got {value}"))
    # DAPO §3.2 "we over-sample and filter out ... until the batch is fully filled" (verl recipe/dapo
    # max_num_gen_batches = 10): a round whose kept groups (with those carried) fall short trains nothing and the
    # next round, same weights, draws the next batch; at the cap the step trains what it has (counted short)
    rollout_max_gen_batches: int = key(1, "DAPO with rollout_prompts > 0: generation batches (rounds) that may "
                                          "fill one rollout step; a round short of rollout_prompts kept groups "
                                          "trains nothing and carries them to the next (verl: 10); 1 = train what "
                                          "one round keeps.",
                                       bound=Bound(">= 1", "must be >= 1 (1 = no re-sampling), got {value}"))

    # The colocated job (docs/objectives.md, "Rollout steps"): one job on the train job's resources runs this many
    # rollout steps (rounds) in a row, its engine kept and given each step's weights in place
    colocated_steps: int = key(0, "With rollout_prompts > 0: rollout steps (rounds) one colocated job runs in a row "
                                  "on slurm.train's resources, keeping one engine whose weights are updated in place "
                                  "after each step, verification still the CPU array; 0 = every round a chain of "
                                  "phase jobs (the default).",
                               bound=Bound(">= 0", "must be >= 0 (0 = the chain of phase jobs), got {value}"))

    def clip_range(self) -> tuple[float, float]:
        """(clip_low, clip_high) of a GRPO-family objective, the published values where a key is 0."""
        low, high = PUBLISHED_CLIP[self.objective]
        return self.clip_low or low, self.clip_high or high

    def rollout_draw(self) -> int:
        """Targets a round samples with a rollout batch: ceil(rollout_prompts x rollout_oversample); 0 = every target."""
        return math.ceil(self.rollout_prompts * self.rollout_oversample - 1e-9) if self.rollout_prompts else 0

    def selection_mode(self) -> str:
        """The selection in effect: `selection`, or for "auto" the objective's own ("hard" for reinforce,
        "all_none_0_1" for cispo, "less_16_proofs" for ei; "auto" stays for the GRPO family: every group)."""
        if self.selection != "auto":
            return self.selection
        return {"reinforce": "hard", "cispo": "all_none_0_1", "ei": "less_16_proofs"}.get(self.objective, "auto")

    def window_rounds(self) -> int:
        """Rounds whose records one round's training reads: `ei_rounds` for Expert Iteration, DAPO's
        `rollout_max_gen_batches` with its re-sampling, else 1."""
        if self.selection_mode() in WINDOW_SELECTIONS:
            return self.ei_rounds
        return self.rollout_max_gen_batches if self.resamples() else 1

    def resamples(self) -> bool:
        """DAPO's re-sampling is on: a rollout step may be filled by several rounds' generation batches."""
        return self.objective == "dapo" and self.rollout_prompts > 0 and self.rollout_max_gen_batches > 1


_SIMULATED_ENV = "SIMULATED tactic environment only (search/simulated.py): "


@dataclass(frozen=True)
class SearchConfig:
    """Tactic-level proof search, the solve phase when `solver.mode = "search"` (docs/search.md).

    Defaults: best-first search as BFS-Prover (arXiv 2502.03438) runs it; the mcts_* keys are nanoproof's
    published SearchConfig defaults (Kripner/nanoproof nanoproof/search.py)."""

    algorithm: Literal["best_first", "mcts"] = key(
        "best_first", "\"best_first\": expand the open node of highest cumulative tactic log-probability (BFS-Prover); "
                      "\"mcts\": AlphaProof-style UCB with progressive sampling (nanoproof).")
    environment: Literal["lean", "simulated", "replay"] = key(
        "lean", "Where tactics run: \"lean\" (the REPL's tactic mode in verify's sandbox), \"simulated\" (SIMULATED "
                "proof states, tests and rehearsals) or \"replay\" (recorded REPL transcripts, tests).")
    replay_dir: str = key("", "environment = \"replay\": the directory of recorded transcripts (X.in, X.expected.out).")
    width: int = key(8, "Tactics sampled per expansion (k).")
    max_expansions: int = key(600, "Expansions per search before it gives up.")
    time_limit_s: float = key(600.0, "Wall-clock seconds per search before it gives up (0 = none).")
    max_depth: int = key(64, "Tactics on a path before a node is no longer expanded.")
    tactic_timeout_s: float = key(10.0, "Seconds one tactic may take in Lean (a slower one is a failed edge).")
    tactic_max_tokens: int = key(256, "Completion tokens per sampled tactic.")
    temperature: float = key(1.1, "Sampling temperature of tactics.")
    length_alpha: float = key(0.0, "best_first: a node's priority is its path's summed log-probability / "
                                   "depth ** this (0 = none; BFS-Prover's length normalisation).")
    max_goal_chars: int = key(4096, "A proof state longer than this many characters is cut in the prompt.")
    concurrent: int = key(64, "Searches a task runs at once; one engine call per wave serves all of them.")
    lean_processes: int = key(4, "Lean REPL processes of one search task (its CPU cores for Lean).")
    mcts_simulations: int = key(50, "mcts: simulations per search (nanoproof num_simulations); max_expansions "
                                    "still bounds it.")
    mcts_c_base: float = key(3200.0, "mcts: UCB exploration base (nanoproof pb_c_base).")
    mcts_c_init: float = key(0.001, "mcts: UCB exploration init (nanoproof pb_c_init).")
    mcts_discount: float = key(0.99, "mcts: value discount (nanoproof value_discount).")
    mcts_prior_temperature: float = key(200.0, "mcts: softmax temperature of the tactics' log-probabilities as "
                                               "priors (nanoproof prior_temperature).")
    mcts_no_actions_value: float = key(-40.0, "mcts: the value of a node with no legal tactic (nanoproof "
                                              "no_legal_actions_value).")
    mcts_ps_c: float = key(0.01, "mcts: progressive sampling coefficient (nanoproof ps_c).")
    mcts_ps_alpha: float = key(0.6, "mcts: progressive sampling exponent (nanoproof ps_alpha).")
    simulated_branching: float = key(0.35, _SIMULATED_ENV + "the chance a sampled tactic is a legal move.")
    simulated_depth: int = key(4, _SIMULATED_ENV + "the most tactics a simulated proof needs.")


@dataclass(frozen=True)
class ConjecturerConfig:
    """The Conjecturer: sampling, its band and training."""

    enabled: bool = key(True, "False: no conjectures (the Solver alone; required for Expert Iteration's "
                              "solver.selection \"less_16_proofs\", solver.objective = \"ei\"'s own).")
    train: bool = key(True, "Train the Conjecturer (false: frozen, and no Guide reviews).")
    conditioned: bool = key(True, "False: the \"no problem conditioning\" prompt, without the target.")
    # the reference's ConjecturerSetup (sgs/models/model_types.py:10-13; sgs/pipeline/step1_data_gen.py:303-375)
    setup: Literal["target_statement_only_unsolved", "target_statement", "seed_statement"] = key(
        "target_statement_only_unsolved", "Which prompts the Conjecturer gets (the reference's ConjecturerSetup): "
        "\"target_statement_only_unsolved\" = one per unsolved target (SGS); \"target_statement\" = one per "
        "target, solved ones too; \"seed_statement\" = STP's: samples_per_target per solved target, each showing "
        "the target and one of its stored proofs, cycling through them.")
    samples_per_target: int = key(1, "Conjectures sampled per target each round (the reference's "
                                     "conjectures_per_statement; per solved target with setup = \"seed_statement\").",
                                  bound=Bound(">= 1", "must be >= 1"))
    temperature: float = key(1.0, "Sampling temperature.",
                             bound=Bound(">= 0", "must be >= 0"))
    max_tokens: int = key(8192, "Completion tokens per conjecture.",
                          bound=Bound(">= 1", "must be >= 1"))
    band_percentile: float = key(0.7, "The Guide reviews conjectures solved 0 < s <= t, t this percentile of "
                                      "the round's solve rates (ties kept).",
                                 bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    length_penalty_start: float = key(0.8, "A conjecture longer than this share of max_tokens gets the length "
                                           "penalty.",
                                      bound=Bound("[0.0, 1.0]", "must be within [0, 1]"))
    lr: float = key(3e-6, "Learning rate (constant; a fresh AdamW every round unless train.optimizer "
                                "is \"carry\").",
                    bound=Bound("> 0", "must be > 0"))
    batch_size: int = key(32, "Sequences per optimizer step.",
                          bound=Bound(">= 1", "must be >= 1"))
    reward: Literal["sgs", "stp"] = key(
        "sgs", "The Conjecturer's reward: \"sgs\" = R_guide x (1 - s), min-max normalised, over the "
               "band_percentile band; \"stp\" = STP's: weight 1 for each conjecture with 0 < s < stp_threshold "
               "that passes the elegance filter (no Guide).")
    # STP trains its conjecturer on conjectures with pass rate < CONJECTURE_THRESHOLD = 0.25 (kfdong/STP
    # RL/utils/RL_utils.py:28, get_conjecture_examples line 481: `get_succ_rate(test_info) < CONJECTURE_THRESHOLD`)
    stp_threshold: float = key(0.25, "reward = \"stp\": conjectures with 0 < s < this are trained on (kfdong/STP "
                                     "RL/utils/RL_utils.py:28, CONJECTURE_THRESHOLD).",
                               bound=Bound("(0.0, 1.0]", "must be within (0, 1], got {value}"))
    # STP's elegance filter: filter_by_ratio(..., threshold=0.2) (RL_utils.py:79-101, called at 373) drops the
    # conjectures whose shortest proof / statement length ratio is below the 20% quantile of their group
    stp_elegance_quantile: float = key(0.2, "reward = \"stp\": a conjecture whose shortest verified proof per "
                                            "statement character is below this quantile of the candidates' is "
                                            "dropped (kfdong/STP RL/utils/RL_utils.py:79-101, 373); 0 = no filter.",
                                       bound=Bound("[0.0, 1.0)", "must be within [0, 1), got {value}"))
    dedup: Literal["exact", "whitespace"] = key(
        "exact", "Conjectures are de-duplicated against the targets and each other by \"exact\" string "
                 "equality (the reference) or with runs of whitespace collapsed first (\"whitespace\").")


@dataclass(frozen=True)
class ExtractionConfig:
    """How proofs and conjectures are read out of the models' replies."""

    declarations: Literal["reference", "code_only"] = key(
        "reference", "How the Solver's reply counts its declarations: \"reference\" counts `theorem `, `lemma `, "
                     "`def ` anywhere (comments included); \"code_only\" counts Lean words outside comments.")
    conjecture: Literal["reference", "code_only"] = key(
        "reference", "How the Conjecturer's statement is found: \"reference\" (last ```lean4 to last ```, `sorry` "
                     "counted with comments) or \"code_only\" (fences paired, `sorry` as a word outside "
                     "comments).")
    conjecture_imports: Literal["drop", "keep"] = key(
        "drop", "`import` lines before a conjecture's theorem: \"drop\" them (the header already imports "
                "Mathlib) or \"keep\" them (the reference: the file then fails in Lean).")


@dataclass(frozen=True)
class GuideConfig:
    """The Guide: it reviews the Conjecturer's in-band conjectures; its score weights their reward."""

    enabled: bool = key(True, "False: the \"no guide\" ablation, R_guide = 1.")
    temperature: float = key(1.0, "Sampling temperature.",
                             bound=Bound(">= 0", "must be >= 0"))
    max_tokens: int = key(8192, "Completion tokens per review.",
                          bound=Bound(">= 1", "must be >= 1"))


@dataclass(frozen=True)
class TrainConfig:
    """The trainer (DeepSpeed) shared by the trained roles."""

    backend: Literal["deepspeed", "simulated"] = key(
        "deepspeed", "\"deepspeed\", or \"simulated\" (SIMULATED trainer: counts steps and tokens, writes tiny "
                     "weights).")
    simulated_param_count: int = key(6_910_000_000, "SIMULATED trainer: the size a checkpoint is recorded as "
                                                    "(2 bytes per parameter, bf16).")
    betas: tuple[float, float] = key((0.9, 0.95), "AdamW betas.")
    weight_decay: float = key(0.0, "AdamW weight decay.")
    grad_clip: float = key(1.0, "Gradient norm clip.",
                           bound=Bound(">= 0", "must be >= 0"))
    micro_batch_size: int = key(1, "Sequences per forward/backward pass (gradients accumulate to the role's "
                                   "batch_size).")
    zero_stage: int = key(2, "DeepSpeed ZeRO stage: 0, 1 or 2 (3 is refused: exporting does not gather "
                             "partitioned weights).")
    bf16: bool = key(True, "Train in bf16.")
    gradient_checkpointing: bool = key(True, "Recompute activations in the backward pass (less memory).")
    keep_fp32_master: bool = key(False, "True: fp32 weights are kept between rounds (bf16 exported for "
                                        "generation); false (the reference): each round trains from the last "
                                        "bf16 weights.")
    # the SGS reference starts a fresh AdamW every round (its training is a new trainer each round); the GRPO
    # family's papers (DeepSeekMath, DAPO, GSPO, Dr. GRPO) and TRL/verl run one optimizer through the training
    optimizer: Literal["fresh", "carry"] = key(
        "fresh", "Each role's AdamW at the start of a round's training: \"fresh\" (new every round: the SGS "
                 "reference's) or \"carry\" (the moments and step counts its last trained round ended with, "
                 "saved under checkpoints/optimizer/<role>/: one optimizer through the run, as the GRPO "
                 "family's papers and TRL/verl).")
    cpu_ranks: int = key(1, "Training processes per node when slurm.train.gpus = 0 (gloo; CPU rehearsals).",
                         bound=Bound(">= 1", "must be >= 1, got {value}"))
    # pi_old of the ratio (CISPO, the GRPO family): the sampler's logprobs (the SGS reference's CISPO), or the
    # trainer's own under the weights it starts the round from, computed before the first update (verl's
    # old_log_prob; DeepSeekMath's pi_theta_old); backends/reference.py
    old_logprobs: Literal["sampler", "recompute"] = key(
        "sampler", "The importance ratio's denominator: \"sampler\" (the logprobs recorded by vLLM/transformers "
                   "with the sample; the SGS reference's CISPO) or \"recompute\" (the trainer's own, under the "
                   "round's starting weights, before its first update; verl, DeepSeekMath).")
    # the process group's timeout: a collective (NCCL or gloo) that waits this long for a dead or hung
    # rank fails its rank, so the job fails and is retried like a crash; it must exceed the longest wait
    # of the other ranks at a collective (rank 0's weight export, a checkpoint save, a slow model load)
    collective_timeout_s: float = key(600.0, "Seconds a collective (NCCL or gloo) waits for a dead or hung rank "
                                             "before the job fails and is retried like a crash.",
                                      bound=Bound("> 0", "must be > 0 seconds (a collective waits this long for a dead or hung rank), got {value}"))


@dataclass(frozen=True)
class VerificationConfig:
    """Lean verification: the REPL, the kernel re-check, the sandbox and its limits (verification/)."""

    backend: Literal["lean", "simulated"] = key("lean", "\"lean\", or \"simulated\" (a deterministic stand-in, "
                                                        "not Lean; said in status and TensorBoard).")
    timeout_s: float = key(500.0, "Seconds per proof file (header + theorem + proof), as the reference's "
                                  "verifier_timeout; with timeout_includes_header the header's share of it is "
                                  "the seconds its REPL process took to start and import it.",
                           bound=Bound("> 0", "must be > 0"))
    timeout_includes_header: bool = key(True, "The proof's elaboration gets timeout_s less the seconds its REPL "
                                              "process took to start and elaborate the header (the reference times "
                                              "each file in a fresh process, import included); false: timeout_s "
                                              "for the proof alone.")
    repl_command: tuple[str, ...] = key(("lake", "env", ".lake/packages/REPL/.lake/build/bin/repl"),
                                        "The REPL lean/install.sh builds, run through `lake env` so Mathlib is "
                                        "on its path.")
    project_dir: str = key("lean", "The Lean project the REPL runs in; a relative path is resolved against "
                                   "the repository root.")
    memory_limit_mb: int = key(16384, "RLIMIT_AS per REPL process; 0 = no limit.",
                               bound=Bound(">= 0", "must be >= 0 (0 = no limit)"))
    max_proofs_per_process: int = key(200, "Proofs a REPL process checks before it is replaced.",
                                      bound=Bound(">= 1", "must be >= 1"))
    system_error_retries: int = key(1, "Retries of a proof on a fresh process after a REPL system error.",
                                    bound=Bound(">= 0", "must be >= 0"))
    header_timeout_s: float = key(600.0, "Seconds to elaborate a header (`import Mathlib`), once per process.",
                                  bound=Bound("> 0", "must be > 0"))
    failed_warning_fails: bool = key(True, "A warning containing \"failed\" fails the proof (the reference's "
                                           "rule; rejects some honest aesop proofs).")
    kernel_recheck: bool = key(True, "Replay every proof the REPL calls verified through the kernel in a "
                                     "separate checker that never elaborates a proof.")
    checker_command: tuple[str, ...] = key(("lake", "env", ".lake/build/bin/sgs_kernel_check"),
                                           "The kernel checker (lean/SgsKernelCheck.lean).")
    sandbox: Literal["bwrap", "none"] = key("bwrap", "Run REPL and checker in bubblewrap (read-only filesystem, "
                                                     "no network, own namespaces); \"none\" = as they are.")
    sandbox_tmpfs_mb: int = key(512, "Cap on the sandbox's private /tmp, /run, /dev/shm (bwrap 0.7+); 0 = none.",
                                bound=Bound(">= 0", "must be >= 0 (0 = no cap)"))
    scratch_dir: str = key("", "Where the per-process scratch directories go; \"\" = the system's temp dir.")
    scratch_mb: int = key(512, "The REPL's scratch tmpfs and the largest file a REPL or checker process may "
                               "write (RLIMIT_FSIZE); 0 = no limit.",
                          bound=Bound(">= 0", "must be >= 0 (0 = no cap)"))
    cpu_time_factor: float = key(2.0, "RLIMIT_CPU of each process = this x (header_timeout_s + "
                                      "max_proofs_per_process x timeout_s); 0 = no limit.",
                                 bound=Bound(">= 0", "must be >= 0 (0 = no CPU limit)"))
    process_limit: int = key(1024, "RLIMIT_NPROC inside a sandbox with its own user namespace; 0 = no limit.",
                             bound=Bound(">= 0", "must be >= 0 (0 = no limit)"))
    idle_check_ms: float = key(20.0, "After each proof the pool samples the REPL's threads' run and run-queue time "
                                     "this many ms apart and restarts the REPL if it wants CPU while idle (work a "
                                     "proof left; two windows in a row); 0 = no check.",
                               bound=Bound(">= 0", "must be >= 0 (0 turns the check off), got {value}"))
    idle_cpu_fraction: float = key(0.25, "idle_check_ms: the share of one core an idle REPL may want (run or wait "
                                         "in the run queue, so a starved spinner on a loaded node counts whole) "
                                         "before it is restarted.",
                                   bound=Bound(">= 0", "must be >= 0 (0 turns the check off), got {value}"))
    thread_slack: int = key(32, "Restart a REPL that holds more than this many threads beyond its count right after "
                                "its header (Lean's own task pool grows with a proof's parallel tasks: keep it "
                                "generous).",
                            bound=Bound(">= 0", "must be >= 0 (0 turns the check off), got {value}"))
    timeout_cpu_factor: float = key(1.5, "A proof that times out on a REPL that had checked proofs before, while the "
                                         "REPL used or wanted more than this many cores (or held more "
                                         "than thread_slack extra threads), is checked once more on a fresh REPL; "
                                         "0 = never.",
                                    bound=Bound(">= 0", "must be >= 0 (0 turns the check off), got {value}"))
    slot_cpus: float = key(1.0, "Per pool slot (REPL and checker) a cgroup v2 group with cpu.max of this many "
                                "cores, where the verify task's cgroup is delegated to the user (the canary says "
                                "whether it is); elsewhere nothing. 0 = no cpu.max.",
                           bound=Bound(">= 0", "must be >= 0 cores (0 = no cpu.max), got {value}"))
    slot_pids: int = key(2048, "The same per-slot group's pids.max (processes and threads of the slot's REPL and "
                               "checker together); 0 = no pids.max.",
                         bound=Bound(">= 0", "must be >= 0 tasks (0 = no pids.max), got {value}"))
    process_filter: bool = key(True, "A seccomp filter denies REPL and checker process creation (threads "
                                     "allowed; x86_64 and aarch64).")
    max_heartbeats_option: int = key(0, "Largest `maxHeartbeats` / `synthInstance.maxHeartbeats` a proof or "
                                        "statement may set (`set_option ... in`); 0 = any value, Lean's 0 (no "
                                        "limit) included: timeout_s bounds every proof.",
                                     bound=Bound(">= 0", "must be >= 0 (0 = any value), got {value}"))
    max_rec_depth_option: int = key(100000, "Largest `maxRecDepth` / `synthInstance.maxSize` a proof or statement "
                                            "may set; 0 = any value.",
                                    bound=Bound(">= 0", "must be >= 0 (0 = any value), got {value}"))
    streaming: bool = key(True, "Verify tasks start with their solve tasks and check each problem as its line "
                                "lands in the solve task's item log, as the reference checks proofs while they are "
                                "generated; false = each starts when its solve task has ended.")
    stream_poll_s: float = key(2.0, "streaming: seconds between a verify task's looks at its solve task's item "
                                    "log while it has nothing to check.",
                               bound=Bound("> 0", "must be > 0 seconds, got {value}"))
    stream_yield_s: float = key(120.0, "streaming on Slurm: a verify task with nothing to check whose solve task "
                                       "has not run for this long (requeued, preempted) requeues itself, so that "
                                       "its CPUs cannot keep the solve task waiting; 0 = never.",
                                bound=Bound(">= 0", "must be >= 0 seconds (0 = never), got {value}"))


@dataclass(frozen=True)
class CheckpointConfig:
    """Which rounds' weights are kept (round/checkpoints.py)."""

    keep_last: int = key(2, "Weights of the last this many rounds are kept.",
                         bound=Bound(">= 1", "must be >= 1 (the next round needs the last weights)"))
    keep_every: int = key(10, "And of every this-many-th round; 0 = none.",
                          bound=Bound(">= 0", "must be >= 0"))
    estimate_gb_per_role: float = key(14.8, "One role's saved weights in GB, for the disk projection (a 7B "
                                            "model in bf16).",
                                      bound=Bound(">= 0", "must be >= 0"))


@dataclass(frozen=True)
class RecordsConfig:
    """What the run directory keeps of a round's generations once no training reads them (round/compaction.py)."""

    keep_sample_tokens: bool = key(False, "True: keep everything (the token arrays files: ~0.2 GB a round per "
                                          "1,000 targets); false: they go, their counts stay, and outputs are "
                                          "gzipped once no training reads them (texts, verdicts and reviews stay).")
    keep_text: Literal["all", "verified"] = key(
        "all", "What compaction keeps of the replies: \"all\" (gzipped), or \"verified\" (only verified Solver "
               "samples' text and proof; ~12 GB less over a 200-round D_3k run).")


@dataclass(frozen=True)
class AlertsConfig:
    """What `status`, `watch` and each round's end report as alarms (round/alarms.py, views/progress.py),
    and how often long work logs its progress."""

    progress_every_s: float = key(60.0, "A progress line (rate, done/total, ETA) in a worker's log at most "
                                        "this often.",
                                  bound=Bound("> 0", "must be > 0"))
    stuck_after_s: float = key(0.0, "A shard without item progress this long is stuck; 0 = auto "
                                    "(stuck_factor x the phase's per-item time, at least stuck_floor_s).",
                               bound=Bound(">= 0", "must be >= 0"))
    stuck_factor: float = key(10.0, "Auto stuck threshold: this many times the phase's recent per-item time.",
                              bound=Bound(">= 0", "must be >= 0"))
    stuck_floor_s: float = key(1800.0, "Auto stuck threshold: never less than this.",
                               bound=Bound(">= 0", "must be >= 0"))
    # a train job without a new optimizer step for max(train_stuck_floor_s, train_stuck_factor x its
    # slowest step so far) is stuck (the floor covers ingesting, loading the weights, exporting them)
    train_stuck_factor: float = key(10.0, "A train job without a new optimizer step for this many times its "
                                          "slowest step so far is stuck (at least train_stuck_floor_s).",
                                    bound=Bound(">= 0", "must be >= 0"))
    train_stuck_floor_s: float = key(1800.0, "The train stuck threshold's floor (ingesting, loading and exporting "
                                             "weights take time without steps).",
                                     bound=Bound(">= 0", "must be >= 0"))
    max_error_rate: float = key(0.2, "Verify: alarm when timeouts + errors exceed this share of checked proofs.",
                                bound=Bound("[0, 1]", "must be in [0, 1]"))
    max_refused_rate: float = key(0.02, "Verify: alarm when the verifier's own rules (static checks, kernel "
                                        "re-check; not Lean's failures) refuse more than this share of checked "
                                        "proofs; 1 = never.",
                                  bound=Bound("[0, 1]", "must be in [0, 1] (1 = never)"))
    refused_items: int = key(3, "Verify refusals: per reason, this many of the most frequent items that set them off "
                                "(tactic, option, name) are kept as metrics and shown by status and the report.",
                             bound=Bound(">= 0", "must be >= 0, got {value}"))
    slow_phase_factor: float = key(3.0, "Alarm when a phase runs this many times its recent average wall time.",
                                   bound=Bound(">= 0", "must be >= 0"))
    slow_phase_rounds: int = key(3, "The recent average is over this many previous rounds.",
                                 bound=Bound(">= 1", "must be >= 1"))
    disk_budget_gb: float = key(0.0, "Alarm when disk projected to the planned rounds exceeds this; 0 = no "
                                     "budget.",
                                bound=Bound(">= 0", "must be >= 0"))
    min_free_mb: float = key(64.0, "`status`, `watch` and `--wait` blame a stalled run on the disk (with the free "
                                    "space and the path) when the file system holding the run directory has less "
                                    "free than this.")


@dataclass(frozen=True)
class ShardsConfig:
    """Array sizes (tasks per phase and round).

    verify = 0: as many verify tasks as solve tasks, verify task i checks solve shard i. verify =
    k x solve: verify task j checks every verify-th problem of solve shard j mod solve
    (`Config.solve_shard_of`): few GPU tasks (one engine start each) with many CPU tasks for Lean.
    Either way a verify task starts with its solve task and checks its problems as they are
    generated (`verification.streaming`), or when that solve task is done (streaming off).
    """

    conjecture: int = key(8, "Conjecture tasks per round.",
                          bound=Bound(f"[1, {MAX_TASKS}]", f"must be >= 1 and <= {MAX_TASKS}, got {{value}}"))
    solve: int = key(64, "Solve tasks per round.",
                     bound=Bound(f"[1, {MAX_TASKS}]", f"must be >= 1 and <= {MAX_TASKS}, got {{value}}"))
    guide: int = key(8, "Guide tasks per round.",
                     bound=Bound(f"[1, {MAX_TASKS}]", f"must be >= 1 and <= {MAX_TASKS}, got {{value}}"))
    verify: int = key(0, "Verify tasks per round: 0 = one per solve task, or a multiple of shards.solve (each "
                         "checks a share of one solve task's problems).",
                      bound=Bound(f"<= {MAX_TASKS}", f"must be <= {MAX_TASKS}, got {{value}}"))


@dataclass(frozen=True)
class SlurmPhaseConfig:
    """One phase's Slurm job (`[slurm.<phase>]`; `[slurm.defaults]` for every phase)."""

    partition: str = key("", "Slurm partition; \"\" = the site's default.")
    account: str = key("", "Slurm account; \"\" = yours by default.")
    qos: str = key("", "Slurm QOS; \"\" = the default.")
    gpus: int = key(0, "GPUs per task (per node).")
    cpus: int = key(1, "CPUs per task (per node).")
    nodes: int = key(1, "Nodes per task: train only (one Slurm task per node, ranks = nodes x gpus).")
    mem: str = key("8G", "Memory per task (per node), a Slurm size such as \"64G\".")
    time_min: int = key(240, "Time limit per task in minutes (a task stopped at it requeues and resumes).")
    array_parallelism: int = key(64, "Tasks of the phase's array running at once.")
    signal_delay_s: int = key(120, "SIGUSR2 this long before the time limit (the task saves and requeues).")
    extra: dict[str, str] = field(default_factory=dict, metadata={
        "help": "More sbatch options, e.g. {constraint = \"h200\"}."})
    scratch: str = key("", "Node-local directory to copy a model's weights into before loading (e.g. "
                           "\"$TMPDIR\"); \"\" = load in place.")
    setup: tuple[str, ...] = key((), "Shell lines run at the top of the job script (e.g. \"module load "
                                      "cuda/12\"); usually set once in [slurm.defaults].")


@dataclass(frozen=True)
class ScalingConfig:
    """`sgsbatch fit`: the scaling law of the cumulative solve rate (the SGS paper; docs/algorithm.md) and the paper's fit."""

    min_generations: int = key(100_000, "Points below this many generations so far are dropped before fitting.",
                               bound=Bound(">= 0", "must be >= 0, got {value}"))
    halves: int = key(20, "Random-half refits for the spread of A; 0 = none.",
                      bound=Bound(">= 0", "must be >= 0 (0 = no random-half refits), got {value}"))
    paper_asymptote: float = key(0.671, "The paper's SGS fit: A, printed for comparison.",
                                 bound=Bound("[0.0, 1.0]", "must be within [0, 1] (a solve rate), got {value}"))
    paper_c_mid: float = key(1_252_336.0, "The paper's SGS fit: C_mid.",
                             bound=Bound("> 0", "must be > 0 (generations), got {value}"))
    paper_b: float = key(0.585, "The paper's SGS fit: B.",
                         bound=Bound("> 0", "must be > 0, got {value}"))
    paper_halves_asymptote: float = key(0.676, "The paper's random-half fits: mean A (67.6%).",
                                        bound=Bound("[0.0, 1.0]", "must be within [0, 1] (a solve rate), got {value}"))
    paper_halves_std: float = key(0.011, "The paper's random-half fits: std of A (1.1%).",
                                  bound=Bound(">= 0", "must be >= 0, got {value}"))


@dataclass(frozen=True)
class ReportConfig:
    """`sgsbatch report`: what the shared HTML page shows (views/report.py)."""

    recent_rounds: int = key(3, "Example conjectures come from this many last rounds that have any.",
                             bound=Bound(">= 0", "must be >= 0, got {value}"))
    examples: int = key(5, "Example conjectures per such round (highest guide score first).",
                        bound=Bound(">= 0", "must be >= 0, got {value}"))
    score_bins: int = key(20, "Histogram bins of the guide score distributions.",
                          bound=Bound(">= 1", "must be >= 1, got {value}"))
    max_statement_chars: int = key(600, "An example statement longer than this is cut (with a mark).",
                                   bound=Bound(">= 20", "must be >= 20, got {value}"))


def _gpu(gpus: int, cpus: int, mem: str, time_min: int) -> SlurmPhaseConfig:
    return SlurmPhaseConfig(gpus=gpus, cpus=cpus, mem=mem, time_min=time_min)


@dataclass(frozen=True)
class SlurmConfig:
    """Each phase's Slurm job, and Slurm's mail about the run. A jobs file (or site file) may also hold `[slurm.defaults]`: keys of
    a phase table that apply to every phase whose own table does not set them (config/loading.py
    merges it into the six phases and the watcher; it is not kept in the run's frozen config)."""

    init: SlurmPhaseConfig = field(default_factory=lambda: SlurmPhaseConfig(cpus=4, mem="32G", time_min=60))
    conjecture: SlurmPhaseConfig = field(default_factory=lambda: _gpu(1, 8, "64G", 240))
    solve: SlurmPhaseConfig = field(default_factory=lambda: _gpu(1, 8, "64G", 480))
    verify: SlurmPhaseConfig = field(
        default_factory=lambda: SlurmPhaseConfig(cpus=33, mem="128G", time_min=480, array_parallelism=128)
    )
    guide: SlurmPhaseConfig = field(default_factory=lambda: _gpu(1, 8, "64G", 240))
    # 600 s of warning: a ZeRO-2 checkpoint of a 7B model with Adam states is ~100 GB (docs/engines.md: sizing)
    train: SlurmPhaseConfig = field(
        default_factory=lambda: SlurmPhaseConfig(gpus=8, cpus=64, mem="800G", time_min=720, signal_delay_s=600)
    )
    # `sgsbatch watch RUN --submit`: one small CPU job that watches the run and requeues itself
    # before its time limit (4 h fits most sites' short CPU partitions)
    watcher: SlurmPhaseConfig = field(
        default_factory=lambda: SlurmPhaseConfig(cpus=1, mem="2G", time_min=240, signal_delay_s=60)
    )
    # Slurm's own mail (sbatch --mail-user/--mail-type), so a run's end or failure reaches a person with
    # nothing of ours left running (scheduling/slurm.mail_parameters says which job gets which types)
    mail_user: str = key("", "Mail address Slurm writes to about the run's jobs (sbatch --mail-user); \"\" = "
                             "no mail. Usually set once in the site file.")
    mail_type: str = key("END,FAIL", "sbatch --mail-type of the job whose end is the run's end: the last "
                                     "round's train job (with slurm.mail_user).")
    mail_type_failure: str = key("FAIL", "sbatch --mail-type of every other job of the run (a failed job stalls "
                                         "the run: what depends on it never starts); \"\" = none.")


@dataclass(frozen=True)
class CanaryConfig:
    """`sgsbatch canary`: one short Slurm job per job shape running each real component (canary/)."""

    targets: int = key(4, "Run targets whose real prompts each generation check renders and samples.",
                       bound=Bound("[1, 64]", "must be >= 1 and <= 64, got {value}"))
    max_tokens: int = key(256, "Tokens per canary sample (the Guide check uses guide.max_tokens: a reply must "
                               "be whole).",
                          bound=Bound(">= 1", "must be >= 1, got {value}"))
    min_guide_parse_rate: float = key(0.9, "Share of Guide replies that must parse (the published Guide "
                                           "parses >99%, the base model ~55%).",
                                      bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    loop_timeout_s: float = key(20.0, "The per-proof timeout the looping canary proof must run into.",
                                bound=Bound("> 0", "must be > 0 seconds, got {value}"))
    checkpoint_share: float = key(0.5, "A stop checkpoint may take at most this share of "
                                       "slurm.train.signal_delay_s.",
                                  bound=Bound("(0.0, 1.0]", "must be within (0, 1], got {value}"))
    time_min: int = key(30, "Each canary job's time limit in minutes (never more than its phase's "
                            "slurm.<phase>.time_min).",
                        bound=Bound(">= 1", "must be >= 1 minute, got {value}"))
    max_age_days: float = key(14.0, "Launch accepts a passed canary this recent (same config fingerprint and "
                                    "environment).",
                              bound=Bound("> 0", "must be > 0 days, got {value}"))


_ESTIMATE = "an estimate, no published figure: "


@dataclass(frozen=True)
class ProjectionConfig:
    """`launch --dry-run` and `sgsbatch plan`: the run projected before launch (views/projection.py).

    Throughput figures are published ones; a passed canary's measurements replace some of them
    (views/plan.py says which); work per round comes from the config and the shares below.
    """

    hub_targets: int = key(3323, "Targets assumed when data.source is a Hugging Face id (a plan downloads "
                                 "nothing): D_3k's 3,323 (the SGS paper, arXiv 2604.20209).",
                           bound=Bound(">= 0", "must be >= 0, got {value}"))
    unsolved_share: float = key(0.5, "Mean share of the targets unsolved in a round (each gets "
                                     "conjecturer.samples_per_target conjectures): ~1.7k conjectures a round of "
                                     "D_3k's 3,323 targets, as a full-shape round is sized (the SGS paper: ~1.5k).",
                                bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    reviewed_share: float = key(0.3, "Share of the conjectures the Guide reviews (those in the band); "
                                     + _ESTIMATE + "compare guide/reviews with conjectures/generated.",
                                bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    trained_share: float = key(0.1, "Share of the Solver's samples it trains on (verified, in the hard band); "
                                    + _ESTIMATE + "compare train/solver_sequences with generations/round.",
                               bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    mean_tokens: float = key(750.0, "Mean generated tokens per sample, every role: ~30M tokens over a D_3k round's ~40k "
                                    "samples, an estimate (the reference caps a reply at 8,192).",
                             bound=Bound("> 0", "must be > 0, got {value}"))
    prompt_tokens: float = key(400.0, "Mean prompt tokens (chat template, header, statement); " + _ESTIMATE
                                      + "the canary prints the longest real prompt.",
                               bound=Bound(">= 0", "must be >= 0, got {value}"))
    decode_short_tokens_per_s: float = key(8000.0, "Decode tokens/s per GPU at short context: 1-8k "
                                                   "tokens/s per H100 by context (an estimate) for DeepSeek-Prover-V2-7B (full "
                                                   "multi-head attention: 30 layers x 32 heads x 128 x K,V x bf16 = "
                                                   "480 KiB of KV cache per token).",
                                           bound=Bound("> 0", "must be > 0, got {value}"))
    decode_long_tokens_per_s: float = key(1000.0, "Decode tokens/s per GPU at generation.max_model_len of context "
                                                  "(the same source); in between, the KV cache bounds the batch: "
                                                  "tokens/s falls as 1 / context, capped by the short figure.",
                                          bound=Bound("> 0", "must be > 0, got {value}"))
    lean_proofs_per_s: float = key(0.08, "Lean proofs/s per verify core: the Kimina Lean Server report's "
                                         "~0.07-0.1 (arXiv 2504.21230).",
                                   bound=Bound("> 0", "must be > 0, got {value}"))
    repl_start_s: float = key(15.0, "Seconds a REPL process takes to elaborate `import Mathlib` (once per "
                                    "verification.max_proofs_per_process proofs); " + _ESTIMATE
                                    + "the canary measures it.",
                              bound=Bound(">= 0", "must be >= 0, got {value}"))
    model_load_s: float = key(150.0, "Engine start per generating task (a 7B model: ~15 GB loaded, CUDA graphs "
                                     "captured): docs/engines.md's 1.5-3 min; also each trained role's load.",
                              bound=Bound(">= 0", "must be >= 0, got {value}"))
    train_tokens_per_s: float = key(3000.0, "Training tokens/s per GPU: Llama 2's 7B took 184,320 A100-hours for "
                                            "2T tokens (arXiv 2307.09288), ~3.0k tokens/s per GPU.",
                                    bound=Bound("> 0", "must be > 0, got {value}"))
    # the GRPO family's KL and recomputed old log-probs: the trainer's forward-only scoring passes (backends/reference.py); training a token is a forward
    # and a backward (~3 forwards), ~4 with gradient checkpointing (bench/README.md, bench_kl.py: +28-32% on CPU)
    scoring_pass_share: float = key(0.25, "A forward-only scoring pass (recomputed old log-probs, the KL's "
                                          "reference) as a share of training the same tokens: ~1/4 with "
                                          "gradient checkpointing, ~1/3 without.")
    checkpoint_write_s: float = key(60.0, "Seconds to write one trained role's weights at a round's end (bf16, "
                                          "checkpoints.estimate_gb_per_role at ~0.25 GB/s); " + _ESTIMATE
                                          + "the canary's checkpoint write speed replaces it.",
                                    bound=Bound(">= 0", "must be >= 0, got {value}"))
    search_expansion_share: float = key(0.5, "solver.mode = \"search\": mean expansions of a search as a share of "
                                             "its budget (search.max_expansions; mcts: also mcts_simulations): a "
                                             "search that finds a proof stops early; " + _ESTIMATE
                                             + "compare search/expansions with the searches x the budget.",
                                        bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    search_prompt_tokens: float = key(600.0, "solver.mode = \"search\": prompt tokens per expansion (instruction, "
                                             "theorem, tactics so far, goals: search/policy.py); " + _ESTIMATE
                                             + "longer than a whole-proof prompt by the goals printed.",
                                      bound=Bound(">= 0", "must be >= 0, got {value}"))
    search_tactic_tokens: float = key(24.0, "solver.mode = \"search\": mean generated tokens per sampled tactic "
                                            "(an expansion generates search.width of them); " + _ESTIMATE
                                            + "one Lean tactic line of ~60-100 characters at ~3-4 characters a token.",
                                      bound=Bound(">= 0", "must be >= 0, got {value}"))
    search_distinct_share: float = key(0.6, "solver.mode = \"search\": share of an expansion's search.width tactics "
                                            "that are distinct and well formed (each one Lean call); " + _ESTIMATE
                                            + "compare the search task's lean_calls with requests x width.",
                                       bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    search_solved_share: float = key(0.3, "solver.mode = \"search\": share of searches that find a proof (only "
                                          "those go to verify); " + _ESTIMATE + "compare search/solved.",
                                     bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))
    lean_tactic_s: float = key(0.5, "solver.mode = \"search\": Lean seconds per tactic applied (REPL tactic mode, "
                                    "failed and timed-out tactics included); " + _ESTIMATE + "the canary's known "
                                    "proof replayed tactic by tactic measures a floor that raises it.",
                               bound=Bound(">= 0", "must be >= 0, got {value}"))
    # measured by bench/bench_weight_update.py (vLLM CPU build, 25.7M parameters): 0.84 s in place vs 18.8 s for a
    # fresh engine; 7B bf16 (~15 GB) over NVLink / CUDA IPC on one node: seconds (an extrapolation, bench/README.md)
    weight_update_s: float = key(5.0, "The colocated rollout job (solver.colocated_steps; plan projects it with any "
                                      "solver.rollout_prompts > 0): seconds to load a step's new weights into the running engine in place "
                                      "(bench/bench_weight_update.py: 0.84 s on CPU for 25.7M parameters; 7B on one "
                                      "node: seconds, an extrapolation, not measured on GPUs).")
    queue_wait_s: float = key(60.0, "Queue wait per hand-over from one phase's jobs to the next's; " + _ESTIMATE
                                    + "site-dependent (sacct's Start - Submit).",
                              bound=Bound(">= 0", "must be >= 0, got {value}"))
    gpu_budget: int = key(0, "GPUs one phase may hold at once, for the shard advice; 0 = the train job's GPUs "
                             "(slurm.train.gpus x nodes: the reference's one 8-GPU node).",
                          bound=Bound(">= 0", "must be >= 0, got {value}"))
    cpu_budget: int = key(4224, "CPUs the verify phase may hold at once, for the shard advice: 128 tasks x 33 "
                                "CPUs, the SGS reference's verify jobs.",
                          bound=Bound(">= 0", "must be >= 0, got {value}"))
    simulated_time_scale: float = key(0.0, "Rehearsals: > 0 makes the SIMULATED engine, verifier and trainer sleep "
                                           "the time these figures give (decode by context, model load, Lean per "
                                           "proof and REPL start, training, checkpoint write; "
                                           "config/simulated_time.py) times this: 1 = real time, 0.01 = 100x "
                                           "faster; 0 = no sleep.",
                                      bound=Bound(">= 0", "must be >= 0, got {value}"))
    advice_margin: float = key(0.05, "The advice names the fewest shards whose phase is within this share of the "
                                     "shortest the budget allows (more shards cost more start-ups).",
                               bound=Bound("[0.0, 1.0]", "must be within [0, 1], got {value}"))


@dataclass(frozen=True)
class Config:
    """A run's whole configuration: one table per part (`sgsbatch config keys` lists every key)."""

    run: RunConfig = field(default_factory=RunConfig)
    data: DataConfig = field(default_factory=DataConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    prompts: PromptsConfig = field(default_factory=PromptsConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    conjecturer: ConjecturerConfig = field(default_factory=ConjecturerConfig)
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    guide: GuideConfig = field(default_factory=GuideConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    verification: VerificationConfig = field(default_factory=VerificationConfig)
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    records: RecordsConfig = field(default_factory=RecordsConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    shards: ShardsConfig = field(default_factory=ShardsConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    scaling: ScalingConfig = field(default_factory=ScalingConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    canary: CanaryConfig = field(default_factory=CanaryConfig)
    projection: ProjectionConfig = field(default_factory=ProjectionConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    @property
    def simulated(self) -> bool:
        """True when any SIMULATED component (verifier, generation, trainer, a search's tactic environment
        other than Lean) is in use."""
        return (self.verification.backend == "simulated" or self.generation.backend == "simulated"
                or self.train.backend == "simulated" or self.run.rehearsal
                or (self.solver.mode == "search" and self.search.environment != "lean"))

    def simulated_parts(self) -> list[str]:
        """Which components are SIMULATED (or replayed), in words: what launch, the plan and logs name."""
        parts = [name for name, on in (("generation", self.generation.backend == "simulated"),
                                       ("verifier", self.verification.backend == "simulated"),
                                       ("trainer", self.train.backend == "simulated"),
                                       ("tactic environment", self.solver.mode == "search"
                                        and self.search.environment == "simulated"),
                                       ("replayed tactic environment", self.solver.mode == "search"
                                        and self.search.environment == "replay")) if on]
        return parts

    def simulated_label(self) -> str:
        """The SIMULATED parts as one string for a row of results (`proofs`, the export): "generation,
        verifier, trainer"; "" when nothing is simulated."""
        parts = self.simulated_parts() or (["rehearsal"] if self.simulated else [])
        return ", ".join(parts)

    def phase_resources(self, phase: str) -> SlurmPhaseConfig:
        """A phase's Slurm table; the colocated rollout job (`ROLLOUT_JOB`) runs on the train job's."""
        res: SlurmPhaseConfig = getattr(self.slurm, "train" if phase == ROLLOUT_JOB else phase)
        return res

    def train_ranks_per_node(self) -> int:
        """Training processes per node: one per GPU, or `train.cpu_ranks` without GPUs."""
        return self.slurm.train.gpus or self.train.cpu_ranks

    def train_threads_per_rank(self) -> int:
        """CPU threads of each training process: the train task's cpus shared by its node's ranks."""
        return max(1, self.slurm.train.cpus // self.train_ranks_per_node())

    def shard_count(self, phase: str) -> int:
        if phase in ("init", "train", ROLLOUT_JOB):
            return 1
        if phase == "verify":
            return self.shards.verify or self.shards.solve
        count: int = getattr(self.shards, phase)
        return count

    def solve_shard_of(self, verify_shard: int) -> int:
        """The one solve shard whose proofs verify shard j checks (and the only one it waits for)."""
        return verify_shard % self.shard_count("solve")

    def colocated(self) -> bool:
        """Rounds run as rollout steps of a colocated job (solver.colocated_steps), not as a chain of phase jobs."""
        return self.solver.colocated_steps > 0

    def jobs_of_round(self, round_index: int) -> tuple[str, ...]:
        """What an executor starts for a round: its phases, or with `colocated()` the init phase (round 0) and
        one colocated rollout job, which runs the round's solve, verify (as CPU jobs of their own) and train."""
        if self.colocated():
            return (("init",) if round_index == 0 else ()) + (ROLLOUT_JOB,)
        return self.phases_of_round(round_index)

    def phases_of_round(self, round_index: int) -> tuple[str, ...]:
        """The phases a round runs: no conjecture/guide without a Conjecturer, init only in round 0."""
        phases = [p for p in ROUND_PHASES if self.conjecturer.enabled or p not in ("conjecture",)]
        if not (self.conjecturer.enabled and self.conjecturer.train and self.guide.enabled):
            phases = [p for p in phases if p != "guide"]
        return (("init",) if round_index == 0 else ()) + tuple(phases)
