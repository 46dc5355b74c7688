"""Chat prompts of the three SGS roles (Solver, Conjecturer, Guide) and the Guide's score tags, as data.

The wording lives in template files, not in code: sets shipped with the package
(``sgsbatch/prompt_templates/<name>.json``; ``reference`` holds the SGS reference's exact strings and
tags, ``legacy`` sgsbatch's own earlier wording) or a user's own file. The ``[prompts]`` config
section picks one per role: `load_prompts` turns that choice into a `PromptSet`.

Placeholders: ``{header}`` and ``{theorem}`` of the dataset row, ``{conjecture}`` (an extracted
statement, without header), ``{statement_and_proof}`` (the seeded Conjecturer's: a solved target's
theorem followed by one of its stored proofs, stripped, as the reference's
``(seed_theorem + seed_proof).strip()``, sgs/utils/prompts.py:74). They are filled in one pass, so a
value that happens to contain ``{theorem}`` is left alone; any other brace in a template is literal
text (Lean's ``{x : ℝ}``). The reference Solver prompt shows ``{header}{theorem}`` (concatenated as
is); its Conjecturer and Guide prompts show the theorem without the header.

A value in ``[prompts]`` is a shipped set's name, or a path (starting with ``.``, ``/`` or ``~``):
for a role, a text file whose whole content (read as is: a trailing newline is part of the prompt)
is the template, or a ``.json`` file shaped like the shipped sets; for ``guide_tags``, a ``.json``
file with ``{"relevance": [begin, end], "redundancy": [...], "conclusion_complexity": [...]}``,
alone or under a ``guide_tags`` key.

Each builder returns the chat messages for one request: a single user turn, no system prompt, as a
list of ``{"role": "user", "content": ...}`` dicts ready for a chat template. Not covered: chat
templating, tokenisation, sampling parameters, and parsing the replies (`logic/extraction.py`,
`logic/review.py`).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

REFERENCE = "reference"
TEMPLATE_ROLES: tuple[str, ...] = ("solver", "conjecturer", "conjecturer_unconditioned", "conjecturer_seeded",
                                   "guide")
SCORES: tuple[str, ...] = ("relevance", "redundancy", "conclusion_complexity")
# placeholders each role's template may use, and the ones it must use
PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "solver": ("header", "theorem"),
    "conjecturer": ("header", "theorem"),
    "conjecturer_unconditioned": (),
    "conjecturer_seeded": ("header", "statement_and_proof"),
    "guide": ("theorem", "conjecture"),
}
REQUIRED_PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "solver": ("theorem",),
    "conjecturer": ("theorem",),
    "conjecturer_unconditioned": (),
    "conjecturer_seeded": ("statement_and_proof",),
    "guide": ("theorem", "conjecture"),
}
_PLACEHOLDER_RE = re.compile(r"\{(header|theorem|conjecture|statement_and_proof)\}")


class PromptError(ValueError):
    """A template choice that cannot be used: unknown name, unreadable file, bad content."""


@dataclass(frozen=True)
class GuideTags:
    """(begin, end) tag of each Guide score."""

    relevance: tuple[str, str]
    redundancy: tuple[str, str]
    conclusion_complexity: tuple[str, str]

    def pairs(self) -> tuple[tuple[str, str, str], ...]:
        """(score name, begin tag, end tag) in prompt order."""
        return tuple((name, *getattr(self, name)) for name in SCORES)


@dataclass(frozen=True)
class PromptSet:
    """The template of each role and the Guide's tags: what the builders and the Guide parser use."""

    solver: str
    conjecturer: str
    conjecturer_unconditioned: str
    conjecturer_seeded: str
    guide: str
    guide_tags: GuideTags


class PromptChoice(Protocol):
    """The `[prompts]` config section: a shipped set's name or a path per role, and the tag set."""

    @property
    def solver(self) -> str: ...
    @property
    def conjecturer(self) -> str: ...
    @property
    def conjecturer_unconditioned(self) -> str: ...
    @property
    def conjecturer_seeded(self) -> str: ...
    @property
    def guide(self) -> str: ...
    @property
    def guide_tags(self) -> str: ...


