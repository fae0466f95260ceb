"""The differential fuzzer's op families (``minixla/fuzz/families.py``: linear algebra,
``random`` with keys from drawn seeds or program data, sorting and the cumulative reductions)
in every mode: forward (``minixla.jit`` on both backends), ``grad``/``vjp``, ``jvp``, ``vmap``,
and the program written with ``jax.numpy``/``jax.random``/``jax.lax.linalg`` imported through the
JAX front end -- against JAX eager under the fuzzer's contract (exact values bit for bit, the
linear-algebra results within their condition-number tolerance).

Each program here draws a family op at every step (``FAMILY_ODDS = 1``) and stays short: the
linear-algebra kernels compile slowly. ``MINIXLA_FUZZ_FAMILY_EXAMPLES`` sets the programs per
mode (default 1 in CI; the same every run unless ``MINIXLA_FUZZ_RANDOM=1``); the deep run is
``python -m minixla.fuzz --mode forward|grad|jvp|vmap`` (families on by default). Every mismatch
a run found is pinned in ``test_family_regressions`` against JAX's value.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import minixla
from minixla.fuzz import programs as P
from minixla.fuzz.families import FAMILIES
from minixla.fuzz.transforms import GRAD_DTYPES, SPECIAL_RATE, fuzz_transform

DERANDOMIZE = not os.environ.get("MINIXLA_FUZZ_RANDOM")
#: (hypothesis runs its all-zero, simplest, example first: a scalar and one op, mostly skipped)
N = int(os.environ.get("MINIXLA_FUZZ_FAMILY_EXAMPLES", "2"))
MAX_OPS = 3
LOG = os.environ.get("MINIXLA_FUZZ_LOG")
#: matrices and stacks of them, so that most drawn ops are linear algebra
MATRICES = st.sampled_from([(2, 2), (3, 3), (1, 1), (2, 3), (3, 2), (2, 2, 2), (0, 2, 2), (4,), (3, 0)])


@pytest.fixture(autouse=True)
def families(monkeypatch):
    monkeypatch.setattr(P, "FAMILIES", FAMILIES)
    monkeypatch.setattr(P, "FAMILY_ODDS", 1)


def _fuzz(n):
    return settings(max_examples=n, deadline=None, derandomize=DERANDOMIZE, print_blob=True,
                    suppress_health_check=list(HealthCheck))


def _outputs(data, inputs, vals):
    n = len(vals)
    return sorted({n - 1} | set(data.draw(st.lists(st.integers(len(inputs), n - 1), max_size=1))))


@_fuzz(N)
@given(P.programs(max_ops=MAX_OPS, shape_strategy=MATRICES), st.data())
def test_family_programs_forward_and_through_the_jax_front_end(prog, data):
    inputs, n_ops, _ = prog
    program, vals = P.build(data.draw, inputs, n_ops)
    if not program:
        return
    outputs = _outputs(data, inputs, vals)
    note = P.describe(inputs, program, outputs)
    try:
        P.run_program(inputs, program, outputs, vals)
        for backend in ("llvm", "jax"):  # the same program as a JAX program, imported
            got = minixla.jit(lambda *xs: P.interpret(jnp, jax.lax, program, xs, outputs), frontend="jax",
                              backend=backend)(*inputs)
            for j, (g, o) in enumerate(zip(got, outputs)):
                P.compare_value(f"[{backend}, frontend=jax] output {j} (value {o})", g, vals[o].ref, vals[o],
                                backend)
    except Exception as e:
        raise AssertionError(f"{note}\n{type(e).__name__}: {e}") from e


@pytest.mark.parametrize("mode", ["grad", "jvp", "vmap"])
def test_family_programs_transformed(mode):
    strategy = (P.programs(dtypes=GRAD_DTYPES, max_ops=MAX_OPS, special_rate=SPECIAL_RATE,
                           shape_strategy=MATRICES) if mode != "vmap"
                else P.programs(max_ops=MAX_OPS, shape_strategy=MATRICES))

    @_fuzz(N)
    @given(strategy, st.data())
    def run(prog, data):
        print(fuzz_transform(mode, prog, data, LOG))
    run()
