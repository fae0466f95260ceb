"""NaN bits of max/min reductions and scans, and the rounding of cumsum: bit-identical to
``jax.jit`` (XLA:CPU) on both backends.

XLA's reduce is an ordered loop of its maximum/minimum: the first NaN wins, its sign bit and-ed
(max) or or-ed (min) with the sign of the partial result before it (``-inf``/``+inf`` at the
start); the LLVM backend reduces vectorized and, where the result is NaN, again in order
(``reductions.ordered_nan``). XLA:CPU rewrites a scan longer than 16 into blocks of 16 whose
totals are scanned recursively, each output ``local . carry``: the LLVM scan kernel does the same
(``scan._emit_blocked_scan``), so a cummax's NaN and a float cumsum's rounding are XLA's.
Not covered: f16 row reductions and scans along a major axis, where XLA:CPU's vector code gives
the canonical 0x7e00 in some lanes, and its long rows (YNNPACK), whose max can drop a NaN.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.lax as mlax
import minixla.numpy as mnp

_UINT = {2: np.uint16, 4: np.uint32}
_QUIET = {"float32": 0x7FC00000, "float16": 0x7E00, "bfloat16": 0x7FC0}


def _bits(a):
    a = np.asarray(a)
    return a.view(_UINT[a.dtype.itemsize]) if a.dtype.kind not in "iub" else a


def _nan(dtype, negative, payload):
    it = _UINT[np.dtype(dtype).itemsize]
    v = _QUIET[np.dtype(dtype).name] | payload | (int(negative) << (8 * np.dtype(dtype).itemsize - 1))
    return np.array(v, it).view(dtype)


def _cases(dtype, n=37):
    """Rows of ``n`` values of both signs with NaNs of both signs (payloads 1, 2) at the first,
    second and last positions and two at once."""
    rows = []
    for pos in ((0,), (1,), (n - 1,), (0, 2), (3, 20)):
        for signs in ((0, 1), (1, 0), (1, 1)):
            x = (np.arange(n) - 1.0).astype(dtype)
            for j, p in enumerate(pos):
                x[p] = _nan(dtype, signs[j], j + 1)
            rows.append(x)
    return np.stack(rows)


def _program(lib, lax):
    def f(x):
        outs = []
        for r in range(x.shape[0]):
            row = x[r]
            outs += [lib.max(row), lib.min(row), lib.argmax(row), lib.argmin(row),
                     lax.cummax(row), lax.cummin(row)]
        return outs + [lib.max(x, axis=0), lib.min(x, axis=0)]
    return f


@pytest.mark.parametrize("backend", ["llvm", "jax"])
@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16, np.float16])
def test_max_min_reductions_and_scans_give_xlas_nan(backend, dtype):
    x = _cases(dtype)
    want = jax.jit(_program(jnp, jax.lax))(x)
    got = minixla.jit(_program(mnp, mlax), backend=backend)(x)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(_bits(g), _bits(w), err_msg=f"output {k}")
    if dtype == np.float32:  # a row reduction (two rows at once: XLA's f16 lanes differ)
        want = jax.jit(lambda a: [jnp.max(a, axis=1), jnp.min(a, axis=1)])(x[:6])
        got = minixla.jit(lambda a: [mnp.max(a, axis=1), mnp.min(a, axis=1)], backend=backend)(x[:6])
        for g, w in zip(got, want):
            np.testing.assert_array_equal(_bits(g), _bits(w))


@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16])
def test_long_prefix_scans_round_as_xla(dtype):
    # 17 (one block and one element), 300 (two levels of block totals), along both axes
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(300).astype(dtype), rng.standard_normal((17, 5)).astype(dtype)

    def prog(lax):
        return lambda a, b: [lax.cumsum(a), lax.cumprod(a * 0 + 1.001), lax.cumsum(b, axis=0),
                             lax.cummax(b, axis=1)]
    want = jax.jit(prog(jax.lax))(x, y)
    got = minixla.jit(prog(mlax), backend="llvm")(x, y)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_bits(g), _bits(w))


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_one_element_windows_of_bfloat16_add_the_init(backend):
    # XLA drops a reduce-window of one-element windows (a f32 cumsum([-0.0]) is -0.0) but not in
    # bfloat16, which it computes in f32 around the window: there it is 0.0 + -0.0 = +0.0
    x = -np.zeros((1, 3), jnp.bfloat16)
    for dt in (jnp.bfloat16, np.float32):
        def prog(lax):
            return lambda a: [lax.cumsum(a, axis=0),
                              lax.reduce_window(a, np.array(0, dt), lax.add, (1, 1), (1, 1), "VALID")]
        want = jax.jit(prog(jax.lax))(x.astype(dt))
        got = minixla.jit(prog(mlax), backend=backend)(x.astype(dt))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(_bits(g), _bits(w))
