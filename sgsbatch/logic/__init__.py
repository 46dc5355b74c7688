"""The pure SGS logic: prompts, extraction, review parsing, selection, rewards, data, evaluation (no state)."""
