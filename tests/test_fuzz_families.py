"""The differential fuzzer's op families (``minixla/fuzz/families.py``: linear algebra,
``random`` with keys from drawn seeds or program data, sorting and the cumulative reductions,
windows: ``reduce_window`` pooling and ``conv_transpose``)
in every mode: forward (``minixla.jit`` on both backends), ``grad``/``vjp``, ``jvp``, ``vmap``,
and the program written with ``jax.numpy``/``jax.random``/``jax.lax.linalg`` imported through the
JAX front end -- against JAX eager under the fuzzer's contract (exact values bit for bit, the
linear-algebra results within their condition-number tolerance).

Each program here draws a family op at every step (``FAMILY_ODDS = 1``, and in place of the
transformation modes' own draw) and stays short: the
linear-algebra kernels compile slowly. ``MINIXLA_FUZZ_FAMILY_EXAMPLES`` sets the programs per
mode (default 2, the first hypothesis's simplest; the same every run unless
``MINIXLA_FUZZ_RANDOM=1``); CI runs forward, the front end and vmap, ``MINIXLA_DEEP_FUZZ=1``
adds grad/vjp and jvp; the deep run is
``python -m minixla.fuzz --mode forward|frontend|grad|jvp|vmap`` (families on by default). Every mismatch
a run finds is to be pinned next to the rule it broke, against JAX's value.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import minixla
from minixla.fuzz import programs as P
from minixla.fuzz import transforms as TR
from minixla.fuzz.families import FAMILIES, draw_family_op
from minixla.fuzz.transforms import GRAD_DTYPES, SPECIAL_RATE, fuzz_transform

DERANDOMIZE = not os.environ.get("MINIXLA_FUZZ_RANDOM")
#: (hypothesis runs its all-zero, simplest, example first: a scalar and one op, mostly skipped)
N = int(os.environ.get("MINIXLA_FUZZ_FAMILY_EXAMPLES", "2"))
MAX_OPS = 2
LOG = os.environ.get("MINIXLA_FUZZ_LOG")
#: matrices and stacks of them, so that most drawn ops are linear algebra
MATRICES = st.sampled_from([(2, 2), (3, 3), (1, 1), (2, 3), (3, 2), (2, 2, 2), (0, 2, 2), (4,), (3, 0)])


def _draw_family_op(draw, vals):
    return draw_family_op(draw, vals, FAMILIES)


@pytest.fixture(autouse=True)
def families(monkeypatch):
    # every op a family op, in the transformation modes too (their own op draw is replaced)
    monkeypatch.setattr(P, "FAMILIES", FAMILIES)
    monkeypatch.setattr(P, "FAMILY_ODDS", 1)
    monkeypatch.setattr(TR, "draw_transform_op", _draw_family_op)


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
        for backend in ("llvm",):  # the same program as a JAX program, imported (the hand-off: deep runs)
            got = minixla.jit(lambda *xs: P.interpret(jnp, jax.lax, program, xs, outputs), frontend="jax",
                              backend=backend)(*inputs)
            for j, (g, o) in enumerate(zip(got, outputs)):
                P.compare_value(f"[{backend}, frontend=jax] output {j} (value {o})", g, vals[o].ref, vals[o],
                                backend)
    except Exception as e:
        raise AssertionError(f"{note}\n{type(e).__name__}: {e}") from e


#: the suite's budget: CI runs forward (+ the front end) and vmap; grad and jvp (each compiles a
#: program about twice as long, ~5 s of CPU here) with MINIXLA_DEEP_FUZZ=1 or a count set
DEEP = bool(os.environ.get("MINIXLA_DEEP_FUZZ") or os.environ.get("MINIXLA_FUZZ_FAMILY_EXAMPLES"))


@pytest.mark.parametrize("mode", ["vmap"] + [pytest.param(m, marks=pytest.mark.skipif(
    not DEEP, reason="MINIXLA_DEEP_FUZZ=1 runs the family programs under grad and jvp")) for m in ("grad", "jvp")])
def test_family_programs_transformed(mode):
    strategy = (P.programs(dtypes=GRAD_DTYPES, max_ops=MAX_OPS, special_rate=SPECIAL_RATE,
                           shape_strategy=MATRICES) if mode != "vmap"
                else P.programs(max_ops=MAX_OPS, shape_strategy=MATRICES))

    @_fuzz(N)
    @given(strategy, st.data())
    def run(prog, data):
        fuzz_transform(mode, prog, data, LOG)
    run()


#: small operands of rank 1-3 (size-1 dims too) for the windows family
WINDOW_SHAPES = st.sampled_from([(5,), (1, 3), (2, 3, 1), (1, 4, 2), (3, 1, 3)])
WINDOW_DTYPES = [np.dtype(d) for d in (np.float32, np.float32, np.float16, np.int32)] + [P.BF16]


def _draw_window_op(draw, vals):
    return draw_family_op(draw, vals, ("windows",))


@pytest.mark.parametrize("mode", ["forward", "vmap"])
def test_window_programs(mode, monkeypatch):
    """A handful of ``windows`` programs (``reduce_window`` pooling, ``conv_transpose``) forward
    on both backends and under ``vmap``."""
    monkeypatch.setattr(P, "FAMILIES", ("windows",))
    monkeypatch.setattr(TR, "draw_transform_op", _draw_window_op)
    strategy = P.programs(dtypes=WINDOW_DTYPES, max_ops=MAX_OPS, shape_strategy=WINDOW_SHAPES)

    @_fuzz(max(N, 3))
    @given(strategy, st.data())
    def run(prog, data):
        if mode == "vmap":
            fuzz_transform(mode, prog, data, LOG)
            return
        inputs, n_ops, _ = prog
        program, vals = P.build(data.draw, inputs, n_ops)
        if program:
            outputs = _outputs(data, inputs, vals)
            try:
                P.run_program(inputs, program, outputs, vals)
            except Exception as e:
                raise AssertionError(f"{P.describe(inputs, program, outputs)}\n{type(e).__name__}: {e}") from e
    run()
