"""Config loading: defaults, inheritance, overrides, and every kind of bad config."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from sgsbatch.config.loading import from_toml_text, load_config, parse_override, to_toml
from sgsbatch.config.schema import Config
from sgsbatch.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "jobs"


def test_reference_defaults_match_the_spec() -> None:
    c = Config()
    assert (c.solver.samples, c.solver.band_low, c.solver.band_high, c.solver.store_cap) == (8, 0.0, 0.5, 16)
    assert (c.solver.lr, c.solver.batch_size, c.solver.max_tokens, c.solver.length_penalty_start) == (3e-6, 32, 8192, 0.8)
    assert (c.conjecturer.band_percentile, c.guide.temperature, c.guide.max_tokens) == (0.7, 1.0, 8192)
    assert (c.train.betas, c.train.weight_decay, c.train.grad_clip) == ((0.9, 0.95), 0.0, 1.0)
    # the reference's verifier_timeout (sgs/pipeline/config.py): 500 s per file, the header's import included
    assert (c.verification.timeout_s, c.verification.timeout_includes_header, c.verification.backend) == (
        500.0, True, "lean")
    assert load_config(JOBS / "sgs.toml").verification == c.verification  # the main experiment sets none of them
    assert (c.solver.cispo_clip_max, c.solver.ei_rounds) == (4.0, 3)


def test_reference_choices_default_to_the_reference(tmp_path: Path) -> None:
    """`extraction.declarations`, `extraction.conjecture`, `solver.try_comments` and `conjecturer.dedup`
    default to the reference's rules and take ours; `extraction.conjecture_imports` defaults to "drop"
    (never worse than the reference: tests/unit/test_reference_conjectures.py) and takes "keep"."""
    def choices(c: Config) -> tuple[str, ...]:
        return (c.extraction.declarations, c.extraction.conjecture, c.extraction.conjecture_imports,
                c.solver.try_comments, c.conjecturer.dedup)

    assert choices(Config()) == choices(load_config(JOBS / "sgs.toml")) == (
        "reference", "reference", "drop", "reference", "exact")
    path = tmp_path / "ours.toml"
    path.write_text(f'inherit = "{JOBS / "tiny.toml"}"\n[extraction]\ndeclarations = "code_only"\n'
                    'conjecture = "code_only"\nconjecture_imports = "keep"\n[solver]\ntry_comments = "lean"\n'
                    '[conjecturer]\ndedup = "whitespace"\n')
    ours = load_config(path)
    assert choices(ours) == ("code_only", "code_only", "keep", "lean", "whitespace")
    assert from_toml_text(to_toml(ours), "config.toml") == ours
    over = load_config(JOBS / "tiny.toml", ["extraction.declarations=code_only", "extraction.conjecture=code_only",
                                            "extraction.conjecture_imports=keep", "solver.try_comments=lean",
                                            "conjecturer.dedup=whitespace"])
    assert choices(over) == choices(ours)


def test_tiny_inherits_sgs_and_overrides() -> None:
    tiny = load_config(JOBS / "tiny.toml")
    sgs = load_config(JOBS / "sgs.toml")
    assert tiny.run.name == "tiny" and tiny.run.rounds == 3
    assert tiny.verification.backend == "simulated" and tiny.simulated
    assert not sgs.simulated
    assert tiny.shards.solve == 2 and sgs.shards.solve == 8 and sgs.shard_count("verify") == 64
    assert Path(tiny.data.source).is_absolute() and Path(tiny.data.source).exists()


def test_prompts_default_to_the_reference_and_paths_resolve_against_the_file(tmp_path: Path) -> None:
    sgs = load_config(JOBS / "sgs.toml")
    assert dataclasses.asdict(sgs.prompts) == dict.fromkeys(
        ("solver", "conjecturer", "conjecturer_unconditioned", "conjecturer_seeded", "guide", "guide_tags"), "reference")
    assert Config().prompts == sgs.prompts
    assert sgs.models.guide == Config().models.guide == "LukeBailey181Pub/dspv2_guide"
    for name in ("sgs_cispo", "sgs_no_problem_conditioning", "sgs_frozen_conjecturer"):
        assert load_config(JOBS / f"{name}.toml").models.guide == "LukeBailey181Pub/dspv2_guide"
    (tmp_path / "mine.txt").write_text("Prove {theorem}")
    (tmp_path / "job.toml").write_text(f'inherit = "{JOBS / "tiny.toml"}"\n[prompts]\nsolver = "./mine.txt"\n')
    cfg = load_config(tmp_path / "job.toml")
    assert cfg.prompts.solver == str(tmp_path / "mine.txt") and cfg.prompts.guide == "reference"
    assert from_toml_text(to_toml(cfg), "config.toml") == cfg


def test_a_template_without_its_placeholder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "g.txt").write_text("Rate {theorem}")
    (tmp_path / "job.toml").write_text(f'inherit = "{JOBS / "tiny.toml"}"\n[prompts]\nguide = "./g.txt"\n')
    with pytest.raises(ConfigError, match=r"prompts\.guide.*no \{conjecture\} placeholder"):
        load_config(tmp_path / "job.toml")


def test_overrides_are_toml_values_or_strings(tmp_path: Path) -> None:
    assert parse_override("run.rounds=3") == ("run.rounds", 3)
    assert parse_override("run.smoke=true") == ("run.smoke", True)
    assert parse_override('x.y=["a", "b"]') == ("x.y", ["a", "b"])
    assert parse_override("run.name=r2") == ("run.name", "r2")
    cfg = load_config(JOBS / "tiny.toml", ["run.name=r2", "run.rounds=5", "run.executor=local"])
    assert (cfg.run.name, cfg.run.rounds, cfg.run.executor) == ("r2", 5, "local")


def test_frozen_config_round_trips() -> None:
    cfg = load_config(JOBS / "tiny.toml")
    again = from_toml_text(to_toml(cfg), "config.toml")
    assert again == cfg
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.run.rounds = 9  # type: ignore[misc]


BAD = [
    # (file text, overrides, key expected in the message, words expected)
    ('inherit = "{tiny}"\n[run]\nroundz = 3\n', [], "run.roundz", "unknown key"),
    ('inherit = "{tiny}"\n[bogus]\nx = 1\n', [], "bogus", "unknown key"),
    ('inherit = "{tiny}"\n[run]\nrounds = "three"\n', [], "run.rounds", "integer"),
    ('inherit = "{tiny}"\n[run]\nrounds = -3\n', [], "run.rounds", ">= 1"),
    ('inherit = "{tiny}"\n[solver]\nband_high = 1.5\n', [], "solver.band_high", "[0, 1]"),
    ('inherit = "{tiny}"\n[conjecturer]\nband_percentile = -0.1\n', [], "conjecturer.band_percentile", "[0, 1]"),
    ('inherit = "{tiny}"\n[models]\nsolver = "./no/such/model"\n', [], "models.solver", "does not exist"),
    ('inherit = "{tiny}"\n[run]\nexecutor = "kubernetes"\n', [], "run.executor", "one of"),
    ('inherit = "{tiny}"\n[data]\nsource = "./missing.jsonl"\n', [], "data.source", "no such file"),
    ('[run]\nname = "x"\nrounds = 3\n[models]\nsolver = "tiny-random"\n', [], "data.source", "required"),
    ('inherit = "{tiny}"\n[run\n', [], "", "not valid TOML"),
    ('inherit = "{tiny}"\n', ["run.rounds=0"], "run.rounds", ">= 1"),
    ('inherit = "{tiny}"\n', ["run.nope=1"], "run.nope", "unknown key"),
    ('inherit = "{tiny}"\n', ["run.rounds"], "run.rounds", "KEY=VALUE"),
    # keys that once validated and did nothing: the error says what to do instead
    ('inherit = "{tiny}"\n[train]\nepochs = 2\n', [], "train.epochs", "exactly one epoch"),
    ('inherit = "{tiny}"\n[slurm]\nsubmitit_folder = "/x"\n', [], "slurm.submitit_folder", "<run dir>/slurm/"),
    ('inherit = "{tiny}"\n[solver]\nbeta = 0.04\n', [], "solver.beta", "renamed solver.kl_beta"),
    ('inherit = "{tiny}"\n[shards]\nverify = 3\n', [], "shards.verify", "multiple of shards.solve"),
    ('inherit = "{tiny}"\n[generation]\nmax_in_flight = 0\n', [], "generation.max_in_flight", ">= 1"),
    # what the trainer cannot do is refused before anything is submitted
    ('inherit = "{tiny}"\n[train]\nzero_stage = 3\n', [], "train.zero_stage", "does not gather them"),
    ('inherit = "{tiny}"\n', ["slurm.train.gpus=8", "train.cpu_ranks=2"], "train.cpu_ranks", "one rank per GPU"),
    ('inherit = "{tiny}"\n', ["slurm.solve.nodes=2"], "slurm.solve.nodes", "only the train job spans nodes"),
    ('inherit = "{tiny}"\n', ["slurm.train.nodes=0"], "slurm.train.nodes", ">= 1"),
    ('inherit = "{tiny}"\n', ['generation.logprobs="sampled"'], "generation.logprobs", "one of"),
    ('inherit = "{tiny}"\n[train]\noptimizer = "adam"\n', [], "train.optimizer", "one of 'fresh', 'carry'"),
    # the reference-vs-ours choices take only their named values
    ('inherit = "{tiny}"\n[extraction]\ndeclarations = "words"\n', [], "extraction.declarations", "one of"),
    ('inherit = "{tiny}"\n', ['extraction.declarations="anywhere"'], "extraction.declarations", "one of"),
    ('inherit = "{tiny}"\n[extraction]\nkeywords = 1\n', [], "extraction.keywords", "unknown key"),
    ('inherit = "{tiny}"\n[extraction]\nconjecture = "strict"\n', [], "extraction.conjecture", "one of 'reference', 'code_only'"),
    ('inherit = "{tiny}"\n', ['extraction.conjecture_imports="salvage"'], "extraction.conjecture_imports", "one of 'drop', 'keep'"),
    ('inherit = "{tiny}"\n[solver]\ntry_comments = "nested"\n', [], "solver.try_comments", "one of 'reference', 'lean'"),
    ('inherit = "{tiny}"\n[conjecturer]\ndedup = "normalised"\n', [], "conjecturer.dedup", "one of"),
    ('inherit = "{tiny}"\n', ["conjecturer.dedup=true"], "conjecturer.dedup", "one of"),
    # prompt templates: a shipped set's name or an existing file, the error lists the choices
    ('inherit = "{tiny}"\n[prompts]\nsolver = "referense"\n', [], "prompts.solver", "valid: 'legacy', 'reference'"),
    ('inherit = "{tiny}"\n', ["prompts.guide_tags=bogus"], "prompts.guide_tags", "unknown template set 'bogus'"),
    ('inherit = "{tiny}"\n[prompts]\nguide = "./no/such/guide.txt"\n', [], "prompts.guide", "no such template file"),
    ('inherit = "{tiny}"\n[prompts]\nconjecturer = 3\n', [], "prompts.conjecturer", "a string"),
    ('inherit = "{tiny}"\n[prompts]\nsystem = "reference"\n', [], "prompts.system", "unknown key"),
]


@pytest.mark.parametrize(("text", "overrides", "key", "words"), BAD)
def test_bad_config_raises_naming_file_and_key(tmp_path: Path, text: str, overrides: list[str], key: str,
                                               words: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text.replace("{tiny}", str(JOBS / "tiny.toml")))
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    msg = str(info.value)
    assert key in msg and words in msg
    assert "--set" in msg or str(path) in msg


@pytest.mark.parametrize(("text", "overrides", "key", "words"), BAD)
def test_bad_config_launch_exits_2_and_creates_nothing(tmp_path: Path, text: str, overrides: list[str], key: str,
                                                       words: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text.replace("{tiny}", str(JOBS / "tiny.toml")))
    runs = tmp_path / "runs"
    args = [sys.executable, "-m", "sgsbatch.cli", "launch", str(path), "--set", f"run.runs_dir={runs}",
            "--set", "run.name=badrun"]
    args += [x for o in overrides for x in ("--set", o)]
    before = _queued_names()
    proc = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert key in proc.stderr and words in proc.stderr
    assert proc.stderr.startswith("Error: ") and "Traceback" not in proc.stderr
    assert not runs.exists()
    assert _queued_names() == before


def test_inherit_cycle_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('inherit = "b.toml"\n')
    (tmp_path / "b.toml").write_text('inherit = "a.toml"\n')
    with pytest.raises(ConfigError, match="cycle"):
        load_config(tmp_path / "a.toml")


def _queued_names() -> list[str]:
    """Names of this cluster's queued jobs, or [] without Slurm: a bad config must add none."""
    try:
        out = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted(x for x in out.stdout.split() if "badrun" in x)


