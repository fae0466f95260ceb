"""The LLVM backend's float32/f16/bf16 transcendentals are bit-identical to XLA:CPU's (JAX eager).

minixla mirrors XLA's algorithms (``minixla/backends/llvm/math_xla.py``) and calls libm's float
functions where XLA does (sinf, cosf, tanf, atan2f, powf, cbrtf); the reference here is live JAX,
op by op, never a pinned table, so on a host or jaxlib where XLA computes other bits this fails
instead of passing silently.

Default: one compiled program per dtype over ~90K float32 values (every 2^16th bit pattern, a
fine grid of [-10, 10], the clamp and branch boundaries of each algorithm, specials) and all
65,536 f16 / bf16 values. ``MINIXLA_DEEP_XLA_MATH=1``: every 64th float32 bit pattern and all of
[-10, 10] at 2^-20 steps (84M values per function, a few minutes).
"""
import os

import jax
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.lax as L

UNARY = ["tanh", "exp", "logistic", "erf", "erfc", "expm1", "log", "log1p", "sin", "cos", "tan",
         "cbrt", "lgamma", "digamma", "erf_inv", "rsqrt"]
BINARY = ["pow", "atan2"]

# where XLA's algorithms switch branch or clamp (tanh 4e-4/7.9988/20, exp -87.8/88.8, erf 3.8325,
# expm1 0.5, log1p 0.4142, erfc 1/2/sqrt(88.72)), the smallest normal, and specials
BOUNDARIES = [0.0, 4e-4, 7.9988136, 9.0, 20.0, 87.33655, 87.8, 88.72284, 88.8, 103.97, 3.8325,
              0.5, 0.41421357, 1.0, 2.0, 9.4190, 1.1754944e-38, 1e-30, 1.0e-7]


def _near(values, k=32):
    out = []
    for v in np.asarray(values, np.float32):
        for s in (v, -v):
            up = down = s
            for _ in range(k):
                up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
                out += [up, down]
            out.append(s)
    return out


