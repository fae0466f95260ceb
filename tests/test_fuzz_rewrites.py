"""The differential fuzzer's rewrite mode (``minixla/fuzz/rewrites.py``): the compositions XLA's
whole-program optimizer rewrites (inverse pairs at overflow bounds, ``exp(a)*exp(b)`` near
overflow, integer squares near wraparound, update-slices that overlap their source, nested
slices with out-of-range starts) compiled by ``minixla.jit`` against JAX eager, as the
semantics contract says (bit for bit unless a transcendental fed the value, then within
``INEXACT_RTOL`` with NaN and ±inf in the same places). A few cases in CI (the same every run), many with
``MINIXLA_DEEP_FUZZ=1`` (``MINIXLA_FUZZ_REWRITE_EXAMPLES=N`` sets the count; with
``MINIXLA_FUZZ_RANDOM=1`` new ones each run). The random cases check the hand-off, the subject
here; ``MINIXLA_FUZZ_REWRITE_BACKENDS=jax,llvm`` adds the LLVM backend (held to the semantics
contract, within ``INEXACT_RTOL`` where a transcendental fed the value), which a deep run found
flushing subnormal *inputs* of ``log`` and ``pow`` that XLA's kernels read as they are.
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from minixla.backends import jax_xla
from minixla.fuzz.rewrites import Case, cases, run_case

DEEP = bool(os.environ.get("MINIXLA_DEEP_FUZZ"))
N = int(os.environ.get("MINIXLA_FUZZ_REWRITE_EXAMPLES", 2000 if DEEP else 12))
BACKENDS = tuple(os.environ.get("MINIXLA_FUZZ_REWRITE_BACKENDS", "jax").split(","))


@settings(max_examples=N, deadline=None, derandomize=not os.environ.get("MINIXLA_FUZZ_RANDOM"),
          print_blob=True, suppress_health_check=list(HealthCheck), database=None)
@given(cases())
def test_rewrite_compositions_match_eager(case):
    run_case(case, backends=BACKENDS)


def _case(kind, name, inputs, **params):
    return Case(kind, name, [np.asarray(x) for x in inputs], params)


F32_MAX = np.finfo(np.float32).max
REPORTED = [  # each public report the module docstring of minixla/backends/jax_xla.py names
    _case("inverse", "log(exp(x))", [np.float32([89.0, 88.0, -104.0])]),             # jax-ml/jax#38099
    _case("inverse", "sqrt(abs(x*x))", [np.float32([F32_MAX, 2e19, 3.0])]),          # jax-ml/jax#37919
    _case("exp_product", "exp(a)*exp(b)", [np.float32([100.0, 50.0]), np.float32([-100.0, 50.0])]),  # tf#123169
    _case("exp_product", "exp(a)/exp(b)", [np.float32([100.0, 1.0]), np.float32([100.0, 2.0])]),
    _case("int_square", "abs(x*x)", [np.int32([50000, 46341, 3])]),                  # tf#117142, xla#46628
    _case("int_square", "abs(x*x)", [np.int8([12, -12, 11])]),
    _case("overlap_update", "dus", [np.arange(4, dtype=np.int32).reshape(4, 1, 1), np.ones((4, 1, 1), np.int32),
                                    np.zeros(3, np.int32), np.zeros(3, np.int32)],   # openxla/xla#49176
          sizes=(1, 1, 1), base="x+y", source="shift", shift=1, starts="static", after="reshape"),
    _case("nested_slice", "ds(ds(x, i), j)", [np.arange(10, dtype=np.float32), np.zeros(1, np.float32),
                                              np.int32([9]), np.int32([0])],         # jax-ml/jax#40849
          outer=(4,), inner=(1,), starts="traced"),
]


@pytest.mark.parametrize("case", REPORTED, ids=lambda c: c.name)
def test_reported_rewrites_keep_eager_values(case):
    """The reported reproducers, on both backends, against JAX eager (``jax.jit`` of the same
    function gives the rewritten value for the first five and the shift)."""
    run_case(case)


def test_handoff_dots_stay_eager_dots():
    """Why the hand-off blocks the simplifier with barriers instead of switching it off
    (``xla_disable_hlo_passes=algsimp``): eager's lone ``dot`` is canonicalized by it, and
    without it a vector dot and a dot over a degenerate dim summed in another order."""
    import jax
    import jax.numpy as jnp

    import minixla
    import minixla.numpy as mnp
    rng = np.random.default_rng(0)
    for eq, a, b in [("i,i->", (257,), (257,)), ("bij,bj->bi", (8, 1, 64), (8, 64))]:
        x, y = rng.normal(size=a).astype(np.float32), rng.normal(size=b).astype(np.float32)
        with jax.disable_jit():
            want = np.asarray(jnp.einsum(eq, jnp.asarray(x), jnp.asarray(y)))
        got = minixla.jit(lambda p, q, eq=eq: mnp.einsum(eq, p, q), backend="jax")(x, y)
        assert np.asarray(got).tobytes() == want.tobytes(), eq
    assert "xla_disable_hlo_passes" not in jax_xla.COMPILER_OPTIONS and jax_xla.OP_BARRIERS
