"""The read side: what status, plan, report, logs and the other read commands compute from a run."""
