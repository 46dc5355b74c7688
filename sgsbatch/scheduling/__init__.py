"""Running shard tasks and chaining rounds: worker, supervisor, executors (Slurm, local), the chain."""
