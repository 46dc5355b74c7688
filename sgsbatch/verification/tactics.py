"""The tactic allow-list: every tactic a proof may use, with the shape of its arguments and the file
that declares it (Lean v4.15.0 core `src/...`, Batteries, Aesop or Mathlib v4.15.0).

A proof whose tactic block uses a tactic outside this table is refused (`unknown_tactic`, naming
it) before Lean sees it: Lean runs code while it elaborates, and a tactic nobody listed may run a
model's term (Mathlib's macros over `run_tac`, tactics that `evalTerm` an argument). The table is
the first layer of docs/verification.md; skeleton.py finds a proof's tactics.

An entry is `mode name shape source [tactic options]`:
- mode: `tactic`, or `conv` (inside `conv => ...`);
- shape: how skeleton.py walks the arguments (`SHAPES`): `terms` (terms, `[...]` lists,
  locations; `by` blocks inside are walked), `seq` (a tactic block: `try t`, `iterate 3 t`),
  `first` (`| t | t`), `arrow` (`case x => t`), `alts` (`induction x with | zero => t`), `if`
  (`if h : c then t else t`), `in` (`set_option o v in t`), `conv` (`conv at h => c`), `calc`
  (steps on lines of their own, `_ = ...` at the tactic's column included);
- source: the file that declares the syntax, relative to its repository (`src/Init/Tactics.lean`
  is Lean's, `Mathlib/...` Mathlib's, `Batteries/...`, `Aesop/...`), for the person who judges the
  entry; held against tests/lean/data/tactic_catalogue.tsv, generated from the sources at the pinned
  versions (tests/lean/test_tactic_catalogue.py; docs/verification.md says which sources it read);
- tactic options: names of `(name := ...)` options whose value is tactic syntax (`disch`), walked as
  tactic blocks; every other `(name := value)` right after the head is a configuration, which Lean
  evaluates (`declare_config_elab`), so it must be a literal; `*` marks a tactic that takes its
  clauses in any order (Aesop: `(add ...)`, `(simp_config := ...)`), whose every `(name := value)`
  among its arguments is then a configuration.

Not on the table, on purpose: tactics that evaluate a term or run code taken from the proof
(`run_tac`, Mathlib's `run_conv`, `success_if_fail_with_msg`, `guard_msgs`...), that evaluate the
goal as compiled code (`native_decide`, `bv_decide`, `plausible`, `slim_check`), that reach out
(`polyrith`, `exact?%`-style search servers), that admit goals (`sorry`, `admit`, `rw?`; `exact?` and `apply?` stay: what they do not find
is a `sorry` the verdict rules refuse), and
tactics that print a model's text or only debug (`trace`, `dbg_trace`, `show_term`); `trace_state` prints
only the goals and stays.
How to add a tactic (docs/verification.md, "Adding a tactic"): one line here with its source,
the evidence that neither it nor any tactic it expands to evaluates a term of the proof (its
elaborator's code), a proof using it in tests/lean/test_tactic_allowlist.py, and, if it takes a tactic
block, the right shape.
"""

from __future__ import annotations

from dataclasses import dataclass

TERMS, SEQ, FIRST, ARROW, ALTS, IF, IN, CONV, CALC = "terms", "seq", "first", "arrow", "alts", "if", "in", "conv", "calc"
SHAPES: tuple[str, ...] = (TERMS, SEQ, FIRST, ARROW, ALTS, IF, IN, CONV, CALC)
MODES: tuple[str, ...] = ("tactic", "conv")
ANYWHERE = "*"  # in the options column: the tactic takes its clauses in any order, configurations among them
# conv tactics whose `=> ...` block is a *tactic* block (`tactic => t`, Batteries' `equals e => t`); the
# other conv `arrow` entries (`case`, `next`) take a conv block.
CONV_TO_TACTIC: frozenset[str] = frozenset({"tactic", "equals"})


