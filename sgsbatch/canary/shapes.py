"""The distinct job shapes of a config: where and with what its phases run (pure logic).

A shape is what Slurm sees of a phase's job: partition, account, QOS, GPUs, CPUs, memory, nodes,
extra sbatch options and the job script's setup lines. Phases of one shape share one canary job,
which runs the checks of all their components (`COMPONENTS`; with `solver.mode = "search"` the
solve phase's also `search`: its Lean runs in the solve job); every job also checks its
environment. The job's time limit is `canary.time_min`, never more than the smallest time limit of its phases.
"""

from __future__ import annotations

from dataclasses import dataclass

from sgsbatch.config.schema import Config

# What each phase's job needs to work: the canary checks of its components.
COMPONENTS: dict[str, tuple[str, ...]] = {
    "init": (),
    "conjecture": ("generation:conjecturer",),
    "solve": ("generation:solver",),
    "guide": ("guide",),
    "verify": ("verification",),
    "train": ("training",),
}


@dataclass(frozen=True)
class JobShape:
    partition: str
    account: str
    qos: str
    gpus: int
    cpus: int
    mem: str
    nodes: int
    extra: tuple[tuple[str, str], ...]
    setup: tuple[str, ...] = ()  # the job script's setup lines (slurm.<phase>.setup)

    @property
    def label(self) -> str:
        where = "/".join(x for x in (self.partition or "default", self.account, self.qos) if x)
        out = f"{where} gpus={self.gpus} cpus={self.cpus} mem={self.mem}"
        if self.nodes > 1:
            out += f" nodes={self.nodes}"
        return out + "".join(f" {k}={v}" for k, v in self.extra)


@dataclass(frozen=True)
class ShapeJob:
    """One canary job: a shape, the phases that share it (in round order), its checks and time limit."""

    shape: JobShape
    phases: tuple[str, ...]
    time_min: int
    search: bool = False  # solver.mode = "search": the solve phase runs Lean too


    @property
    def components(self) -> tuple[str, ...]:
        out: list[str] = []
        for phase in self.phases:
            out += [c for c in COMPONENTS[phase] if c not in out]
            if phase == "solve" and self.search:
                out.append("search")
        return ("environment", *out)

    @property
    def name(self) -> str:
        return "+".join(self.phases)


def shape_of(cfg: Config, phase: str) -> JobShape:
    r = cfg.phase_resources(phase)
    return JobShape(r.partition, r.account, r.qos, r.gpus, r.cpus, r.mem, r.nodes, tuple(sorted(r.extra.items())),
                    r.setup)


def shape_jobs(cfg: Config) -> list[ShapeJob]:
    """One job per distinct shape among the phases of round 0 (round 0 runs every phase a run has)."""
    by_shape: dict[JobShape, list[str]] = {}
    for phase in cfg.phases_of_round(0):
        by_shape.setdefault(shape_of(cfg, phase), []).append(phase)
    return [ShapeJob(shape, tuple(phases), min(cfg.canary.time_min, *(cfg.phase_resources(p).time_min for p in phases)),
                     cfg.solver.mode == "search")
            for shape, phases in by_shape.items()]
