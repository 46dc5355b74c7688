"""The tiny-random model built offline, and its format warm-up (CPU runs and tests)."""
