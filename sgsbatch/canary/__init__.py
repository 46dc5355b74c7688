"""The site canary: before the GPU week, one short Slurm job per job shape runs each real component.

`sgsbatch canary CONFIG` (canary/submit.py) finds the config's distinct job shapes (shapes.py:
partition, account, QOS, GPUs, CPUs, memory, nodes), submits one job per shape with the phase's
own Slurm options, and in it runs the checks of the components those phases use (job.py):
generation (generation.py: each role's model on the configured engine, the run's real prompts,
start-up, tokens/s, memory, prompt + max_tokens against max_model_len), the Guide (its replies
through the real parser), verification (lean.py: the configured REPL, kernel checker and
sandbox on the built-in case set of cases.py), the search (search.py, `solver.mode = "search"`:
a known proof replayed tactic by tactic through the tactic environment, its tactic time), training (training.py: two optimizer steps, a stop
checkpoint timed against `slurm.train.signal_delay_s`, resumed at the same step) and the
environment (environment.py: versions against the lock, CUDA driver against the wheels). Every
check is a `Row` (rows.py) with the key or site setting to change when it fails; the result is
kept per config fingerprint and environment (record.py) and `launch` asks for it on Slurm for a
research config.

Not covered: what a few items cannot show (throughput at full batch, a node that fails later,
quota over weeks), and multi-node training beyond one rendezvous and two steps.
"""
