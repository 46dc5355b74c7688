"""The Lean words the static checks (checks.py) know: reason codes, command keywords, `#`
commands, the `set_option` allow-lists and the name rules for the IO and meta-programming world.

Covered: Lean core, Batteries, Aesop and Mathlib commands and evaluating tactics/elaborators
as of Lean and Mathlib v4.15.0 (lean/lakefile.toml), as far as they are listed here.
Not covered: a command keyword or `#` command missing from these tables is not refused by
name (checks.py still refuses it when it starts a line below the proof's indentation). Names
are matched by component where the component is unambiguous (`IO`, `EStateM`, `BaseIO`: a local
variable literally named `IO` is refused too); components that are also honest names (`ST`,
`EST`, `System`, `Kernel`, `Environment`, `Meta`: a triangle's side `ST`,
`ProbabilityTheory.Kernel`) are refused only as the first component of a dotted name. What a
single-component name resolves to (`ST` after `open`, `.println` against an expected `IO _`,
`h.toIO` by generalized field notation) is judged after resolution, by the kernel re-check
(`forbiddenRoots` in lean/SgsKernelCheck.lean): a filter of tokens cannot see it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EVAL = "eval"
EXIT = "exit"
HASH_COMMAND = "hash_command"
RUN_CMD = "run_cmd"
RUN_TAC = "run_tac"
RUN_ELAB = "run_elab"
ELAB = "elab"
MACRO = "macro"
SYNTAX = "syntax"
NOTATION = "notation"
INITIALIZE = "initialize"
EXTERN = "extern"
IMPLEMENTED_BY = "implemented_by"
UNSAFE = "unsafe"
AXIOM = "axiom"
OPAQUE = "opaque"
SET_OPTION = "set_option"
LOCAL_INSTANCE = "local_instance"
IMPORT = "import"
OPEN_IN_COMMAND = "open_in_command"
DECLARATION = "declaration"
COMMAND = "command"
NATIVE_DECIDE = "native_decide"
SORRY = "sorry"
BAD_STATEMENT = "bad_statement"
# Added with the lexer:
LEX_ERROR = "lex_error"  # text Lean cannot tokenize or whose brackets do not balance: Lean fails it anyway
TOP_LEVEL = "top_level"  # a line below the proof's indentation that could start a new command
IO = "io"  # names from the IO world (IO, EIO, BaseIO, EStateM, ST, System, ...) and tactics that reach out
META = "meta"  # Lean.* and meta-programming names, syntax quotations and name literals
TRACE = "trace"  # the `trace` tactic, `dbg_trace`, `dbgTrace`, `panic!`-style printing
BAD_HEADER = "bad_header"  # a header line other than import / open / allowed set_option / namespace / section
# No model text reaches Lean's evaluator:
CONFIG = "config"  # a `(name := value)` whose value is not a literal: tactic configs are evaluated (Meta.evalExpr')
LEADING_DOT = "leading_dot"  # `.A.b`: resolved in the expected type's namespace (`.FS.writeFile` -> IO.FS.writeFile)
STATEMENT_CODE = "statement_code"  # a tactic block (`by`) or `do` inside a statement: code the checker would run
# With the allow-list of tactics, judged by syntax:
UNKNOWN_TACTIC = "unknown_tactic"  # a tactic (or conv tactic) that is not on tactics.py's allow-list, named in the detail

KEYWORD_REASONS: dict[str, str] = {
    "import": IMPORT,
    "run_cmd": RUN_CMD,
    "run_tac": RUN_TAC,
    "run_elab": RUN_ELAB, "run_meta": RUN_ELAB, "by_elab": RUN_ELAB,
    "elab": ELAB, "elab_rules": ELAB, "simproc": ELAB, "dsimproc": ELAB, "simproc_decl": ELAB,
    "dsimproc_decl": ELAB, "declare_simp_like_tactic": ELAB, "declare_config_elab": ELAB,
    "macro": MACRO, "macro_rules": MACRO, "binder_predicate": MACRO, "binder_notation": MACRO,
    "syntax": SYNTAX, "declare_syntax_cat": SYNTAX,
    "notation": NOTATION, "notation3": NOTATION, "infix": NOTATION, "infixl": NOTATION, "infixr": NOTATION,
    "prefix": NOTATION, "postfix": NOTATION, "unexpander": NOTATION, "app_unexpander": NOTATION,
    "delab": NOTATION,
    "initialize": INITIALIZE, "extend_docs": COMMAND,
    "extern": EXTERN,
    "implemented_by": IMPLEMENTED_BY,
    "unsafe": UNSAFE,
    "axiom": AXIOM,
    "opaque": OPAQUE,
    "native_decide": NATIVE_DECIDE, "bv_decide": NATIVE_DECIDE, "bv_check": NATIVE_DECIDE,
    "sorry": SORRY, "admit": SORRY, "sorryAx": SORRY,
    "theorem": DECLARATION, "lemma": DECLARATION, "def": DECLARATION, "example": DECLARATION,
    "abbrev": DECLARATION, "instance": DECLARATION, "structure": DECLARATION, "class": DECLARATION,
    "inductive": DECLARATION, "coinductive": DECLARATION, "irreducible_def": DECLARATION, "alias": DECLARATION,
    "unif_hint": DECLARATION, "deriving": DECLARATION, "mutual": DECLARATION, "noncomputable": DECLARATION,
    "proof_wanted": DECLARATION, "private": DECLARATION, "protected": DECLARATION, "partial": DECLARATION,
    "nonrec": DECLARATION, "mk_iff_of_inductive_prop": DECLARATION, "gen_injective_theorems": DECLARATION,
    "namespace": COMMAND, "section": COMMAND, "end": COMMAND, "variable": COMMAND, "universe": COMMAND,
    "export": COMMAND, "attribute": COMMAND, "omit": COMMAND, "include": COMMAND, "add_decl_doc": COMMAND,
    "compile_inductive": COMMAND, "compile_def": COMMAND, "assert_not_exists": COMMAND,
    "assert_not_imported": COMMAND, "library_note": COMMAND, "suppress_compilation": COMMAND,
    "unseal": COMMAND, "seal": COMMAND, "add_aesop_rules": COMMAND, "erase_aesop_rules": COMMAND,
    "initialize_simps_projections": COMMAND, "open_locale": COMMAND, "import_path": COMMAND,
    "dbg_trace": TRACE, "dbgTrace": TRACE, "dbgTraceIfShared": TRACE, "panic!": TRACE,
    "polyrith": IO, "include_str": IO,
    # evaluate a goal's terms as compiled code (Testable instances), and IO runners at the root
    "slim_check": EVAL, "plausible": EVAL, "timeit": IO, "allocprof": IO,
}
# Word prefixes that only start commands (`builtin_initialize`, `register_simp_attr`, `declare_aesop_rule_sets`).
PREFIX_REASONS: tuple[tuple[str, str], ...] = (("builtin_", ELAB), ("register_", INITIALIZE),
                                               ("declare_", COMMAND))
# `#` tokens: `#` glued to a word that starts with one of these is that command (Lean reads the
# longest token), anything else after `#` is Mathlib's `#s` (Finset.card) notation.
HASH_COMMANDS: dict[str, str] = {"#eval": EVAL, "#exit": EXIT, **{f"#{w}": HASH_COMMAND for w in (
    "print", "check", "check_failure", "reduce", "synth", "guard_msgs", "guard", "guard_expr", "help", "lint",
    "find", "find_home", "simp", "norm_num", "conv", "whnf", "whnfR", "unfold", "min_imports", "where",
    "version", "time", "explode", "leansearch", "loogle", "moogle", "sample", "test", "html", "widget",
    "instances", "long_instances", "count_heartbeats", "adaptation_note", "check_tactic", "check_simp",
    "discr_tree_key", "discr_tree_simp_key", "info_trees", "import_bumps", "redundant_imports",
    "trans_imports", "list_linters", "push_neg", "parse", "kerodon", "stacks", "align", "align_import",
    "noalign", "minimize_imports", "string_diagram", "stacks_tags",
)}}
# Name components (after unescaping) that are the IO world or meta-programming wherever they stand.
IO_PARTS = frozenset({"IO", "EIO", "BaseIO", "EStateM", "StateRefT", "IORef", "runST", "runEST", "IOError",
                      "RealWorld", "FilePath"})
META_PARTS = frozenset({"Elab", "MetaM", "CoreM", "TermElabM", "TacticM", "CommandElabM", "MacroM",
                        "evalExpr", "evalTactic", "evalDecl", "addDecl", "addAndCompile",
                        "compileDecl", "compileDecls", "liftMetaM", "liftTermElabM", "liftCoreM",
                        "liftCommandElabM", "throwError", "throwErrorAt", "logInfo", "logWarning", "logError",
                        "ImportM", "runTermElabM", "evalConst", "ofExcept"})
# Components that are also honest names (`ST` a triangle's side): refused only as the first
# component of a dotted name (`ST.Ref.get`, `System.FilePath.mk`): these are namespaces at Lean's root.
IO_ROOTS = frozenset({"ST", "EST", "System"})
# Namespaces under `Lean` (`Lean.Meta`, `Lean.Kernel`, ...): a name starting with one reaches Lean's only
# inside `namespace Lean` or after `open Lean`, both refused, so as the first part of a dotted name they are
# honest (`Kernel.comp` under `open ProbabilityTheory`); refused only as a namespace to open.
META_ROOTS = frozenset({"Meta", "Environment", "Kernel", "Compiler", "IR", "Elab", "Parser", "Syntax", "Macro"})
NATIVE_PARTS = frozenset({"ofReduceBool", "ofReduceNat", "reduceBool", "reduceNat", "native_decide"})
_UNSAFE_PART = re.compile(r"^unsafe(?:[A-Z]|$)|Unsafe")

# set_option names a proof may set: exact names and prefixes (with the dot). Printing and lint
# switches and one push_neg setting: none of them changes what is trusted, the limits, or runs code.
# Everything else is refused (debug.*, trust, kernel switches, other synthInstance.*, compiler.*,
# interpreter.*, trace.* (prints), diagnostics, Elab.async, ...).
PROOF_OPTIONS: frozenset[str] = frozenset({"push_neg.use_distrib", "simprocs", "autoImplicit",
                                           "relaxedAutoImplicit", "tactic.hygienic"})
# Resource options: provers set them in proofs and statements; accepted with a numeric
# value within `verification.max_heartbeats_option` / `max_rec_depth_option` (checks._resource_options).
HEARTBEAT_OPTIONS: frozenset[str] = frozenset({"maxHeartbeats", "synthInstance.maxHeartbeats"})
DEPTH_OPTIONS: frozenset[str] = frozenset({"maxRecDepth", "synthInstance.maxSize"})
RESOURCE_OPTIONS: frozenset[str] = HEARTBEAT_OPTIONS | DEPTH_OPTIONS
PROOF_OPTION_PREFIXES: tuple[str, ...] = ("pp.", "linter.")
# A header may also set these (every D_3k header sets `maxHeartbeats 0`; headers come from the
# dataset or the verify input, and the pool's wall-clock timeout bounds the time anyway).
HEADER_OPTIONS: frozenset[str] = PROOF_OPTIONS | RESOURCE_OPTIONS


@dataclass(frozen=True)
class OptionBounds:
    """The largest value a proof or statement may give a resource option; 0 = any value (Lean's 0, no
    limit, included: the pool's wall-clock timeout bounds every proof)."""

    max_heartbeats: int = 0
    max_rec_depth: int = 100_000

    def bound(self, name: str) -> int:
        return self.max_heartbeats if name in HEARTBEAT_OPTIONS else self.max_rec_depth

    @staticmethod
    def key(name: str) -> str:
        """The config key (under `verification.`) that bounds resource option `name`."""
        return "max_heartbeats_option" if name in HEARTBEAT_OPTIONS else "max_rec_depth_option"


DEFAULT_BOUNDS = OptionBounds()


def option_allowed(name: str, header: bool = False) -> bool:
    """True if `set_option NAME` may appear in a proof (or, with `header`, in a header). Resource options
    pass here; their values are bounded apart (checks.py)."""
    if name in (HEADER_OPTIONS if header else PROOF_OPTIONS | RESOURCE_OPTIONS):
        return True
    return name.startswith(PROOF_OPTION_PREFIXES) and "kernel" not in name.lower()


def keyword_reason(word: str) -> str | None:
    """The reason code for a bare (unescaped, undotted) word that starts a command or evaluates code."""
    reason = KEYWORD_REASONS.get(word)
    if reason is None:
        reason = next((r for p, r in PREFIX_REASONS if word.startswith(p)), None)
    return reason


def name_reason(parts: tuple[str, ...]) -> str | None:
    """The reason code for a name (its unescaped components), None for an ordinary name."""
    if any(p in NATIVE_PARTS for p in parts):
        return NATIVE_DECIDE
    if "sorryAx" in parts:
        return SORRY
    if any(_UNSAFE_PART.search(p) for p in parts):
        return UNSAFE
    dotted = len(parts) > 1
    if any(p in IO_PARTS for p in parts) or (dotted and parts[0] in IO_ROOTS):
        return IO
    if parts[:1] == ("Lean",) or any(p in META_PARTS for p in parts):
        return META
    if any(p in ("dbg_trace", "dbgTrace", "dbgTraceIfShared", "panicWithPos", "panicWithPosWithDecl")
           for p in parts):
        return TRACE
    return None


def namespace_reason(parts: tuple[str, ...]) -> str | None:
    """The reason code for a namespace to `open` (header, statement or proof): none of the IO world or of
    Lean's meta-programming, whose names would then resolve from single words (`open System in ...
    FilePath`: field notation on it reaches IO); otherwise as any name."""
    head = parts[0] if parts else ""
    if head in IO_PARTS or head in IO_ROOTS:
        return IO
    if head == "Lean" or head in META_ROOTS or head in META_PARTS:
        return META
    return name_reason(parts)


def hash_reason(word: str) -> str | None:
    """The reason code if `word` (`#` + the glued identifier) starts with a known `#` command."""
    best = max((k for k in HASH_COMMANDS if word.startswith(k)), key=len, default=None)
    return None if best is None else HASH_COMMANDS[best]


REASONS: frozenset[str] = frozenset({
    *KEYWORD_REASONS.values(), *(r for _, r in PREFIX_REASONS), *HASH_COMMANDS.values(), SET_OPTION,
    LOCAL_INSTANCE, OPEN_IN_COMMAND, BAD_STATEMENT, LEX_ERROR, TOP_LEVEL, IO, META, TRACE, BAD_HEADER, CONFIG,
    LEADING_DOT, STATEMENT_CODE, UNKNOWN_TACTIC,
})
