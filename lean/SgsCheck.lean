import Mathlib
import Aesop

/-! Built by `lake build` so that every module a verified header imports is compiled. -/