def _float32_inputs():
    bits = np.arange(0, 2 ** 32, 2 ** 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array([np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-40, 3.4028235e38,
                        -3.4028235e38], np.float32)
    return np.concatenate([bits, np.linspace(-10, 10, 16385, dtype=np.float32),
                           np.array(_near(BOUNDARIES), np.float32), special])


def _all_narrow(dtype):
    return np.arange(65536, dtype=np.uint16).view(dtype)


def _program(x, y):
    return tuple(getattr(L, n)(x) for n in UNARY) + (L.pow(x, y), L.atan2(x, y))


def _jax_reference(x, y):
    """Op by op (JAX eager: one XLA computation per op, as the semantics contract says)."""
    return [np.asarray(getattr(jax.lax, n)(x)) for n in UNARY] + [
        np.asarray(jax.lax.pow(x, y)), np.asarray(jax.lax.atan2(x, y))]


def _mismatches(got, want):
    got, want = np.asarray(got), np.asarray(want)
    u = np.uint32 if got.dtype.itemsize == 4 else np.uint16
    nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    return np.flatnonzero((got.view(u) != want.view(u)) & ~nan)


def _check(x, y, compiled):
    report = []
    for name, g, w in zip(UNARY + BINARY, compiled(x, y), _jax_reference(x, y)):
        bad = _mismatches(g, w)
        if bad.size:
            i = bad[:3]
            report.append(f"{name} {x.dtype}: {bad.size} of {x.size} differ, e.g. x={x[i].tolist()} "
                          f"y={y[i].tolist()}: minixla {np.asarray(g)[i].tolist()} jax {w[i].tolist()}")
    assert not report, "\n".join(report)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_transcendentals_bit_identical_to_xla(dtype):
    x = _float32_inputs() if dtype == np.float32 else _all_narrow(dtype)
    y = np.roll(x, 7919)  # pairs of unrelated values for pow and atan2
    _check(x, y, minixla.jit(_program))


@pytest.mark.parametrize("n", [1, 3, 5, 8, 17, 33])
def test_rsqrt_estimate_every_width(n):
    """rsqrt's estimate is taken 4 lanes at a time: vector tails, odd widths and the scalar
    path give XLA's bits too (0, subnormal, inf and negative lanes included)."""
    x = np.concatenate([np.array([0.0, -0.0, 1e-40, np.inf, -2.0, 3.0], np.float32),
                        np.geomspace(1e-30, 1e30, 64).astype(np.float32)])[:n]
    got = minixla.jit(L.rsqrt)(x)
    assert _mismatches(got, np.asarray(jax.lax.rsqrt(x))).size == 0
    assert _mismatches(np.atleast_1d(minixla.jit(L.rsqrt)(x[-1])), np.atleast_1d(jax.lax.rsqrt(x[-1]))).size == 0


def test_gelu_is_jaxs_for_large_negative_inputs():
    """The issue's symptom: approximate gelu (tanh) gave ~-5e-7 where JAX gives -0.0 (XLA's tanh
    is exactly -1 from |x| = 7.9988); exact gelu is erfc-based. Both now match jax.jit bits."""
    import minixla.nn as mnn
    x = np.linspace(-12, 12, 24577, dtype=np.float32)
    for approximate in (True, False):
        got = np.asarray(minixla.jit(lambda v: mnn.gelu(v, approximate=approximate))(x))
        want = np.asarray(jax.nn.gelu(x, approximate=approximate))
        assert _mismatches(got, want).size == 0, approximate
        if approximate:
            assert (got[x < -8] == 0).all() and np.signbit(got[x < -8]).all()


@pytest.mark.skipif(not os.environ.get("MINIXLA_DEEP_XLA_MATH"),
                    reason="exhaustive sweep: set MINIXLA_DEEP_XLA_MATH=1")
def test_transcendentals_bit_identical_to_xla_deep():
    step, chunk = 64, 1 << 22
    compiled = minixla.jit(_program)
    for start in range(0, 2 ** 32, chunk * step):
        x = np.arange(start, start + chunk * step, step, dtype=np.uint64).astype(np.uint32).view(np.float32)
        _check(x, np.roll(x, 7919), compiled)
    for x in np.linspace(-10, 10, 20 * 2 ** 20 + 1, dtype=np.float32)[:-1].reshape(5, -1):
        _check(x, np.roll(x, 7919), compiled)


def test_jnp_log2_log10_are_jaxs():
    """``jnp.log10`` multiplies by 0.4342944819032518 rounded to the dtype (bf16 ``log10(0.5)``
    is -0.298828, a division gave -0.300781) and ``jnp.log2``'s ``/ log(2.0)`` is folded by XLA
    into ``* (1 / log(2))`` at every size, a scalar too: bits of jax.numpy eagerly and under jit on
    both backends, float32/f16/bf16, shapes (n,) and ()."""
    import jax.numpy as jnp
    import minixla.numpy as mnp
    base = np.array([3.14159, 2.2, 1.1754944e-38, 7.3, 0.3, 1e-30, 5e4, 0.5, 20.0], np.float32)
    xs = [v for dt in (np.float32, np.float16, ml_dtypes.bfloat16) for b in [base.astype(dt)]
          for v in (b, b[0])]

    def program(np_, *args):
        return [f(a) for a in args for f in (np_.log2, np_.log10)]
    want = [np.asarray(w) for w in program(jnp, *xs)]
    runs = {"eager": program(mnp, *xs)}
    for b in ("llvm", "jax"):
        runs[b] = minixla.jit(lambda *a: program(mnp, *a), backend=b)(*xs)
    for mode, got in runs.items():
        for i, (g, w) in enumerate(zip(got, want)):
            assert np.asarray(g).dtype == w.dtype and np.shape(g) == w.shape, (mode, i)
            assert _mismatches(np.atleast_1d(g), np.atleast_1d(w)).size == 0, (mode, i, g, w)
