/-
`sgs_kernel_check`: the trusted re-check of sgsbatch's verifier (sgsbatch/verification/recheck.py).

The REPL that elaborates a model-written proof may have run the proof's code (Lean runs code at
elaboration time), so its replies are untrusted: a kernel-skipping option, a forged reply or a
spoofed `#print axioms` can make a false theorem look verified. For every proof the REPL calls
verified, the REPL pickles the proof's environment (`pickleTo`) and this program, which never
elaborates a proof, gives the final verdict:

1. elaborates the header and the statement on their own (`header` + `statement sorry`; cached per
   header, so `import Mathlib` is done once per process) to get the reference type and the
   reference environment (with the statement's own auxiliary constants: matchers of
   `fun (a, b) => ...`, `{(a, b) : ℕ × ℕ | ...}`, a data-valued `match`). The statement arrives
   without its final `by` (the client cuts it), and a statement whose syntax holds a tactic block
   or a `do` block is refused before it is elaborated (`statement_code`): no model-written tactic
   (and so no tactic configuration, which Lean evaluates) runs in this process (issue 26, class 5);
2. reads the pickle (imports + the constants added after them) and refuses it when its imports
   differ from the header's; `unsafe` and `partial` constants are skipped, as
   `Lean.Environment.replay` skips them ("We skip unsafe constants, and also partial constants",
   src/Lean/Replay.lean): the code generator adds `..._cstage1`/`_cstage2` unsafe artefacts for
   every data-valued match (issue 26, 7a); one the theorem reaches is refused (`unsafe_constant`);
3. replays every other added constant through the kernel (`replayWith`: `Lean.Environment.replay`
   of v4.15.0 with options instead of `{}`, so the kernel gets the `maxHeartbeats` the REPL's
   `addDecl` had, 0 = unlimited: the request's, which is the statement's own `set_option
   maxHeartbeats N in` or else the header's, or when the request has none the header's; issue 26,
   7d and issue 38, class 6), starting from the
   header's imports: a declaration the kernel rejects (for instance one added under
   `debug.skipKernelTC`) fails the proof;
4. checks that the theorem exists under its full name (the client resolves a header's
   `namespace`), is a theorem, has exactly the reference's type and universe parameters, and that
   every added constant its type reaches is the reference's constant with the same kind, type and
   value (`sameMeanings`): a pickle that redefines the statement's own matcher is refused
   (`meaning_changed`; issue 26, class 4);
5. refuses a proof whose added constants mention a constant of the IO world or of the elaborator
   by its resolved name (`forbiddenRoots`; issue 26, class 2: names a filter of tokens cannot see,
   such as `.FS.writeFile` resolved against an expected `IO _` or generalized field notation);
6. lists its axioms (`CollectAxioms`) and accepts only `propext`, `Classical.choice`, `Quot.sound`.

Protocol (the REPL's, so the Python client is shared): one JSON request per block, blocks ended
by a blank line, on stdin: `{"id", "header", "statement", "name", "pickle", "maxHeartbeats"}`
(`maxHeartbeats`: a number or null); one JSON reply per
request on stdout, followed by a blank line: `{"id", "ok", "reason", "axioms", "detail"}`. The
`id` is a nonce chosen by the client and echoed, so a reply answers its request.

Not covered: the statement's terms are still elaborated here (dataset text, or a conjecture that
passed sgsbatch's static statement checks, which refuse tactic blocks, evaluating elaborators and
IO names); a crafted pickle could in principle exploit a bug in the `.olean` reader (the checker
runs in the same sandbox as the REPL); memory of the pickles read is not freed (the pool restarts
the checker with its REPL, every `max_proofs_per_process` proofs).

Written against the Lean v4.15.0 API (src/Lean/Replay.lean, src/Lean/Environment.lean,
src/Lean/Util/CollectAxioms.lean) but never compiled on the machines this project is developed on
(no Lean there): tests/lean/test_lean_real.py compiles and runs it wherever `lake` is installed.
-/
import Lean
import Lean.Replay
import Lean.Util.CollectAxioms

