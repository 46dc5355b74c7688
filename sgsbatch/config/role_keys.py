"""The tables of the three roles and their training: the Solver (and its search), the Conjecturer, proof
extraction, the Guide, the trainer (assembled in config/schema.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sgsbatch.config.declare import (
    PUBLISHED_CLIP,
    WINDOW_SELECTIONS,
    Bound,
    key,
)


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
