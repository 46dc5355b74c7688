"""The README's "On your cluster" sequence, run as written on the local Slurm.

The bash block between the README's `<!-- cluster-sequence -->` markers is taken line by line. The
variables at its top get this machine's values (jobs/tiny.toml for jobs/sgs.toml, a site file for
the local cluster written here, a temporary runs directory and Hugging Face home, and
`EXTRA=--set run.rounds=1` to keep it short); the lines marked `# install` (GPU and Lean installs,
model downloads: not possible here) and `# server` (TensorBoard) are left out, and the test says
exactly which; every other line runs unchanged, in one bash process from the repository root, and
must exit 0. Then the run launched by the sequence must complete, watched by its watcher job.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from docslib import ASSIGNMENT, INSTALL, SERVER, cluster_sequence, marked
from helpers import slurm_required, wait_until
from runlib import REPO, status

pytestmark = [pytest.mark.slurm]

SKIPPED = ["./setup.sh --gpu --lean", "hf download deepseek-ai/DeepSeek-Prover-V2-7B",
           "hf download LukeBailey181Pub/dspv2_guide", 'tensorboard --logdir "$SGSBATCH_RUNS_DIR"']


def _site(path: Path, hf_home: Path) -> Path:
    path.write_text(f"""# the local cluster (slurm/cluster.sh): one partition for every phase and the watcher
[slurm.defaults]
partition = "batch"
setup = ["export HF_HOME={hf_home}", "export HF_HUB_OFFLINE=1"]
""")
    return path


def _script(local: dict[str, str], rc_file: Path) -> tuple[str, list[str], list[str]]:
    """The sequence as a bash script with this machine's values: (script, commands run, lines skipped)."""
    seq = cluster_sequence()
    assert set(local) <= set(seq.variables), f"the README's sequence sets no {sorted(set(local) - set(seq.variables))}"
    out, ran, skipped = [], [], []
    for line in seq.lines:
        if marked(line, INSTALL) or marked(line, SERVER):
            skipped.append(line.split("#")[0].strip())
            continue
        m = ASSIGNMENT.match(line)
        if m and m.group(1) in local:
            line = line[:m.start(2)] + shlex.quote(local[m.group(1)]) + line[m.end(2):]
        out.append(line)
        if line.strip() and not line.lstrip().startswith("#"):
            ran.append(line)
            out.append(f'rc=$?; printf "%s\\t%s\\n" "$rc" {shlex.quote(line)} >> {shlex.quote(str(rc_file))}; '
                       '[ "$rc" -eq 0 ] || exit "$rc"')
    return "\n".join(out) + "\n", ran, skipped


def test_the_readme_cluster_sequence_runs_as_written_on_the_local_slurm(slurm_cluster: object, tmp_path: Path,
                                                                        cli_env: dict[str, str]) -> None:
    if not (REPO / ".venv" / "bin" / "activate").is_file():
        why = f"the sequence activates the checkout's virtual environment, {REPO / '.venv'} (./setup.sh makes it)"
        pytest.fail(why) if slurm_required() else pytest.skip(why)
    runs, hf_home, rc_file = tmp_path / "runs", tmp_path / "hf", tmp_path / "rc.tsv"
    local = {"CONFIG": "jobs/tiny.toml", "SITE": str(_site(tmp_path / "site.toml", hf_home)), "RUN": "tiny",
             "EXTRA": "--set run.rounds=1", "SGSBATCH_RUNS_DIR": str(runs), "HF_HOME": str(hf_home)}
    script, ran, skipped = _script(local, rc_file)
    assert skipped == SKIPPED
    env = {k: v for k, v in cli_env.items() if k not in ("SGSBATCH_SITE", "SGSBATCH_RUNS_DIR", "VIRTUAL_ENV")}
    watcher = None
    try:
        proc = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=3600)
        rcs = [line.split("\t", 1) for line in rc_file.read_text().splitlines()] if rc_file.exists() else []
        assert proc.returncode == 0 and [int(rc) for rc, _ in rcs] == [0] * len(ran), (
            f"exit {proc.returncode}; each command's exit code: {rcs}\n--- stdout\n{proc.stdout[-6000:]}\n"
            f"--- stderr\n{proc.stderr[-6000:]}")
        assert [cmd for _, cmd in rcs] == ran  # every line ran, in order
        out = proc.stdout
        assert "canary passed" in out
        watcher_file = runs / "tiny" / "watcher.json"
        watcher = json.loads(watcher_file.read_text())["job_id"]
        assert f"watcher job {watcher} submitted" in out

        # the smoke run and the rehearsal (--wait) completed; the run goes on under its watcher job
        for name, flag in (("tiny-smoke", "smoke"), ("tiny-rehearsal", "rehearsal")):
            st = status(runs, name)
            assert st["state"] == "completed" and st[flag] and st["rounds"] == 1, st
        wait_until(lambda: status(runs, "tiny")["state"] in ("completed", "failed", "cancelled"), 1800,
                   "the launched run to end")
        st = status(runs, "tiny")
        assert st["state"] == "completed" and st["rounds_completed"] == 1 and st["executor"] == "slurm", st

        # the site file reached every phase's jobs, and the watcher's
        frozen = (runs / "tiny" / "config.toml").read_text()
        assert frozen.count('partition = "batch"') >= 7 and "export HF_HUB_OFFLINE=1" in frozen
    finally:
        subprocess.run([sys.executable, "-m", "sgsbatch.cli", "cancel", "tiny", "--runs-dir", str(runs)],
                       env=env, capture_output=True, text=True)
        if watcher:
            subprocess.run(["scancel", watcher], capture_output=True)