@dataclass(frozen=True)
class Tactic:
    """One allowed tactic: its mode, keyword, argument shape, declaring file and tactic-valued options."""

    mode: str
    name: str
    shape: str
    source: str
    tactic_options: tuple[str, ...] = ()
    configs_anywhere: bool = False  # `(name := value)` anywhere among its arguments is a configuration


_CORE = "src/Init/Tactics.lean"
_CONV = "src/Init/Conv.lean"
_LIN = "Mathlib/Tactic/Linarith/Frontend.lean"

# mode name shape source [tactic options, comma-separated]
_TABLE = f"""
tactic  intro              terms  {_CORE}
tactic  intros             terms  {_CORE}
tactic  rintro             terms  src/Init/RCases.lean
tactic  rintros            terms  src/Init/RCases.lean
tactic  rcases             terms  src/Init/RCases.lean
tactic  obtain             terms  src/Init/RCases.lean
tactic  rename_i           terms  {_CORE}
tactic  rename             terms  {_CORE}
tactic  revert             terms  {_CORE}
tactic  clear              terms  {_CORE}
tactic  clear_value        terms  Mathlib/Tactic/Basic.lean
tactic  subst              terms  {_CORE}
tactic  subst_vars         terms  {_CORE}
tactic  assumption         terms  {_CORE}
tactic  contradiction      terms  {_CORE}
tactic  exfalso            terms  {_CORE}
tactic  trivial            terms  {_CORE}
tactic  rfl                terms  {_CORE}
tactic  ac_rfl             terms  {_CORE}
tactic  eq_refl            terms  {_CORE}
tactic  exact              terms  {_CORE}
tactic  exacts             terms  Batteries/Tactic/Init.lean
tactic  apply              terms  {_CORE}
tactic  refine             terms  {_CORE}
tactic  refine'            terms  {_CORE}
tactic  constructor        terms  {_CORE}
tactic  left               terms  {_CORE}
tactic  right              terms  {_CORE}
tactic  exists             terms  {_CORE}
tactic  existsi            terms  Mathlib/Tactic/ExistsI.lean
tactic  use                terms  Mathlib/Tactic/Use.lean              discharger
tactic  use!               terms  Mathlib/Tactic/Use.lean              discharger
tactic  have               terms  {_CORE}
tactic  haveI              terms  {_CORE}
tactic  have'              terms  {_CORE}
tactic  replace            terms  {_CORE}
tactic  inhabit            terms  Mathlib/Tactic/Inhabit.lean
tactic  nontriviality      terms  Mathlib/Tactic/Nontriviality/Core.lean
tactic  absurd             terms  Batteries/Tactic/Init.lean
tactic  let                terms  {_CORE}
tactic  letI               terms  {_CORE}
tactic  show               terms  {_CORE}
tactic  suffices           terms  {_CORE}
tactic  change             terms  {_CORE}
tactic  specialize         terms  {_CORE}
tactic  generalize         terms  {_CORE}
tactic  set                terms  Mathlib/Tactic/Set.lean
tactic  choose             terms  Mathlib/Tactic/Choose.lean
tactic  lift               terms  Mathlib/Tactic/Lift.lean
tactic  calc               calc   {_CORE}
tactic  cases              alts   {_CORE}
tactic  induction          alts   {_CORE}
tactic  match              alts   src/Lean/Parser/Term.lean
tactic  cases'             terms  Mathlib/Tactic/Cases.lean
tactic  induction'         terms  Mathlib/Tactic/Cases.lean
tactic  rcases'            terms  src/Init/RCases.lean
tactic  interval_cases     terms  Mathlib/Tactic/IntervalCases.lean
tactic  fin_cases          terms  Mathlib/Tactic/FinCases.lean
tactic  mod_cases          terms  Mathlib/Tactic/ModCases.lean
tactic  by_cases           terms  {_CORE}
tactic  by_contra          terms  Batteries/Tactic/Init.lean
tactic  by_contra!         terms  Mathlib/Tactic/ByContra.lean
tactic  push_neg           terms  Mathlib/Tactic/PushNeg.lean
tactic  contrapose         terms  Mathlib/Tactic/Contrapose.lean
tactic  contrapose!        terms  Mathlib/Tactic/Contrapose.lean
tactic  split              terms  {_CORE}
tactic  split_ifs          terms  Mathlib/Tactic/SplitIfs.lean
tactic  split_ands         terms  Batteries/Tactic/Init.lean
tactic  and_intros         terms  {_CORE}
tactic  constructorm       terms  Mathlib/Tactic/CasesM.lean
tactic  casesm             terms  Mathlib/Tactic/CasesM.lean
tactic  cases_type         terms  Mathlib/Tactic/CasesM.lean
tactic  injection          terms  {_CORE}
tactic  injections         terms  {_CORE}
tactic  nofun              terms  {_CORE}
tactic  nomatch            terms  {_CORE}
tactic  tauto              terms  Mathlib/Tactic/Tauto.lean
tactic  decide             terms  {_CORE}
tactic  omega              terms  {_CORE}
tactic  simp               terms  {_CORE}                             disch
tactic  simp?              terms  {_CORE}                             disch
tactic  simp_all           terms  {_CORE}                             disch
tactic  simp_all?          terms  {_CORE}                             disch
tactic  simp_arith         terms  {_CORE}                             disch
tactic  simp!              terms  {_CORE}                             disch
tactic  simp_all!          terms  {_CORE}                             disch
tactic  dsimp              terms  {_CORE}
tactic  dsimp?             terms  {_CORE}
tactic  dsimp!             terms  {_CORE}
tactic  simpa              terms  {_CORE}                             disch
tactic  simpa?             terms  {_CORE}                             disch
tactic  simpa!             terms  {_CORE}                             disch
tactic  simp_rw            terms  Mathlib/Tactic/SimpRw.lean
tactic  simp_intro         terms  Mathlib/Tactic/SimpIntro.lean
tactic  rw                 terms  {_CORE}
tactic  rewrite            terms  {_CORE}
tactic  rwa                terms  {_CORE}
tactic  erw                terms  {_CORE}
tactic  nth_rewrite        terms  Mathlib/Tactic/NthRewrite.lean
tactic  nth_rw             terms  Mathlib/Tactic/NthRewrite.lean
tactic  rw_mod_cast        terms  {_CORE}
tactic  unfold             terms  {_CORE}
tactic  unfold_let         terms  Mathlib/Tactic/DefEqTransformations.lean
tactic  delta              terms  {_CORE}
tactic  norm_cast          terms  {_CORE}
tactic  push_cast          terms  {_CORE}
tactic  exact_mod_cast     terms  {_CORE}
tactic  apply_mod_cast     terms  {_CORE}
tactic  assumption_mod_cast terms {_CORE}
tactic  zify               terms  Mathlib/Tactic/Zify.lean
tactic  qify               terms  Mathlib/Tactic/Qify.lean
tactic  rify               terms  Mathlib/Tactic/Rify.lean
tactic  norm_num           terms  Mathlib/Tactic/NormNum/Core.lean
tactic  norm_num1          terms  Mathlib/Tactic/NormNum/Core.lean
tactic  ring               terms  Mathlib/Tactic/Ring/RingNF.lean
tactic  ring1              terms  Mathlib/Tactic/Ring/Basic.lean
tactic  ring_nf            terms  Mathlib/Tactic/Ring/RingNF.lean
tactic  ring!              terms  Mathlib/Tactic/Ring/RingNF.lean
tactic  ring_nf!           terms  Mathlib/Tactic/Ring/RingNF.lean
tactic  noncomm_ring       terms  Mathlib/Tactic/NoncommRing.lean
tactic  field_simp         terms  Mathlib/Tactic/FieldSimp.lean        disch
tactic  cancel_denoms      terms  Mathlib/Tactic/CancelDenoms/Core.lean
tactic  abel               terms  Mathlib/Tactic/Abel.lean
tactic  abel_nf            terms  Mathlib/Tactic/Abel.lean
tactic  abel!              terms  Mathlib/Tactic/Abel.lean
tactic  group              terms  Mathlib/Tactic/Group.lean
tactic  linarith           terms  {_LIN}
tactic  linarith!          terms  {_LIN}
tactic  nlinarith          terms  {_LIN}
tactic  nlinarith!         terms  {_LIN}
tactic  linear_combination terms  Mathlib/Tactic/LinearCombination.lean norm
tactic  linear_combination' terms Mathlib/Tactic/LinearCombination'.lean norm
tactic  linear_combination2 terms Mathlib/Tactic/LinearCombination'.lean norm
tactic  positivity         terms  Mathlib/Tactic/Positivity/Core.lean
tactic  bound              terms  Mathlib/Tactic/Bound.lean
tactic  gcongr             terms  Mathlib/Tactic/GCongr/Core.lean     discharger
tactic  rel                terms  Mathlib/Tactic/GCongr/Core.lean
tactic  compute_degree     terms  Mathlib/Tactic/ComputeDegree.lean
tactic  monicity           terms  Mathlib/Tactic/ComputeDegree.lean
tactic  aesop              terms  Aesop/Frontend/Tactic.lean           *
tactic  aesop?             terms  Aesop/Frontend/Tactic.lean           *
tactic  exact?             terms  {_CORE}
tactic  apply?             terms  {_CORE}
tactic  apply_rules        terms  {_CORE}
tactic  solve_by_elim      terms  {_CORE}
tactic  apply_assumption   terms  {_CORE}
tactic  infer_instance     terms  {_CORE}
tactic  ext                terms  src/Init/Ext.lean
tactic  ext1               terms  src/Init/Ext.lean
tactic  funext             terms  {_CORE}
tactic  congr              terms  {_CORE}
tactic  congr!             terms  Mathlib/Tactic/CongrExclamation.lean
tactic  convert            terms  Mathlib/Tactic/Convert.lean
tactic  convert_to         terms  Mathlib/Tactic/Convert.lean
tactic  apply_fun          terms  Mathlib/Tactic/ApplyFun.lean
tactic  symm               terms  {_CORE}
tactic  trans              terms  Batteries/Tactic/Trans.lean
tactic  subst_eqs          terms  {_CORE}
tactic  wlog               terms  Mathlib/Tactic/WLOG.lean
tactic  filter_upwards     terms  Mathlib/Order/Filter/Defs.lean
tactic  fun_prop           terms  Mathlib/Tactic/FunProp/Elab.lean     disch
tactic  continuity         terms  Mathlib/Tactic/Continuity.lean
tactic  measurability      terms  Mathlib/Tactic/Measurability.lean
tactic  peel               terms  Mathlib/Tactic/Peel.lean
tactic  tfae_have          terms  Mathlib/Tactic/TFAE.lean
tactic  tfae_finish        terms  Mathlib/Tactic/TFAE.lean
tactic  refine_lift        terms  {_CORE}
tactic  exists_intro       terms  {_CORE}
tactic  swap               terms  Batteries/Tactic/PermuteGoals.lean
tactic  pick_goal          terms  Batteries/Tactic/PermuteGoals.lean
tactic  rotate_left        terms  {_CORE}
tactic  rotate_right       terms  {_CORE}
tactic  done               terms  {_CORE}
tactic  skip               terms  {_CORE}
tactic  fail               terms  {_CORE}
tactic  stop               terms  {_CORE}
tactic  trace_state        terms  {_CORE}
tactic  try                seq    {_CORE}
tactic  repeat             seq    {_CORE}
tactic  repeat'            seq    {_CORE}
tactic  repeat1            seq    {_CORE}
tactic  iterate            seq    {_CORE}
tactic  all_goals          seq    {_CORE}
tactic  any_goals          seq    {_CORE}
tactic  focus              seq    {_CORE}
tactic  classical          seq    {_CORE}
tactic  with_reducible     seq    {_CORE}
tactic  fail_if_success    seq    {_CORE}
tactic  first              first  {_CORE}
tactic  solve              first  {_CORE}
tactic  unhygienic         seq    {_CORE}
tactic  case               arrow  {_CORE}
tactic  case'              arrow  {_CORE}
tactic  next               arrow  {_CORE}
tactic  on_goal            arrow  Batteries/Tactic/PermuteGoals.lean
tactic  if                 if     {_CORE}
tactic  set_option         in     src/Lean/Parser/Command.lean
tactic  open               in     src/Lean/Parser/Command.lean
tactic  conv               conv   {_CONV}
tactic  conv_lhs           conv   Mathlib/Tactic/Conv.lean
tactic  conv_rhs           conv   Mathlib/Tactic/Conv.lean
conv    lhs                terms  {_CONV}
conv    rhs                terms  {_CONV}
conv    fun                terms  {_CONV}
conv    arg                terms  {_CONV}
conv    enter              terms  {_CONV}
conv    ext                terms  {_CONV}
conv    intro              terms  {_CONV}
conv    congr              terms  {_CONV}
conv    skip               terms  {_CONV}
conv    done               terms  {_CONV}
conv    rfl                terms  {_CONV}
conv    rw                 terms  {_CONV}
conv    rewrite            terms  {_CONV}
conv    erw                terms  {_CONV}
conv    simp               terms  {_CONV}                             disch
conv    dsimp              terms  {_CONV}
conv    simp_match         terms  {_CONV}
conv    change             terms  {_CONV}
conv    unfold             terms  {_CONV}
conv    delta              terms  {_CONV}
conv    pattern            terms  {_CONV}
conv    zeta               terms  {_CONV}
conv    reduce             terms  {_CONV}
conv    whnf               terms  {_CONV}
conv    norm_cast          terms  {_CONV}
conv    push_cast          terms  {_CONV}
conv    norm_num           terms  Mathlib/Tactic/NormNum/Core.lean
conv    norm_num1          terms  Mathlib/Tactic/NormNum/Core.lean
conv    ring_nf            terms  Mathlib/Tactic/Ring/RingNF.lean
conv    abel_nf            terms  Mathlib/Tactic/Abel.lean
conv    apply_congr        terms  Mathlib/Tactic/ApplyCongr.lean
conv    equals             arrow  Batteries/Tactic/Init.lean
conv    try                seq    {_CONV}
conv    repeat             seq    {_CONV}
conv    all_goals          seq    {_CONV}
conv    any_goals          seq    {_CONV}
conv    first              first  {_CONV}
conv    case               arrow  {_CONV}
conv    next               arrow  {_CONV}
conv    tactic             arrow  {_CONV}
conv    conv               conv   {_CONV}
"""


def _parse(table: str) -> dict[tuple[str, str], Tactic]:
    entries: dict[tuple[str, str], Tactic] = {}
    for lineno, line in enumerate(table.strip().splitlines(), 1):
        cells = line.split()
        assert 4 <= len(cells) <= 5, f"tactics.py table line {lineno}: {line!r}"
        mode, name, shape, source = cells[:4]
        options = tuple(cells[4].split(",")) if len(cells) == 5 else ()
        assert mode in MODES and shape in SHAPES, f"tactics.py table line {lineno}: {line!r}"
        assert (mode, name) not in entries, f"tactics.py table: {mode} {name} twice"
        anywhere = ANYWHERE in options
        entries[(mode, name)] = Tactic(mode, name, shape, source, tuple(o for o in options if o != ANYWHERE),
                                       anywhere)
    return entries


TABLE: dict[tuple[str, str], Tactic] = _parse(_TABLE)


def lookup(name: str, mode: str = "tactic") -> Tactic | None:
    """The allowed tactic `name` of `mode` ("tactic" or "conv"), None if it is not on the table."""
    return TABLE.get((mode, name))
