"""Site pre-flight: will this Slurm accept what sgsbatch is about to submit, round after round?

A limit found in round 37 of a real run costs a GPU-week; found here it costs seconds. For each
phase of a round, `check(cfg)`:

1. writes the batch script sgsbatch will submit (submitit's own script, with the options of
   `slurm._parameters_for`: array size, partition, account, QOS, GPUs, CPUs, memory, time,
   signal, extra options, the setup lines) and asks `sbatch --test-only` whether it would be
   accepted (it checks the options; the setup lines run only in the real job, and the canary's);
2. compares it with the site's limits: `scontrol show config` (MaxArraySize, MaxJobCount), the
   partition (exists, is UP, MaxTime, the GPUs its nodes have as gres), and where accounting
   exists (`sacctmgr`) the QOS and the user's association (MaxSubmitJobs, MaxJobs): a round is
   submitted at once, so every task of a round counts against MaxSubmitJobs;
3. checks this machine for what the jobs will load (local_checks.py): vLLM in the jobs' Python,
   the Lean project built with its REPL and checker, each model's weights in the Hugging Face
   cache or at its path.

Every problem is reported at once with the key to change; `launch` and `launch --dry-run` run it
before anything is created or submitted (on the local executor, step 3 only), `sgsbatch preflight`
on its own. Not covered: limits Slurm checks only at run time (GrpTRES usage of other users,
fair-share, reservations), MaxTRESPerJob beyond GPUs, and node features in `extra.constraint`
beyond what `--test-only` says.
"""

from __future__ import annotations

import getpass
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from sgsbatch.config.schema import Config, SlurmPhaseConfig
from sgsbatch.errors import SgsError
from sgsbatch.scheduling.local_checks import Problem, Report, round_phases


class PreflightError(SgsError):
    """The site would refuse (now or in a later round) what the config asks for."""

    exit_code = 2

    def __init__(self, report: Report) -> None:
        self.report = report
        super().__init__(report.text())