open Lean Elab

namespace SgsKernelCheck

/-- The axioms a verified proof may depend on (sgsbatch/verification/rules.py ALLOWED_AXIOMS). -/
def allowedAxioms : List Name := [``propext, ``Classical.choice, ``Quot.sound]

/-- Name prefixes a proof's constants may not mention, judged on resolved names (issue 26, class 2;
issue 38, class 2). tests/lean/fake_checker.py reads this list from here, so the stand-in applies
the same rule. What a root stands for:
* the outside world and its monads: `IO` (`IO.FS`, `IO.Process`, `IO.asTask`, `IO.RealWorld`),
  `EIO`, `BaseIO`, `EStateM`, `ST`, `EST`, `StateRefT'`, `System` (`System.FilePath.readDir`,
  `.pathExists`, `System.Platform`), the escapes `unsafeBaseIO`/`unsafeIO`/`unsafeEIO`, and the
  async I/O of `Std.Internal.IO`/`Std.Internal.UV`. An IO action a proof term carries also has
  its monad in its type, and a `have`'s binder type is in the term: the monad roots catch
  actions whose own name is under no root;
* threads and time: `Task` (`Task.spawn`: a proof has no business starting threads, and no honest
  proof term mentions a `Task`), `dbgSleep`, `timeit`, `allocprof`;
* the runtime's own view of the heap: `ptrAddrUnsafe`, `ptrEq`, `ptrEqList`, `withPtrAddr`,
  `withPtrAddrUnsafe`, `withPtrEq` (pointer addresses, not values), `dbgTrace`,
  `dbgTraceIfShared`, `dbgStackTrace`;
* the elaborator and the kernel (meta): `Lean.Elab`, `Lean.Meta`, `Lean.Core`, `Lean.Environment`,
  `Lean.Kernel`, `Lean.Compiler`, `Lean.IR`, `Lean.Parser`, `Lean.PrettyPrinter`, `Lean.Server`,
  `Lean.Language`, `Lean.evalConst`, `Lean.importModules`, `Lean.readModuleData`,
  `Lean.ofReduceBool`, `Lean.ofReduceNat`. Not the whole `Lean` root: honest proof terms hold
  `Lean.Omega` (omega), `Lean.Data.AC` (ac_rfl) and `Lean.Grind` lemmas.
