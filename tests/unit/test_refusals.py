"""Verifier refusals by reason (round/refusals.py, issue 38): from verdicts to the verify marker,
`status`, the alarm, the round's metrics, TensorBoard and the report.

The verdicts come from the real static checks (lean.static_verdict) and, in the verify task, from
the real REPL pool driving the STAND-IN REPL and kernel checker (tests/lean/fake_repl.py,
fake_checker.py: they model Lean's replies, they are not Lean). `unknown_tactic` is built the way
the static checks write a verdict (its check is not on this branch): it must count without a list.
Not covered: what real Lean refuses (tests/lean/test_lean_real.py where Lean is installed).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from sgsbatch.round import metrics as M
from sgsbatch.round.refusals import item_of, refusal, refusal_metrics, tally
from sgsbatch.verification.lean import static_verdict
from sgsbatch.verification.verdict import FAILED, STATIC_NOTE, ProofJob, Verdict

THEOREM = "theorem t0 (y : ℕ) (h : 0 < y) : True := by"


def _record(v: Verdict) -> dict[str, Any]:
    """A verdict as the verify task records it."""
    return {"verdict": v.verdict, "verify_reason": v.reason, "messages": v.messages, "time_s": 0.0}


def _static(proof: str) -> dict[str, Any]:
    v = static_verdict(ProofJob("k", "import Mathlib\n", THEOREM, proof))
    assert v is not None, proof
    return _record(v)


@pytest.mark.parametrize(("proof", "reason", "item"), [
    ("\n  set_option maxRecDepth 200000 in\n  trivial", "set_option", "maxRecDepth"),
    ('\n  have := IO.println "hi"\n  trivial', "io", "IO.println"),
    ("\n  simp (config := cfgOf x)", "config", "config"),
    ("\n  conv => run_conv pure ()", "unknown_tactic", "run_conv"),
    ("\n  run_tac pure ()", "run_tac", "run_tac"),
    ("\n  simp\n#eval 1", "eval", "#eval"),
    ("\n  sorry", "sorry", "sorry"),
])
def test_static_check_verdicts_are_refusals_with_their_item(proof: str, reason: str, item: str) -> None:
    assert refusal(_static(proof)) == (reason, item)


def test_a_later_static_check_counts_by_its_note_and_lean_failures_do_not() -> None:
    unknown = _record(Verdict(FAILED, "unknown_tactic", [STATIC_NOTE + "`run_conv` at line 3 of the proof: not on "
                                                         "the tactic allow-list"]))
    assert refusal(unknown) == ("unknown_tactic", "run_conv")
    kernel = _record(Verdict(FAILED, "recheck_unsafe_constant", ["kernel re-check: t0 depends on the unsafe "
                                                                  "constant t0.match_1._cstage1"]))
    assert refusal(kernel) == ("recheck_unsafe_constant", "t0.match_1._cstage1")
    assert refusal(_record(Verdict(FAILED, "recheck_kernel_rejected", ["kernel re-check: (kernel) deep "
                                                                         "recursion"]))) == ("recheck_kernel_rejected", None)
    for v in (Verdict(FAILED, "lean_error", ["error 3:2: linarith failed"]), Verdict(FAILED, "failed_warning"),
              Verdict(FAILED, "sorry", ["warning 1:8: declaration uses 'sorry'"]),  # Lean's own sorry, not refused
              Verdict(FAILED, "axioms"), Verdict(FAILED, "statement_changed"),
              Verdict("timeout", "timeout"), Verdict("error", "recheck_no_pickle"), Verdict("verified")):
        assert refusal(_record(v)) is None, v
    assert refusal({"verdict": "unextracted", "verify_reason": "no_code_block", "messages": []}) is None
    assert item_of("io", ["no span here"]) is None


def test_tally_and_metrics_keep_every_reason_and_the_top_items() -> None:
    verdicts = ([_static('\n  have := IO.println "hi"\n  trivial')] * 3
                + [_static('\n  have := IO.FS.readFile "x"\n  trivial')] * 2
                + [_static("\n  exact (IO.getEnv \"A\")")]
                + [_static("\n  set_option maxRecDepth 900000 in\n  trivial")]
                + [_record(Verdict("verified")), _record(Verdict(FAILED, "lean_error"))]
                + [{"verdict": "unextracted", "verify_reason": "no_code_block", "messages": []}])
    t = tally(verdicts)
    assert (t["proofs"], t["refused"]) == (9, 7)
    assert t["by_reason"] == {"io": 6, "set_option": 1}
    assert t["items"]["io"] == {"IO.println": 3, "IO.FS.readFile": 2, "IO.getEnv": 1}
    m = refusal_metrics(t, k=2)
    assert m[M.VERIFY_REFUSED_RATE] == pytest.approx(7 / 9)
    assert (m["verify/refused/io"], m["verify/refused/set_option"]) == (6.0, 1.0)
    items = {k: v for k, v in m.items() if k.startswith("verify/refused_items/")}
    assert items == {"verify/refused_items/io/IO.println": 3.0, "verify/refused_items/io/IO.FS.readFile": 2.0,
                     "verify/refused_items/set_option/maxRecDepth": 1.0}
    assert refusal_metrics(tally([]), k=3) == {M.VERIFY_REFUSED_RATE: 0.0}


# -- the whole way: a verify task on the stand-in REPL, then status, the alarm, metrics, TensorBoard, the report

PROOFS = [
    "\n  set_option maxRecDepth 200000 in\n  trivial",  # static: set_option, maxRecDepth
    '\n  have := IO.println "hi"\n  trivial',  # static: io, IO.println
    "\n  trivial",  # verified (stand-in REPL and checker)
    "\n  trivial -- FAKE_RESOLVES_IO",  # the stand-in resolves a name to IO.FS.writeFile: the re-check refuses
    "\n  simp -- FAKE_ERROR",  # Lean's own error: failed, not a refusal
]


def _solve_record(pid: str) -> dict[str, Any]:
    samples = [{"text": p, "token_ids": [1], "logprobs": [-0.1], "finish_reason": "stop", "ok": True, "proof": p,
                "reason": None} for p in PROOFS]
    samples.append({"text": "no code", "token_ids": [1], "logprobs": [-0.1], "finish_reason": "stop", "ok": False,
                    "proof": None, "reason": "no_code_block"})
    return {"key": pid, "problem_id": pid, "is_target": True, "prompt_ids": [1], "samples": samples}


def test_refusals_reach_marker_status_alarm_metrics_tensorboard_and_report(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from sgsbatch.cli.console import status_text
    from sgsbatch.phases import verify
    from sgsbatch.phases.task import Task
    from sgsbatch.round.alarms import round_end_values
    from sgsbatch.round.lifecycle import ingest_round, round_rows
    from sgsbatch.round.results import round_results
    from sgsbatch.run.shards import Shard
    from sgsbatch.views.report import render_report
    from sgsbatch.views.status import run_status
    from tests.lean.leanlib import FAKE_CHECKER_COMMAND, FAKE_COMMAND
    from tests.runlib import recorded_run

    h = recorded_run(tmp_path, "refusals", sets=[
        "shards.solve=1", "shards.verify=1", "verification.streaming=false", "verification.backend=lean",
        f"verification.repl_command={json.dumps(list(FAKE_COMMAND))}", f"verification.project_dir={tmp_path}",
        f"verification.checker_command={json.dumps(list(FAKE_CHECKER_COMMAND))}", "verification.sandbox=none",
        "verification.process_filter=false", "verification.timeout_s=20"])
    for phase in ("conjecture", "guide"):
        for i in range(h.cfg.shard_count(phase)):
            Shard(h.paths.phase_dir(0, phase), i).finish([])
    Shard(h.paths.phase_dir(0, "solve"), 0).finish([_solve_record(f"t{i}") for i in range(3)])
    task = Task(h.cfg, h.paths, 0, "verify", Shard(h.paths.phase_dir(0, "verify"), 0), lambda: False)
    verify.run(task)
    verdicts = [(v["verdict"], v["verify_reason"]) for v in task.shard.read()[0]["verdicts"]]
    assert verdicts == [("failed", "set_option"), ("failed", "io"), ("verified", None),
                        ("failed", "recheck_forbidden_constant"), ("failed", "lean_error"),
                        ("unextracted", "no_code_block")]
    marker = task.shard.meta()["refusals"]  # over the shard's 15 checked proofs
    assert (marker["proofs"], marker["refused"]) == (15, 9)
    assert marker["by_reason"] == {"set_option": 3, "io": 3, "recheck_forbidden_constant": 3}
    assert marker["items"]["recheck_forbidden_constant"] == {"IO.FS.writeFile": 3}

    st = run_status(h, live=False)
    line = ("refused by the verifier (round 0): 9 of 15 proofs (60.0%): io 3 (IO.println x 3), recheck_forbidden_constant "
            "3 (IO.FS.writeFile x 3), set_option 3 (maxRecDepth x 3)")
    text = status_text(json.loads(json.dumps(st.to_json())))
    assert line in text
    alarm = [a for a in st.alerts if a["metric"] == "alerts/verify_refusals"]
    assert len(alarm) == 1 and "(alerts.max_refused_rate 2%)" in alarm[0]["message"], st.alerts
    assert "ALERT alerts/verify_refusals: round 0 verify refused 9 of 15 proofs" in text

    m = round_rows(h.cfg, h.paths, 0, round_results(h.cfg, h.paths, 0)).metrics
    assert m[M.VERIFY_REFUSED_RATE] == pytest.approx(9 / 15)
    assert {k: v for k, v in m.items() if k.startswith("verify/refused/")} == {
        "verify/refused/set_option": 3.0, "verify/refused/io": 3.0, "verify/refused/recheck_forbidden_constant": 3.0}
    assert m["verify/refused_items/recheck_forbidden_constant/IO.FS.writeFile"] == 3.0
    alerts = round_end_values(h.cfg, h.paths, 0, m)
    assert alerts["alerts/verify_refusals"] == 1.0
    quiet = dataclasses.replace(h.cfg, alerts=dataclasses.replace(h.cfg.alerts, max_refused_rate=0.7))
    assert round_end_values(quiet, h.paths, 0, m)["alerts/verify_refusals"] == 0.0  # 60% is under 70%

    M.write_tensorboard(tmp_path / "tb", 0, m, simulated=False, smoke=False, alerts=alerts)
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    scalars = {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
    assert scalars["verify/refused/io"] == [(0, 3.0)]
    assert scalars["verify/refused_items/set_option/maxRecDepth"] == [(0, 3.0)]
    assert scalars["alerts/verify_refusals"] == [(0, 1.0)]

    assert ingest_round(h, 0)
    page, data = render_report([h])
    assert data["runs"][0]["refusals"][0]["by_reason"] == {"set_option": 3, "io": 3, "recheck_forbidden_constant": 3}
    assert "Verifier refusals per round" in page and 'alt="verifier refusals per reason"' in page
    assert "<td>9 (60.0%)</td>" in page and "io 3 (IO.println x 3)" in page