def _run(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _fields(line: str) -> dict[str, str]:
    """`Key=Value Key2=Value2` (scontrol -o) as a dict."""
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def minutes(text: str) -> float | None:
    """Minutes of a Slurm time (`UNLIMITED` -> None; `D-HH:MM:SS`, `HH:MM:SS`, `MM:SS`, `MM`)."""
    if text.upper() in ("UNLIMITED", "INFINITE", "NONE", ""):
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    h, m, s = ([0] * (3 - len(parts)) + parts) if len(parts) > 1 else (0, parts[0], 0)
    return int(days or 0) * 1440 + h * 60 + m + s / 60


def _gpus_of(gres: str) -> int:
    """GPUs in a node's Gres field (`gpu:h200:8(S:0-1),shard:4` -> 8)."""
    total = 0
    for item in gres.split(","):
        m = re.match(r"gpu(?::[^:(]+)?:(\d+)", item.strip())
        if m:
            total += int(m.group(1))
    return total


def check(cfg: Config, site: bool = True) -> Report:
    """The pre-flight report for `cfg`: the Slurm that answers here (with `site`), then this machine's
    local checks (local_checks.py: vLLM in the jobs' Python, the Lean project built, the weights cached)."""
    from sgsbatch.scheduling.local_checks import check_local

    rep = Report()
    if site:
        _check_site(cfg, rep)
    check_local(cfg, rep)
    return rep


def _check_site(cfg: Config, rep: Report) -> None:
    phases = round_phases(cfg)
    sizes = {p: cfg.shard_count(p) for p in phases}
    site = _scontrol_fields(["scontrol", "show", "config"], None)
    max_array = int(site[0].get("MaxArraySize", "0") or 0) if site else 0
    max_jobs = int(site[0].get("MaxJobCount", "0") or 0) if site else 0
    parts = {f["PartitionName"]: f for f in _scontrol_fields(["scontrol", "show", "partition", "-o"], "PartitionName")}
    default_part = next((n for n, f in parts.items() if f.get("Default") == "YES"), None)
    nodes = _scontrol_fields(["scontrol", "show", "node", "-o"], "NodeName")
    with tempfile.TemporaryDirectory(prefix="sgsbatch-preflight-") as tmp:
        for phase in phases:
            n, res = sizes[phase], cfg.phase_resources(phase)
            if max_array and n > max_array:
                rep.problems.append(Problem(f"shards.{phase}", f"an array of {n} tasks exceeds the site's "
                                                               f"MaxArraySize {max_array}: lower shards.{phase} or ask your site"))
            part = res.partition or default_part
            _check_partition(f"slurm.{phase}", res, part, parts, nodes, rep)
            if not _test_submit(cfg, phase, n, part, Path(tmp), rep):
                break
    per_round = sum(sizes.values())
    if max_jobs and per_round > max_jobs:
        rep.problems.append(Problem("shards", f"a round submits {per_round} tasks, over the site's MaxJobCount "
                                              f"{max_jobs}"))
    _check_accounting(cfg, phases, per_round, rep)
    if max_array:
        rep.checked.append(f"arrays within MaxArraySize {max_array}; a round's {per_round} tasks within "
                           f"MaxJobCount {max_jobs or 'unlimited'}")


def _scontrol_fields(argv: list[str], named: str | None) -> list[dict[str, str]]:
    """`scontrol show ...`'s records as dicts: one record of `key = value` lines (`named` None: `show config`),
    or one a line holding the key `named` (`-o`); [] where scontrol does not answer."""
    out = _run(argv)
    if out is None or out.returncode != 0:
        return []
    if named is None:
        return [{k.strip(): v.strip() for k, _, v in (line.partition("=") for line in out.stdout.splitlines())}]
    return [f for f in map(_fields, out.stdout.splitlines()) if named in f]


def _check_partition(key: str, res: SlurmPhaseConfig, part: str | None, parts: dict[str, dict[str, str]],
                     nodes: list[dict[str, str]], rep: Report) -> None:
    """The phase's partition exists, is up, allows its time and has nodes with its GPUs."""
    if res.partition and parts and res.partition not in parts:
        rep.problems.append(Problem(f"{key}.partition", f"no partition {res.partition!r} on this cluster "
                                                        f"(partitions: {', '.join(sorted(parts))})"))
        return
    if not part or part not in parts:
        return
    p = parts[part]
    if p.get("State", "UP") != "UP":
        rep.problems.append(Problem(f"{key}.partition", f"partition {part!r} is {p.get('State')}"))
    limit = minutes(p.get("MaxTime", "UNLIMITED"))
    if limit is not None and res.time_min > limit:
        rep.problems.append(Problem(f"{key}.time_min", f"{res.time_min} min exceeds partition {part!r}'s "
                                                       f"MaxTime {p.get('MaxTime')}"))
    if res.gpus:
        members = [nd for nd in nodes if part in nd.get("Partitions", "").split(",")]
        most = max((_gpus_of(nd.get("Gres", "")) for nd in members), default=0)
        if most < res.gpus:
            rep.problems.append(Problem(f"{key}.gpus", f"{res.gpus} GPUs per node asked, but the nodes of "
                                                        f"partition {part!r} have at most {most} (gres)"))


def _test_submit(cfg: Config, phase: str, n: int, part: str | None, tmp: Path, rep: Report) -> bool:
    """`sbatch --test-only` of the phase's job as it would be submitted; False when sbatch is not there."""
    from submitit.slurm.slurm import _make_sbatch_string

    from sgsbatch.scheduling.slurm import _parameters_for

    key, res = f"slurm.{phase}", cfg.phase_resources(phase)
    script = tmp / f"{phase}.sh"
    params = _parameters_for(cfg, 0, phase, n, None)
    script.write_text(_make_sbatch_string("true", folder=tmp / "%j", map_count=n, **params))  # type: ignore[arg-type]
    test = _run(["sbatch", "--test-only", str(script)])
    if test is None:
        rep.problems.append(Problem("site", "`sbatch` is not on PATH: run the pre-flight on a login node"))
        return False
    if test.returncode != 0:
        why = " ".join((test.stderr or test.stdout).split())[:400]
        rep.problems.append(Problem(key, f"sbatch --test-only refuses the {phase} job ({n} tasks, "
                                         f"partition {part or 'default'}): {why}; check {key}.cpus, "
                                         f".mem, .gpus, .partition and .extra against the site's nodes"))
    else:
        rep.checked.append(f"{phase}: sbatch --test-only accepts {n} task(s) on partition {part or 'default'}"
                           f" ({res.gpus} GPU, {res.cpus} CPU, {res.mem}, {res.time_min} min)")
    return True


def _check_accounting(cfg: Config, phases: list[str], per_round: int, rep: Report) -> None:
    """QOS and association limits on submitted and running jobs, where accounting answers."""
    user = getpass.getuser()
    assoc = _run(["sacctmgr", "-nP", "show", "assoc", f"user={user}", "format=account,qos,maxsubmitjobs,maxjobs"])
    if assoc is None or assoc.returncode != 0 or not assoc.stdout.strip():
        rep.checked.append("accounting: not available (QOS and association limits not checked)")
        return
    rows = [line.split("|") for line in assoc.stdout.strip().splitlines()]
    allowed = {q for r in rows for q in r[1].split(",") if q}
    for r in rows:
        if r[2] and int(r[2]) < per_round:
            rep.problems.append(Problem("shards", f"a round submits {per_round} tasks at once, over your association's "
                                                  f"MaxSubmitJobs {r[2]} (account {r[0]}): fewer shards, or ask your site"))
    qos_names = sorted({cfg.phase_resources(p).qos for p in phases if cfg.phase_resources(p).qos})
    for name in qos_names:
        q = _run(["sacctmgr", "-nP", "show", "qos", name, "format=name,maxsubmitjobsperuser,maxjobsperuser"])
        found = q is not None and q.returncode == 0 and q.stdout.strip()
        users = [p for p in phases if cfg.phase_resources(p).qos == name]
        if not found:
            rep.problems.append(Problem(f"slurm.{users[0]}.qos", f"no QOS {name!r} on this cluster"))
            continue
        assert q is not None
        _, max_submit, _ = (q.stdout.strip().splitlines()[0].split("|") + ["", ""])[:3]
        if allowed and name not in allowed:
            rep.problems.append(Problem(f"slurm.{users[0]}.qos", f"your association may not use QOS {name!r} "
                                                                 f"(allowed: {', '.join(sorted(allowed))})"))
        submitted = sum(cfg.shard_count(p) for p in users)
        if max_submit and int(max_submit) < submitted:
            rep.problems.append(Problem(f"slurm.{users[0]}.qos", f"QOS {name!r} allows {max_submit} submitted jobs "
                                                                 f"per user; a round submits {submitted} under it"))
    rep.checked.append(f"accounting: association of {user} and QOS {', '.join(qos_names) or '(default)'}")


def require(cfg: Config, site: bool = True) -> Report:
    """`check(cfg, site)`, raising PreflightError when it found a problem."""
    rep = check(cfg, site)
    if not rep.ok:
        raise PreflightError(rep)
    return rep
