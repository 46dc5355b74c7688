"""Checking proofs: static checks, the Lean REPL pool and verdict rules, the SIMULATED stand-in."""
