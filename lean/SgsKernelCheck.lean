/-
`sgs_kernel_check`: the trusted re-check of sgsbatch's verifier (sgsbatch/verification/recheck.py).

The REPL that elaborates a model-written proof may have run the proof's code (Lean runs code at
elaboration time), so its replies are untrusted: a kernel-skipping option, a forged reply or a
spoofed `#print axioms` can make a false theorem look verified. For every proof the REPL calls
verified, the REPL pickles the proof's environment (`pickleTo`) and this program, which never
elaborates a proof, gives the final verdict:

1. elaborates the header and the statement on their own (`header` + `statement sorry`; cached per
   header, so `import Mathlib` is done once per process) to get the reference type;
2. reads the pickle (imports + the constants added after them) and refuses it when its imports
   differ from the header's, or when it holds an `unsafe` or `partial` constant;
3. replays every added constant through the kernel (`Lean.Environment.replay`, as lean4checker
   and SafeVerify do), starting from the header's imports: a declaration the kernel rejects
   (for instance one added under `debug.skipKernelTC`) fails the proof;
4. checks that the theorem exists under its name, is a theorem, and has exactly the reference's
   type and universe parameters;
5. lists its axioms (`CollectAxioms`) and accepts only `propext`, `Classical.choice`, `Quot.sound`.

Protocol (the REPL's, so the Python client is shared): one JSON request per block, blocks ended
by a blank line, on stdin: `{"id", "header", "statement", "name", "pickle"}`; one JSON reply per
request on stdout, followed by a blank line: `{"id", "ok", "reason", "axioms", "detail"}`. The
`id` is a nonce chosen by the client and echoed, so a reply answers its request.

Not covered: the statement text itself is elaborated here (dataset text, or a conjecture that
passed sgsbatch's static statement checks); a crafted pickle could in principle exploit a bug in
the `.olean` reader (the checker runs in the same sandbox as the REPL); memory of the pickles read
is not freed (the pool restarts the checker with its REPL, every `max_proofs_per_process` proofs).
-/
import Lean
import Lean.Replay
import Lean.Util.CollectAxioms

open Lean Elab

namespace SgsKernelCheck

/-- The axioms a verified proof may depend on (sgsbatch/verification/rules.py ALLOWED_AXIOMS). -/
def allowedAxioms : List Name := [``propext, ``Classical.choice, ``Quot.sound]

structure Request where
  id : String
  header : String
  statement : String
  name : String
  pickle : String
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

/-- The reference: the statement elaborated on its own (with `sorry`) after the header. -/
def elabReference (hs : HeaderState) (statement : String) (name : Name) :
    IO (Except String TheoremVal) := do
  let inputCtx := Parser.mkInputContext (statement ++ " sorry") "<statement>"
  let s ← IO.processCommands inputCtx { : Parser.ModuleParserState } hs.commands
  if s.commandState.messages.hasErrors then
    return .error s!"the statement does not elaborate: {← errorsOf s.commandState.messages}"
  match s.commandState.env.find? name with
  | some (.thmInfo v) => return .ok v
  | _ => return .error s!"the statement does not declare a theorem named {name}"

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
  let reference ← orFail "reference_error" (elabReference hs req.statement name)
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
  let mut constants : Std.HashMap Name ConstantInfo := {}
  for (n, ci) in added.toList do
    if ci.isUnsafe then
      throw ("unsafe_constant", s!"the proof's environment declares the unsafe constant {n}")
    if ci.isPartial then
      throw ("partial_constant", s!"the proof's environment declares the partial constant {n}")
    constants := constants.insert n ci
  let env ← match ← (hs.imported.replay constants).toBaseIO with
    | .ok env => pure env
    | .error e => throw ("kernel_rejected", s!"the kernel rejects a declaration: {e}")
  let some ci := env.find? name
    | throw ("theorem_missing", s!"no constant {name} after the replay")
  let .thmInfo v := ci
    | throw ("not_a_theorem", s!"{name} is not a theorem")
  if v.type != reference.type || v.levelParams != reference.levelParams then
    throw ("statement_changed", s!"{name} does not have the type of the statement elaborated on its own")
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