def _templates_dir() -> Any:
    return resources.files("sgsbatch") / "prompt_templates"


def builtin_names() -> tuple[str, ...]:
    """Names of the template sets shipped with the package, sorted."""
    return tuple(sorted(p.name[: -len(".json")] for p in _templates_dir().iterdir() if p.name.endswith(".json")))


def is_path(value: str) -> bool:
    return value.startswith((".", "/", "~"))


def _choices() -> str:
    return ", ".join(repr(n) for n in builtin_names()) + ", or a path to your own file (starting with ./, ../, / or ~)"


def _read_json(text: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise PromptError(f"{where} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise PromptError(f"{where} must hold a JSON object")
    return data


@functools.cache
def _builtin_set(name: str) -> dict[str, Any]:
    if name not in builtin_names():
        raise PromptError(f"unknown template set {name!r}; valid: {_choices()}")
    text = (_templates_dir() / f"{name}.json").read_text(encoding="utf-8")
    return _read_json(text, f"the shipped template set {name!r}")


def _read_file(value: str) -> tuple[Path, str]:
    path = Path(value).expanduser()
    if not path.is_file():
        raise PromptError(f"no such template file: {path}; give {_choices()}")
    try:
        return path, path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PromptError(f"cannot read template file {path}: {e}") from e


def check_template(role: str, template: str, where: str) -> str:
    """`template` if it names every placeholder `role` needs, else PromptError."""
    used = set(_PLACEHOLDER_RE.findall(template))
    missing = [p for p in REQUIRED_PLACEHOLDERS[role] if p not in used]
    if missing:
        raise PromptError(f"{where} has no " + ", ".join("{" + p + "}" for p in missing) +
                          f" placeholder (the {role} prompt must show it)")
    extra = sorted(used - set(PLACEHOLDERS[role]))
    if extra:
        raise PromptError(f"{where} uses " + ", ".join("{" + p + "}" for p in extra) + f", which the {role} "
                          f"prompt does not fill (it fills: {', '.join(PLACEHOLDERS[role]) or 'nothing'})")
    return template


def read_template(role: str, value: str) -> str:
    """The `role` template that the config value `value` (a shipped set's name or a path) names."""
    if role not in TEMPLATE_ROLES:
        raise PromptError(f"unknown prompt role {role!r}; valid: {', '.join(TEMPLATE_ROLES)}")
    if is_path(value):
        path, text = _read_file(value)
        if path.suffix != ".json":
            return check_template(role, text, f"template file {path}")
        data, where = _read_json(text, f"template file {path}"), f"template file {path}"
    else:
        data, where = _builtin_set(value), f"the shipped template set {value!r}"
    template = data.get(role)
    if not isinstance(template, str):
        raise PromptError(f"{where} has no {role!r} template (a string)")
    return check_template(role, template, f"the {role!r} template of {where}")


def _tags(data: Any, where: str) -> GuideTags:
    if isinstance(data, dict) and "guide_tags" in data:
        data = data["guide_tags"]
    if not isinstance(data, dict) or set(data) != set(SCORES):
        raise PromptError(f"{where} must map exactly {', '.join(SCORES)} to [begin tag, end tag]")
    pairs: dict[str, tuple[str, str]] = {}
    for name in SCORES:
        pair = data[name]
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(t, str) and t for t in pair)):
            raise PromptError(f"{where}: {name} must be [begin tag, end tag], two non-empty strings, got {pair!r}")
        pairs[name] = (pair[0], pair[1])
    return GuideTags(**pairs)


def read_guide_tags(value: str) -> GuideTags:
    """The Guide tag set that the config value `value` (a shipped set's name or a .json path) names."""
    if is_path(value):
        path, text = _read_file(value)
        return _tags(_read_json(text, f"tag file {path}"), f"tag file {path}")
    return _tags(_builtin_set(value).get("guide_tags"), f"the shipped template set {value!r}")