def test_a_keys_range_is_declared_with_it_and_checked_with_its_message() -> None:
    """Ranges live in the schema (`key(..., bound=Bound(spec, message))`); `semantic_errors` reports each with
    its own message, the value in it; intervals are open or closed as written."""
    from sgsbatch.config.schema import Bound, Config, SolverConfig
    from sgsbatch.config.validation import bound_errors, semantic_errors

    closed_open = Bound("[0, 1)", "must be within [0, 1), got {value}")
    assert closed_open.holds(0) and closed_open.holds(0.5) and not closed_open.holds(1) and not closed_open.holds(-0.1)
    open_closed = Bound("(0, 1]", "m")
    assert not open_closed.holds(0) and open_closed.holds(1)
    assert Bound("> 0", "m").holds(1e-9) and not Bound("> 0", "m").holds(0)
    assert Bound("<= 10000", "m").holds(10000) and not Bound("<= 10000", "m").holds(10001)
    with pytest.raises(AssertionError):
        Bound("at least 1", "m")
    declared = {f.name: f.metadata["bound"] for f in dataclasses.fields(SolverConfig) if f.metadata.get("bound")}
    assert declared["samples"].spec == ">= 1" and declared["band_low"].spec == "[0.0, 1.0]"
    cfg = dataclasses.replace(Config(), solver=dataclasses.replace(Config().solver, samples=0, band_high=1.5))
    assert bound_errors(cfg) == [("solver.samples", "must be >= 1, got 0"),
                                 ("solver.band_high", "must be within [0, 1], got 1.5")]
    assert semantic_errors(cfg)[:2] == bound_errors(cfg)
