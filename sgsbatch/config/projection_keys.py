"""The `[projection]` table: the figures `plan` projects a run's time and cost with (assembled in
config/schema.py)."""

from __future__ import annotations

from dataclasses import dataclass

from sgsbatch.config.declare import (
    Bound,
    key,
)

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
