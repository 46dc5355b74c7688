"""The experiment configs: each inherits sgs.toml, changes only its experiment's keys, and dry-runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sgsbatch.config.loading import load_config, to_dict

JOBS = Path(__file__).resolve().parents[2] / "jobs"
# Each experiment's keys against sgs.toml, as its reference script (LukeBailey181/sgs scripts/*.py)
# differs from scripts/standard_sgs.py. Not mapped: evaluation (`eval_every`, `eval_best_of_n`),
# worker counts and wandb tags; `lrs = [...]` is the LR of every role the script trains.
EXPECTED = {
    # cispo_sgs.py: lrs = [1e-06]; training_config.batch_size = 64 (one config for both roles);
    # prover_trainer_cls = "GroupedImportanceSampledWeightedTrainer"; prover_group_size = 8;
    # statement_selection_mode=StatementSelectionMode.ALL_NONE_0_1 (our CISPO band 0 < s < 1)
    "sgs_cispo": {"solver.objective": "cispo", "solver.lr": 1e-6, "solver.batch_size": 64,
                  "conjecturer.lr": 1e-6, "conjecturer.batch_size": 64},
    # cispo_solver_only.py: as cispo_sgs.py, plus conjectures_per_statement = {D_3K: 0},
    # freeze_conjecturer=True, guide_config = None
    "cispo_solver_only": {"solver.objective": "cispo", "solver.lr": 1e-6, "solver.batch_size": 64,
                          "conjecturer.enabled": False, "guide.enabled": False},
    # ei_solver_only.py: lrs = [3e-06]; batch_size = 64; prover_trainer_cls = "WeightedTrainer";
    # statement_selection_mode=StatementSelectionMode.LESS_16_PROOFS; no conjectures, no guide
    "ei_solver_only": {"solver.objective": "ei", "solver.batch_size": 64, "conjecturer.enabled": False,
                       "guide.enabled": False},
    # the paper's REINFORCE-1/2 solver-only baseline (no script in the repository): no conjectures
    "reinforce_solver_only": {"conjecturer.enabled": False, "guide.enabled": False},
    # the GRPO family as solver-only RL baselines (no reference script: issue 31; sources in each
    # file): the objective, the family's LR 1e-6 (DeepSeekMath §4.2, DAPO §4.1), pi_old recomputed by the
    # trainer (verl, DeepSeekMath), one AdamW across rounds, each paper's rollout step (a round): DeepSeekMath
    # 16 questions x 64 outputs, one update of 1,024 and KL 0.04 (§4.2); Dr. GRPO 128 x 8 in updates of 128
    # (its recipe); DAPO 512 x 16, over-sampled 3x, updates of 512, warm-up over 20 rollout steps of 16 updates
    # (§4.1); GSPO 128 x 8 in four minibatches (§5.1)
    **{name: {"solver.objective": objective, "solver.lr": 1e-6, "conjecturer.enabled": False,
              "guide.enabled": False, "train.old_logprobs": "recompute", "train.optimizer": "carry",
              **shape}
       for name, objective, shape in (
           ("grpo", "grpo", {"solver.kl_beta": 0.04, "solver.samples": 64, "solver.rollout_prompts": 16,
                             "solver.batch_size": 1024}),
           ("drgrpo", "dr_grpo", {"solver.rollout_prompts": 128, "solver.batch_size": 128}),
           ("dapo", "dapo", {"solver.samples": 16, "solver.rollout_prompts": 512, "solver.rollout_oversample": 3.0,
                             "solver.rollout_max_gen_batches": 10, "solver.batch_size": 512, "solver.lr_warmup_steps": 320}),
           ("gspo", "gspo", {"solver.rollout_prompts": 128, "solver.batch_size": 256}))},
    # sgs_frozen_conjecturer.py: freeze_conjecturer=True; guide_config = None
    "sgs_frozen_conjecturer": {"conjecturer.train": False, "guide.enabled": False},
    # sgs_no_guide.py: guide_config = None (R_guide = 1)
    "sgs_no_guide": {"guide.enabled": False},
    # STP as the SGS paper ran it (arXiv 2604.20209 §F.2; no reference script): EI with lr 3e-6 and batch 64 for
    # both roles; ConjecturerSetup.SEED_STATEMENT; StatementSelectionMode.STP_IMPROVED_EI; STP's samples (32
    # a round, kfdong/STP RL/run_RL_steps.sh:51) and Conjecturer reward; no Guide
    "stp": {"solver.objective": "ei", "solver.batch_size": 64, "solver.selection": "stp_improved_ei",
            "solver.samples": 32, "conjecturer.setup": "seed_statement", "conjecturer.reward": "stp",
            "conjecturer.batch_size": 64, "guide.enabled": False},
    # sgs_no_problem_conditioning.py: prompt_getter = get_deepseek_prover_v2_conjecturer_no_grounding_prompt;
    # guide_config = None
    "sgs_no_problem_conditioning": {"conjecturer.conditioned": False, "guide.enabled": False},
    # tactic-level search alone (no reference script: issue 39; each number's source in jobs/search.toml):
    # best-first with BFS-Prover's expansion width 2 (its "2048 x 2 x 600"; 600 expansions = the default),
    # length normalisation 0.5, no wall-clock limit, nanoproof's 5 s tactic timeout, expert iteration
    "search": {"solver.mode": "search", "solver.objective": "ei", "search.width": 2, "search.time_limit_s": 0.0,
               "search.length_alpha": 0.5, "search.tactic_timeout_s": 5.0, "conjecturer.enabled": False,
               "guide.enabled": False, "search.lean_processes": 11, "slurm.solve.cpus": 12, "shards.verify": 0,
               "slurm.verify.cpus": 16},
}


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_experiment_differs_from_sgs_only_in_its_keys(name: str) -> None:
    base = _flat(to_dict(load_config(JOBS / "sgs.toml")))
    exp = _flat(to_dict(load_config(JOBS / f"{name}.toml")))
    diff = {k: exp[k] for k in exp if exp[k] != base.get(k)}
    assert diff == {"run.name": name, **EXPECTED[name]}
    assert 'inherit = "sgs.toml"' in (JOBS / f"{name}.toml").read_text()


@pytest.mark.parametrize("path", sorted(p for p in JOBS.glob("*.toml") if p.name != "site.example.toml"),
                         ids=lambda p: p.stem)
def test_every_jobs_file_passes_dry_run(path: Path, tmp_path: Path, ready_machine: Any) -> None:
    # the local executor: with a Slurm up here, the site pre-flight would (rightly) refuse GPU jobs on
    # a cluster without GPUs; the config itself is what this checks, on a machine where Lean is
    # built, the models are cached and vLLM is installed (the local pre-flight's part)
    runs = tmp_path / "runs"
    sets = [f"run.runs_dir={runs}", "run.executor=local", *ready_machine.sets]
    proc = subprocess.run([sys.executable, "-m", "sgsbatch.cli", "launch", str(path), "--dry-run",
                           *(a for s in sets for a in ("--set", s))], capture_output=True, text=True,
                          env=ready_machine.env())
    assert proc.returncode == 0, proc.stderr
    assert "nothing created, nothing submitted" in proc.stdout
    assert not runs.exists() or not any(runs.iterdir())


@pytest.mark.parametrize("objective", ["grpo", "dr_grpo", "dapo", "gspo"])
def test_each_grpo_family_objective_combines_with_sgs(objective: str) -> None:
    """sgs.toml with the Solver's objective changed: Conjecturer and Guide kept (REINFORCE-1/2 for the
    Conjecturer), as the GRPO-family jobs files say."""
    cfg = load_config(JOBS / "sgs.toml", [f"solver.objective={objective}"])
    assert cfg.solver.objective == objective and cfg.conjecturer.enabled and cfg.guide.enabled
    assert "guide" in cfg.phases_of_round(1) and "conjecture" in cfg.phases_of_round(1)
