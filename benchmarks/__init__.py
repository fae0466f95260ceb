"""minixla's benchmark suite: numpy (eager), ``minixla.jit`` and ``jax.jit`` side by side, with this
machine's limits measured in the same run. Run ``python -m benchmarks`` (see ``benchmarks/run.py``)."""
