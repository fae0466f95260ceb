"""The differential fuzzer's random programs (``tests/test_fuzz.py``), written with ``jax.numpy``
and ``jax.lax`` instead of minixla's and compiled through the JAX front end
(``minixla.jit(f, frontend="jax")``) on both backends, against JAX eager under the fuzzer's
contract (exact values bit for bit, transcendental ones within a few ulp).

``MINIXLA_FUZZ_JAX_EXAMPLES`` sets the number of programs (default 6; the same programs every
run unless ``MINIXLA_FUZZ_RANDOM=1``, as the fuzzer)."""
import os

import jax
import jax.numpy as jnp
from hypothesis import HealthCheck, given, settings, strategies as st

import minixla
from minixla.fuzz.programs import interpret
import test_fuzz as fz  # (a module, so that its tests are not collected again here)

N_EXAMPLES = int(os.environ.get("MINIXLA_FUZZ_JAX_EXAMPLES", "6"))


@settings(max_examples=N_EXAMPLES, deadline=None, derandomize=fz.DERANDOMIZE, print_blob=True,
          suppress_health_check=list(HealthCheck))
@given(fz.programs(), st.data())
def test_random_jax_programs_through_the_jax_front_end(prog, data):
    inputs, n_ops, _ = prog
    program, vals = fz.build(data.draw, inputs, n_ops)
    if not program:
        return
    n = len(vals)
    outputs = sorted({n - 1} | set(data.draw(st.lists(st.integers(len(inputs), n - 1), max_size=2))))
    note = "\n".join(f"  v{len(inputs) + j} = {op}{tuple(ids)} {p}" for j, (op, ids, p) in enumerate(program))

    def f(*xs):
        return interpret(jnp, jax.lax, program, xs, outputs)  # a JAX program
    try:
        for backend in ("llvm", "jax"):
            got = minixla.jit(f, frontend="jax", backend=backend)(*inputs)
            for j, (g, o) in enumerate(zip(got, outputs)):
                fz.compare(f"[{backend}] output {j} (value {o})", g, vals[o].ref, vals[o].exact,
                           signed_zeros=backend == "llvm")
    except Exception as e:
        raise AssertionError(f"program over inputs {[(x.dtype.name, x.shape) for x in inputs]}:\n{note}\n"
                             f"outputs {outputs}\n{e}") from e
