"""What `status`, the job names, `proofs`/`export` and Slurm's mail tell a person (issue 41, "failures
that tell the truth"): metrics grouped and Slurm task states counted in `status RUN`, job names
whose first 8 characters (a default `squeue`'s NAME column) differ between runs, SIMULATED named in
every `proofs` and exported row, and the site's mail keys reaching the submitted job script.

Slurm is not run here: `squeue`/`sacct` answers are recorded-style rows (as tests/unit/test_status.py),
and the job script is submitit's own `_make_sbatch_string` over the parameters `submit_phase` passes
(real sbatch and real mail: tests/slurm, a site's mailer). A run's database is real (recorded_run).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sgsbatch.cli import main
from sgsbatch.cli.console import METRICS_WIDTH, job_line, metrics_text, state_counts, status_text, task_count
from sgsbatch.config.loading import load_config
from sgsbatch.errors import ConfigError
from sgsbatch.ops.amend import amend
from sgsbatch.ops.export import export_run
from sgsbatch.round import metrics as M
from sgsbatch.scheduling import slurm
from sgsbatch.scheduling.slurm import TaskState, _parameters_for, is_run_job, job_name, run_tag
from sgsbatch.state.schema import ProblemRow, SlurmJob, StoredProof
from sgsbatch.views.proofs import found_proofs
from sgsbatch.views.status import run_status

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import recorded_run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "jobs"

# --- status RUN: metrics by group, task states by count ---

ROUND_METRICS = {
    "zeta/new_thing": 1.0, M.cost("solve", "gpu_hours"): 2.0, M.COST_GPU_HOURS: 3.0, M.wall_s("solve"): 60.0,
    M.ROUND_WALL_S: 600.0, M.train("solver", "loss"): 0.5, M.search("found"): 4.0, M.VERIFY_ERROR_RATE: 0.01,
    M.conjectures("valid"): 30.0, M.guide_mean("score"): 5.0, M.gen("solve", "tokens"): 1e6,
    M.GENERATIONS_TOTAL: 512.0, M.PASS_AT_8: 0.6, M.SOLVED_TARGETS: 9.0, M.CUMULATIVE_SOLVE_RATE: 0.75,
    M.PASS_AT_1: 0.3, M.solve_rate_hist("targets", 2): 3.0, M.reward_mean("solver"): 0.2,
    M.STORE_NEW_PROOFS: 5.0, M.train_entropy("solver"): 1.5, M.sampled_entropy("solve"): 1.2,
    M.verify_refused("sorry"): 2.0, M.SOLVER_ZERO_STD_GROUPS: 1.0, "eval/minif2f_test/pass@8": 0.4,
}


def test_metrics_are_grouped_headline_first_and_none_is_lost() -> None:
    groups = M.metric_groups(ROUND_METRICS)
    titles = [t for t, _ in groups]
    assert titles == [
        "solve rate", "held-out evaluation", "generation", "conjectures", "guide", "solver", "verification", "search",
        "training", "cost", "wall time", "solve-rate histogram", "other"]
    names = dict(groups)
    assert names["solve rate"] == [M.CUMULATIVE_SOLVE_RATE, M.SOLVED_TARGETS, M.PASS_AT_1, M.PASS_AT_8,
                                   M.STORE_NEW_PROOFS]
    assert names["generation"] == sorted([M.GENERATIONS_TOTAL, M.gen("solve", "tokens"), M.sampled_entropy("solve")])
    assert names["training"] == [M.train_entropy("solver"), M.train("solver", "loss")]
    assert names["other"] == ["zeta/new_thing"]  # a metric without a group is shown last, not dropped
    assert sorted(n for _, ns in groups for n in ns) == sorted(ROUND_METRICS)


def test_metrics_text_is_one_wrapped_line_per_group() -> None:
    lines = metrics_text(ROUND_METRICS, 4)
    assert lines[0].startswith("  metrics of round 4") and "sgsbatch metrics RUN" in lines[0]
    assert lines[1].startswith("    solve rate: cumulative_solve_rate = 0.75, solved_targets = 9, pass@1 = 0.3")
    assert all(len(line) <= METRICS_WIDTH for line in lines[1:])
    text = "\n".join(lines)
    assert text.index("solve rate:") < text.index("generation:") < text.index("cost:") < text.index("other:")
    assert all(f"{n} = " in text for n in ROUND_METRICS) and metrics_text({}, 0) == []
    many = {M.search(w): float(i) for i, w in enumerate(M.SEARCH_STATS)}  # 18 names: wrapped under the title
    wrapped = metrics_text(many, 1)[1:]
    assert len(wrapped) > 1 and all(line.startswith(" " * len("    search: ")) for line in wrapped[1:])


def test_task_states_are_counted_never_a_dict() -> None:
    states = {f"123_{i}": "COMPLETED" for i in range(60)} | {"123_60": "RUNNING", "123_61": "RUNNING",
                                                             "123_[62-63%8]": "PENDING"}
    assert state_counts(states) == "60 COMPLETED, 2 PENDING, 2 RUNNING"
    assert [task_count(x) for x in ("123", "123_4", "123_[5-63]", "123_[1,3-4]", "123_[x]")] == [1, 1, 59, 3, 1]
    line = job_line({"job_id": "123", "round": 0, "phase": "solve", "shards": list(range(64)),
                     "task_states": states, "restarts": 2})
    assert line == "    job 123 r0 solve (64 tasks): 60 COMPLETED, 2 PENDING, 2 RUNNING; 2 restarts"
    assert job_line({"job_id": "9", "round": 1, "phase": "train", "shards": [0]}).endswith(
        "(1 task): task states unknown (no accounting)")


def test_status_text_of_a_64_task_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = recorded_run(tmp_path, "st64", executor="slurm")
    with h.db.write() as s:
        s.add(SlurmJob(run_id=h.run_id, round=0, phase="solve", job_id="123", shards=json.dumps(list(range(64))),
                       submitted_at=time.time(), active=True))
    acct = {f"123_{i}": ("COMPLETED", 0) for i in range(60)} | {f"123_{i}": ("RUNNING", 1) for i in range(60, 64)}
    monkeypatch.setattr(slurm, "squeue", lambda ids: [TaskState(f"123_{i}", "RUNNING", "None") for i in range(60, 64)])
    monkeypatch.setattr(slurm, "sacct", lambda ids: acct)
    st = run_status(h).to_json()
    st["metrics"] = ROUND_METRICS
    text = status_text(st)
    assert "job 123 r0 solve (64 tasks): 60 COMPLETED, 4 RUNNING; 4 restarts" in text
    assert f"their names start {run_tag('st64')}" in text
    assert "{" not in text and "': '" not in text  # no Python dict or repr anywhere
    assert text.index("    solve rate: cumulative_solve_rate") < text.index("    wall time:")


# --- job names ---

def test_job_names_tell_runs_apart_in_a_default_squeue() -> None:
    runs = ["grpo-lr1e-6", "grpo-lr3e-6", "sgs", "sgs-2", "tiny", "tiny-smoke", "tiny-rehearsal"]
    firsts = {job_name(run, 3, "solve")[:8] for run in runs}
    assert len(firsts) == len(runs)  # the old `sgs.<run>.` gave "sgs.grpo", "sgs.tiny" for several
    assert job_name("tiny", 3, "solve") == f"{run_tag('tiny')}s3.sgs.tiny.r0003.solve"
    assert job_name("tiny", None, "watcher") == f"{run_tag('tiny')}w.sgs.tiny.watcher"
    assert run_tag("tiny") == run_tag("tiny") and len(run_tag("tiny")) == slurm.TAG_CHARS
    assert job_name("tiny", 0, "solve")[:8] != job_name("tiny", 0, "verify")[:8]  # the phase shows too
    for r, phase in ((0, "init"), (12, "train"), (199, "verify"), (None, "watcher")):
        assert is_run_job(job_name("a.b", r, phase), "a.b")
        assert not is_run_job(job_name("a.b", r, phase), "a") and not is_run_job(job_name("a", r, phase), "a.b")
    assert not is_run_job("sgs.tiny.r0000.solve", "tiny")  # the old names are not this scheme's
    cfg = load_config(JOBS / "tiny.toml")
    assert _parameters_for(cfg, 2, "train", 1, None)["job_name"] == job_name("tiny", 2, "train")


# --- SIMULATED in proofs and the export ---

def _with_a_proof(tmp_path: Path, name: str, *sets: str):  # type: ignore[no-untyped-def]
    h = recorded_run(tmp_path, name, sets=sets)
    with h.db.write() as s:
        s.add(StoredProof(run_id=h.run_id, problem_id="t0", slot=0, round=0, sample=1, proof="\n  trivial"))
    with h.db.read() as s:
        assert s.exec(ProblemRow.__table__.select()).first() is not None  # type: ignore[attr-defined]
    return h


def test_proofs_and_export_rows_name_the_simulated_parts(tmp_path: Path) -> None:
    h = _with_a_proof(tmp_path, "simv")  # tiny.toml: the SIMULATED verifier
    assert h.cfg.simulated_label() == "verifier"
    assert [r["simulated"] for r in found_proofs(h)] == ["verifier"]
    args = ["proofs", "simv", "--runs-dir", str(tmp_path)]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    assert "== t0 (round 0, sample 1, slot 0) [SIMULATED verifier]" in out.output
    js = CliRunner().invoke(main, [*args, "--json"])
    assert [json.loads(x)["simulated"] for x in js.output.splitlines()] == ["verifier"]
    import pyarrow.parquet as pq

    export_run(h, tmp_path / "ds")
    table = pq.read_table(tmp_path / "ds" / "proofs" / "train-00000-of-00001.parquet")
    assert table.column("simulated").to_pylist() == ["verifier"]
    assert "**SIMULATED**: this run used SIMULATED parts (verifier;" in (tmp_path / "ds" / "README.md").read_text()


def test_the_label_names_every_simulated_part_and_none_for_a_real_run() -> None:
    assert load_config(JOBS / "sgs.toml").simulated_label() == ""
    both = load_config(JOBS / "sgs.toml", ["generation.backend=simulated", "verification.backend=simulated",
                                           "train.backend=simulated"])
    assert both.simulated_label() == "generation, verifier, trainer"


# --- Slurm's mail ---

def _site(tmp_path: Path, mail: str) -> Path:
    site = tmp_path / "site.toml"
    site.write_text(f"[slurm]\n{mail}\n[slurm.defaults]\npartition = \"gpu\"\n")
    return site


def test_mail_reaches_the_job_script_of_the_runs_last_job_and_every_failure(tmp_path: Path) -> None:
    from submitit.slurm.slurm import _make_sbatch_string

    cfg = load_config(JOBS / "tiny.toml", site=_site(tmp_path, 'mail_user = "me@lab.org"'))
    last = cfg.run.rounds - 1
    for r in range(cfg.run.rounds):
        for phase in cfg.phases_of_round(r):
            params = _parameters_for(cfg, r, phase, 2, None)
            want = "END,FAIL" if (r, phase) == (last, "train") else "FAIL"
            assert (params["mail_user"], params["mail_type"]) == ("me@lab.org", want), (r, phase)
            script = _make_sbatch_string("python -m x", folder=tmp_path / "%j", map_count=2, **params)  # type: ignore[arg-type]
            assert "#SBATCH --mail-user=me@lab.org" in script and f"#SBATCH --mail-type={want}" in script
    quiet = load_config(JOBS / "tiny.toml", site=_site(tmp_path, 'mail_user = "me@lab.org"\nmail_type_failure = ""'))
    assert "mail_type" not in _parameters_for(quiet, 0, "solve", 2, None)
    assert _parameters_for(quiet, last, "train", 1, None)["mail_type"] == "END,FAIL"
    nobody = load_config(JOBS / "tiny.toml")
    assert not {"mail_user", "mail_type"} & set(_parameters_for(nobody, last, "train", 1, None))


def test_a_bad_mail_type_is_named_and_mail_is_amendable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="slurm.mail_type.*'ENDS'.*not an sbatch --mail-type"):
        load_config(JOBS / "tiny.toml", ["slurm.mail_user=me@lab.org", "slurm.mail_type=ENDS,FAIL"])
    with pytest.raises(ConfigError, match="slurm.mail_user"):
        load_config(JOBS / "tiny.toml", ["slurm.mail_user=a@x.org, b@x.org"])
    h = recorded_run(tmp_path, "mail", executor="slurm")
    h2, _ = amend(h, ["slurm.mail_user=me@lab.org"])  # an operational change: the next jobs mail
    assert _parameters_for(h2.cfg, 1, "train", 1, None)["mail_type"] == "END,FAIL"