@functools.lru_cache(maxsize=64)
def _load(solver: str, conjecturer: str, unconditioned: str, seeded: str, guide: str, guide_tags: str) -> PromptSet:
    return PromptSet(
        solver=read_template("solver", solver),
        conjecturer=read_template("conjecturer", conjecturer),
        conjecturer_unconditioned=read_template("conjecturer_unconditioned", unconditioned),
        conjecturer_seeded=read_template("conjecturer_seeded", seeded),
        guide=read_template("guide", guide),
        guide_tags=read_guide_tags(guide_tags),
    )


def load_prompts(choice: PromptChoice) -> PromptSet:
    """The templates and tags a `[prompts]` section names (read once per process and choice)."""
    return _load(choice.solver, choice.conjecturer, choice.conjecturer_unconditioned, choice.conjecturer_seeded,
                 choice.guide, choice.guide_tags)


def reference_prompts() -> PromptSet:
    """The SGS reference's exact prompts and tags (the default of every `[prompts]` key)."""
    return _load(REFERENCE, REFERENCE, REFERENCE, REFERENCE, REFERENCE, REFERENCE)


def render(template: str, **values: str) -> str:
    """`template` with each ``{name}`` placeholder replaced by ``values[name]``, in one pass."""
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


def _user(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


def solver_messages(header: str, theorem: str, prompts: PromptSet | None = None) -> list[dict[str, str]]:
    """The Solver prompt: complete `header + theorem` (a statement ending in `:= by`)."""
    if not theorem.strip():
        raise ValueError("solver_messages: the theorem statement is empty")
    p = prompts or reference_prompts()
    return _user(render(p.solver, header=header, theorem=theorem))


def conjecturer_messages(header: str, theorem: str, conditioned: bool = True,
                         prompts: PromptSet | None = None) -> list[dict[str, str]]:
    """The Conjecturer prompt for one target.

    With ``conditioned=False`` (the "no problem conditioning" ablation) the prompt is fixed and
    holds no target: `header` and `theorem` are ignored, and every unsolved target gets the same
    prompt (diversity comes from sampling).
    """
    p = prompts or reference_prompts()
    if not conditioned:
        return _user(p.conjecturer_unconditioned)
    if not theorem.strip():
        raise ValueError("conjecturer_messages: the theorem statement is empty")
    return _user(render(p.conjecturer, header=header, theorem=theorem))


def seeded_conjecturer_messages(header: str, theorem: str, proof: str, conditioned: bool = True,
                                 prompts: PromptSet | None = None) -> list[dict[str, str]]:
    """The seeded Conjecturer prompt (STP-style, `conjecturer.setup = "seed_statement"`): a solved
    target's `theorem` (without header) and one of its verified proofs, asking for a harder theorem.

    As the reference (sgs/utils/prompts.py:59-77): the block shows ``(theorem + proof).strip()``.
    With ``conditioned=False`` the fixed "no problem conditioning" prompt, as `conjecturer_messages`.
    """
    p = prompts or reference_prompts()
    if not conditioned:
        return _user(p.conjecturer_unconditioned)
    if not theorem.strip() or not proof.strip():
        raise ValueError("seeded_conjecturer_messages: the seed's theorem and proof must both be non-empty")
    return _user(render(p.conjecturer_seeded, header=header, statement_and_proof=(theorem + proof).strip()))


def guide_messages(target: str, conjecture: str, prompts: PromptSet | None = None) -> list[dict[str, str]]:
    """The Guide prompt: score `conjecture` (a statement without header) as a stepping stone to
    `target` (the target's theorem, without header)."""
    if not target.strip() or not conjecture.strip():
        raise ValueError("guide_messages: the target and the conjecture must both be non-empty")
    p = prompts or reference_prompts()
    return _user(render(p.guide, theorem=target, conjecture=conjecture))