Not forbidden: the `panic` family (`panic`, `panicWithPosWithDecl`, what `panic!` and `a[i]!`
expand to): its only effect is a message on the REPL's stderr, a file RLIMIT_FSIZE bounds, and an
honest term that unfolds `List.head!` or `Array.get!` carries it in a motive. -/
def forbiddenRoots : List Name :=
  [`IO, `EIO, `BaseIO, `EStateM, `ST, `EST, `StateRefT', `System, `IO.RealWorld, `unsafeBaseIO, `unsafeIO,
   `unsafeEIO, `Std.Internal.IO, `Std.Internal.UV, `Task, `dbgSleep, `timeit, `allocprof, `ptrAddrUnsafe,
   `ptrEq, `ptrEqList, `withPtrAddr, `withPtrAddrUnsafe, `withPtrEq, `dbgTrace, `dbgTraceIfShared,
   `dbgStackTrace, `Lean.Elab, `Lean.Meta, `Lean.Core, `Lean.Environment, `Lean.Kernel, `Lean.Compiler,
   `Lean.IR, `Lean.Parser, `Lean.PrettyPrinter, `Lean.Server, `Lean.Language, `Lean.evalConst,
   `Lean.importModules, `Lean.readModuleData, `Lean.ofReduceBool, `Lean.ofReduceNat]

def forbidden (n : Name) : Bool :=
  forbiddenRoots.any (·.isPrefixOf n)

structure Request where
  id : String
  header : String
  statement : String
  name : String
  pickle : String
  /-- The `maxHeartbeats` the REPL's `addDecl` had for the declaration: the statement's own
  `set_option maxHeartbeats N in`, else the header's, or a proof's own larger one
  (recheck.kernel_heartbeats); `null`: the header's options decide (issue 38, class 6). -/
  maxHeartbeats : Option Nat := none
  deriving FromJson

structure Reply where
  id : String
  ok : Bool
  reason : String
  axioms : Array String := #[]
  detail : String := ""
  deriving ToJson

/-- A header elaborated once: the environment right after its imports, and the command state
after its other lines (`open ...`), in which statements are elaborated. -/
structure HeaderState where
  imported : Environment
  commands : Command.State

/-- Lines up to a blank line (none at the end of input). -/
partial def readBlock (stdin : IO.FS.Stream) (acc : String := "") : IO (Option String) := do
  let line ← stdin.getLine
  if line.isEmpty then
    return if acc.trim.isEmpty then none else some acc
  if line.trim.isEmpty then
    if acc.trim.isEmpty then readBlock stdin acc else return some acc
  readBlock stdin (acc ++ line)

def errorsOf (log : MessageLog) : IO String := do
  let mut out := ""
  for m in log.toList do
    if m.severity == .error then
      out := out ++ (← m.toString) ++ "\n"
  return out.take 2000

/-- Elaborate a header: imports, then its other commands. -/
def elabHeader (header : String) : IO (Except String HeaderState) := do
  let inputCtx := Parser.mkInputContext header "<header>"
  let (stx, parserState, messages) ← Parser.parseHeader inputCtx
  let (env, messages) ← processHeader stx {} messages inputCtx
  if messages.hasErrors then
    return .error s!"the header does not elaborate: {← errorsOf messages}"
  let s ← IO.processCommands inputCtx parserState (Command.mkState env messages {})
  if s.commandState.messages.hasErrors then
    return .error s!"the header does not elaborate: {← errorsOf s.commandState.messages}"
  return .ok { imported := env, commands := { s.commandState with messages := {} } }

/-- A tactic block or `do` block in the statement's syntax (issue 26, class 5), found before anything
of it is elaborated. A statement Lean cannot parse here is left to the elaboration, which fails. -/
def codeInStatement (hs : HeaderState) (text : String) : Option String :=
  match Parser.runParserCategory hs.commands.env `command text (fileName := "<statement>") with
  | .error _ => none
  | .ok stx =>
    let code := stx.find? fun s => s.getKind == ``Lean.Parser.Term.byTactic || s.getKind == `Lean.Parser.Term.«do»
    code.map fun s => s!"the statement holds code ({s.getKind}); a statement has no tactic or do block"

/-- The reference: the statement (sent without its final `by`) elaborated on its own with `sorry`
after the header: the theorem and the environment holding the statement's auxiliary constants. -/
def elabReference (hs : HeaderState) (statement : String) (name : Name) :
    IO (Except String (TheoremVal × Environment)) := do
  let text := statement ++ " sorry"
  let inputCtx := Parser.mkInputContext text "<statement>"
  let s ← IO.processCommands inputCtx { : Parser.ModuleParserState } hs.commands
  if s.commandState.messages.hasErrors then
    return .error s!"the statement does not elaborate: {← errorsOf s.commandState.messages}"
  match s.commandState.env.find? name with
  | some (.thmInfo v) => return .ok (v, s.commandState.env)
  | _ => return .error s!"the statement does not declare a theorem named {name}"

/-- The header's options (`maxHeartbeats 0` in every D_3k header), for the kernel's budget. -/
def headerOptions (hs : HeaderState) : Options :=
  let opts := match hs.commands.scopes with
    | scope :: _ => scope.opts
    | [] => {}
  ({} : Options).setNat `maxHeartbeats (maxHeartbeats.get opts)

/-- The kernel's options for the replay: the request's `maxHeartbeats` (the budget the REPL's
`addDecl` had, statement options included; issue 38, class 6), else the header's. -/
def kernelOptions (hs : HeaderState) (requested : Option Nat) : Options :=
  match requested with
  | some n => ({} : Options).setNat `maxHeartbeats n
  | none => headerOptions hs

namespace Replay
/-! `Lean.Environment.replay` of Lean v4.15.0 (src/Lean/Replay.lean), copied with one change: the
kernel gets `opts` (`kernelOptions`: the REPL's `maxHeartbeats`) where the original passes `{}` (issue 26, 7d; issue 38, class 6). -/

structure Context where
  newConstants : Std.HashMap Name ConstantInfo
  opts : Options

structure State where
  env : Environment
  remaining : NameSet := {}
  pending : NameSet := {}
  postponedConstructors : NameSet := {}
  postponedRecursors : NameSet := {}

abbrev M := ReaderT Context <| StateRefT State IO

def isTodo (name : Name) : M Bool := do
  let r := (← get).remaining
  if r.contains name then
    modify fun s => { s with remaining := s.remaining.erase name, pending := s.pending.insert name }
    return true
  else
    return false

def throwKernelException (ex : KernelException) : M Unit := do
  throw <| .userError <| (← ex.toMessageData {} |>.toString)

def addDecl (d : Declaration) : M Unit := do
  match (← get).env.addDecl (← read).opts d with
  | .ok env => modify fun s => { s with env := env }
  | .error ex => throwKernelException ex

mutual
partial def replayConstant (name : Name) : M Unit := do
  if ← isTodo name then
    let some ci := (← read).newConstants[name]? | unreachable!
    replayConstants ci.getUsedConstantsAsSet
    if (← get).pending.contains name then
      match ci with
      | .defnInfo   info => addDecl (Declaration.defnDecl   info)
      | .thmInfo    info => addDecl (Declaration.thmDecl    info)
      | .axiomInfo  info => addDecl (Declaration.axiomDecl  info)
      | .opaqueInfo info => addDecl (Declaration.opaqueDecl info)
      | .inductInfo info =>
        let lparams := info.levelParams
        let nparams := info.numParams
        let all ← info.all.mapM fun n => do pure <| ((← read).newConstants[n]!)
        for o in all do
          modify fun s => { s with remaining := s.remaining.erase o.name, pending := s.pending.erase o.name }
        let ctorInfo ← all.mapM fun ci => do
          pure (ci, ← ci.inductiveVal!.ctors.mapM fun n => do pure ((← read).newConstants[n]!))
        for (_, ctors) in ctorInfo do
          for ctor in ctors do
            replayConstants ctor.getUsedConstantsAsSet
        let types : List InductiveType := ctorInfo.map fun ⟨ci, ctors⟩ =>
          { name := ci.name, type := ci.type, ctors := ctors.map fun ci => { name := ci.name, type := ci.type } }
        addDecl (Declaration.inductDecl lparams nparams types false)
      | .ctorInfo info =>
        modify fun s => { s with postponedConstructors := s.postponedConstructors.insert info.name }
      | .recInfo info =>
        modify fun s => { s with postponedRecursors := s.postponedRecursors.insert info.name }
      | .quotInfo _ => addDecl (Declaration.quotDecl)
      modify fun s => { s with pending := s.pending.erase name }

partial def replayConstants (names : NameSet) : M Unit := do
  for n in names do replayConstant n
end

def checkPostponed : M Unit := do
  for ctor in (← get).postponedConstructors do
    match (← get).env.find? ctor, (← read).newConstants[ctor]? with
    | some (.ctorInfo info), some (.ctorInfo info') =>
      if ! (info == info') then throw <| IO.userError s!"Invalid constructor {ctor}"
    | _, _ => throw <| IO.userError s!"No such constructor {ctor}"
  for recursor in (← get).postponedRecursors do
    match (← get).env.find? recursor, (← read).newConstants[recursor]? with
    | some (.recInfo info), some (.recInfo info') =>
      if ! (info == info') then throw <| IO.userError s!"Invalid recursor {recursor}"
    | _, _ => throw <| IO.userError s!"No such recursor {recursor}"

end Replay

/-- Replay `newConstants` (none unsafe or partial: the caller leaves them out) into `env`. -/
def replayWith (opts : Options) (newConstants : Std.HashMap Name ConstantInfo) (env : Environment) :
    IO Environment := do
  let mut remaining : NameSet := {}
  for (n, _) in newConstants.toList do
    remaining := remaining.insert n
  let (_, s) ← StateRefT'.run (s := ({ env, remaining } : Replay.State)) do
    ReaderT.run (r := ({ newConstants, opts } : Replay.Context)) do
      for n in remaining do
        Replay.replayConstant n
      Replay.checkPostponed
  return s.env

def kindOf : ConstantInfo → String
  | .axiomInfo _ => "axiom" | .defnInfo _ => "def" | .thmInfo _ => "theorem" | .opaqueInfo _ => "opaque"
  | .quotInfo _ => "quot" | .inductInfo _ => "inductive" | .ctorInfo _ => "constructor" | .recInfo _ => "recursor"

def valueOf : ConstantInfo → Option Expr
  | .defnInfo v => some v.value
  | .thmInfo v => some v.value
  | .opaqueInfo v => some v.value
  | _ => none

/-- The added constants reachable from `start` through the types and values of added constants. -/
partial def reachable (added : Std.HashMap Name ConstantInfo) (todo : List Name) (seen : NameSet := {}) :
    NameSet :=
  match todo with
  | [] => seen
  | n :: rest =>
    if seen.contains n then reachable added rest seen
    else match added[n]? with
      | none => reachable added rest seen
      | some ci => reachable added (ci.getUsedConstantsAsSet.toList ++ rest) (seen.insert n)

/-- Every added constant the theorem's type reaches is the reference's own, with the same meaning
(issue 26, class 4): the statement's matchers and `let rec`/`where` helpers cannot be redefined. -/
def sameMeanings (added : Std.HashMap Name ConstantInfo) (reference : Environment) (type : Expr) :
    Except String Unit := do
  for n in (reachable added type.getUsedConstants.toList).toList do
    let some ci := added[n]? | continue
    match reference.find? n with
    | none => throw s!"the theorem's type mentions {n}, which the statement alone does not declare"
    | some r =>
      unless kindOf ci == kindOf r && ci.levelParams == r.levelParams && ci.type == r.type
          && valueOf ci == valueOf r do
        throw s!"{n} does not mean what it means in the statement elaborated on its own"

def parseName (text : String) : Name :=
  (Syntax.decodeNameLit ("`" ++ text)).getD text.toName

/-- A check that stops at the first failure: `throw (reason, detail)`. -/
abbrev CheckM := ExceptT (String × String) IO

def orFail (reason : String) (x : IO (Except String α)) : CheckM α := do
  match ← x with
  | .error e => throw (reason, e)
  | .ok v => pure v

unsafe def check (cache : IO.Ref (Std.HashMap String HeaderState)) (req : Request) :
    CheckM (Array String) := do
  let name := parseName req.name
  let hs ← match (← cache.get).get? req.header with
    | some hs => pure hs
    | none => orFail "header_error" (elabHeader req.header)
  cache.modify (·.insert req.header hs)
  if let some why := codeInStatement hs (req.statement ++ " sorry") then
    throw ("statement_code", why)
  let (reference, refEnv) ← orFail "reference_error" (elabReference hs req.statement name)
  let path : System.FilePath := ⟨req.pickle⟩
  unless (← path.pathExists) do
    throw ("no_pickle", s!"the pickled environment {req.pickle} does not exist")
  -- A command snapshot pickle (REPL v4.15.0 `pickleTo`): imports, the constants added after
  -- them, then the command state and context, which are never looked at here.
  let (data, _region) ← readModuleData path
  let (imports, added, _rest) : Array Import × PHashMap Name ConstantInfo × NonScalar :=
    unsafeCast data
  let wanted := hs.imported.header.imports.map (·.module)
  if imports.map (·.module) != wanted then
    throw ("imports_changed", s!"the proof's environment imports {imports.map (·.module)}, the header {wanted}")
  let mut all : Std.HashMap Name ConstantInfo := {}
  let mut constants : Std.HashMap Name ConstantInfo := {}
  for (n, ci) in added.toList do
    all := all.insert n ci
    -- compiler artefacts (`_cstage1`, `_cstage2`) are unsafe: skipped, as `Environment.replay` does
    if !ci.isUnsafe && !ci.isPartial then
      constants := constants.insert n ci
    for used in ci.getUsedConstantsAsSet.toList do
      if forbidden used && !ci.isUnsafe then
        throw ("forbidden_constant", s!"{n} mentions {used}, a name of the IO world or of the elaborator")
  let some thm := all[name]?
    | throw ("theorem_missing", s!"the proof's environment declares no constant {name}")
  for n in (reachable all (thm.getUsedConstantsAsSet.toList ++ [name])).toList do
    let some ci := all[n]? | continue
    if ci.isUnsafe then
      throw ("unsafe_constant", s!"{name} depends on the unsafe constant {n}")
    if ci.isPartial then
      throw ("partial_constant", s!"{name} depends on the partial constant {n}")
  let env ← match ← (replayWith (kernelOptions hs req.maxHeartbeats) constants hs.imported).toBaseIO with
    | .ok env => pure env
    | .error e => throw ("kernel_rejected", s!"the kernel rejects a declaration: {e}")
  let some ci := env.find? name
    | throw ("theorem_missing", s!"no constant {name} after the replay")
  let .thmInfo v := ci
    | throw ("not_a_theorem", s!"{name} is not a theorem")
  if v.type != reference.type || v.levelParams != reference.levelParams then
    throw ("statement_changed", s!"{name} does not have the type of the statement elaborated on its own")
  if let .error why := sameMeanings all refEnv v.type then
    throw ("meaning_changed", why)
  let ((), st) := ((CollectAxioms.collect name).run env).run {}
  let bad := st.axioms.filter (fun a => !allowedAxioms.contains a)
  if !bad.isEmpty then
    throw ("axioms", s!"{name} depends on {bad}; allowed: {allowedAxioms}")
  return st.axioms.map (·.toString)

unsafe def answer (cache : IO.Ref (Std.HashMap String HeaderState)) (req : Request) : IO Reply := do
  match ← (check cache req).run with
  | .ok axioms => pure { id := req.id, ok := true, reason := "", axioms }
  | .error (reason, detail) => pure { id := req.id, ok := false, reason, detail }

end SgsKernelCheck

open SgsKernelCheck in
unsafe def main (_ : List String) : IO UInt32 := do
  initSearchPath (← findSysroot)
  enableInitializersExecution
  let stdin ← IO.getStdin
  let stdout ← IO.getStdout
  let cache ← IO.mkRef ({} : Std.HashMap String HeaderState)
  repeat
    let some block ← readBlock stdin | break
    let reply ← match (Json.parse block >>= fromJson? : Except String Request) with
      | .error e => pure { id := "", ok := false, reason := "bad_request", detail := e : Reply }
      | .ok req =>
        try answer cache req
        catch e => pure { id := req.id, ok := false, reason := "checker_exception", detail := toString e }
    stdout.putStr ((toJson reply).compress ++ "\n\n")
    stdout.flush
  return 0
