"""Tactic-level proof search: the solve phase when `solver.mode = "search"` (docs/search.md)."""
