"""The differential fuzzer (random programs against JAX eager): ``programs`` draws and runs
them, ``transforms`` takes their ``grad``/``vjp``, ``jvp`` and ``vmap``. A testing aid that
needs ``hypothesis``; nothing in the compiler imports it."""
