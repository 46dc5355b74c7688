"""The phases of a round, one module each, plus the task context they share."""
