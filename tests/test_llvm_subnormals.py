"""Subnormal operands on both backends, bit for bit against JAX eager (XLA:CPU).

f16 subnormals are exact normal f32 values once widened, so every op keeps them; f32, bf16
(widened to f32 by a shift) and f64 subnormals are read as ±0 by XLA:CPU's arithmetic and
compares (denormals-are-zero). Regressions: LLVM folded ``|x| < 6.1035e-05`` on f16 to
``x == 0`` (the kernels' ``denormal-fp-math`` attribute claimed f16 flushes too), and folded
a bf16 compare with a constant into an integer test of the unflushed bits."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

BF16 = np.dtype(ml_dtypes.bfloat16)


def _values(dtype):
    fi = ml_dtypes.finfo(dtype)
    tiny, normal = np.asarray(fi.smallest_subnormal, dtype), np.asarray(fi.smallest_normal, dtype)
    big_sub = np.asarray(float(normal) - float(tiny), dtype)  # the largest subnormal
    vals = [tiny, -tiny, 3 * tiny, big_sub, -big_sub, normal, -normal, 0.0, -0.0, 1.0, np.inf, np.nan]
    return np.array(vals, dtype), normal, tiny


# (name, minixla fn, jax fn); each takes (x, y, normal, tiny)
CASES = [
    ("lt_abs_normal", lambda x, y, n, t: lax.lt(lax.abs(x), n), lambda x, y, n, t: jax.lax.lt(jax.lax.abs(x), n)),
    ("eq0", lambda x, y, n, t: lax.eq(x, np.zeros((), x.dtype)), lambda x, y, n, t: jax.lax.eq(x, jnp.zeros((), x.dtype))),
    ("lt", lambda x, y, n, t: lax.lt(x, y), lambda x, y, n, t: jax.lax.lt(x, y)),
    ("ge", lambda x, y, n, t: lax.ge(x, y), lambda x, y, n, t: jax.lax.ge(x, y)),
    ("ne", lambda x, y, n, t: lax.ne(x, y), lambda x, y, n, t: jax.lax.ne(x, y)),
    ("max", lambda x, y, n, t: lax.max(x, y), lambda x, y, n, t: jax.lax.max(x, y)),
    ("min", lambda x, y, n, t: lax.min(x, y), lambda x, y, n, t: jax.lax.min(x, y)),
    ("max_neg", lambda x, y, n, t: mnp.maximum(x, -x), lambda x, y, n, t: jnp.maximum(x, jax.lax.neg(x))),
    ("clamp", lambda x, y, n, t: lax.clamp(-t, x, t), lambda x, y, n, t: jax.lax.clamp(-t, x, t)),
    # a constant operand: LLVM folds the max's compare (it returned a subnormal's bits)
    ("relu_l", lambda x, y, n, t: mnp.maximum(np.zeros((), x.dtype), x),
     lambda x, y, n, t: jnp.maximum(jnp.zeros((), x.dtype), x)),
    ("min0", lambda x, y, n, t: mnp.minimum(x, np.zeros((), x.dtype)),
     lambda x, y, n, t: jnp.minimum(x, jnp.zeros((), x.dtype))),
    ("clip", lambda x, y, n, t: mnp.clip(x, np.asarray(-0.5, x.dtype), np.asarray(0.5, x.dtype)),
     lambda x, y, n, t: jnp.clip(x, jnp.asarray(-0.5, x.dtype), jnp.asarray(0.5, x.dtype))),
    ("abs", lambda x, y, n, t: lax.abs(x), lambda x, y, n, t: jax.lax.abs(x)),
    ("neg", lambda x, y, n, t: lax.neg(x), lambda x, y, n, t: jax.lax.neg(x)),
    ("add", lambda x, y, n, t: lax.add(x, y), lambda x, y, n, t: jax.lax.add(x, y)),
    ("mul", lambda x, y, n, t: lax.mul(x, y), lambda x, y, n, t: jax.lax.mul(x, y)),
    ("div", lambda x, y, n, t: lax.div(x, y), lambda x, y, n, t: jax.lax.div(x, y)),
    ("isfinite", lambda x, y, n, t: mnp.isfinite(x), lambda x, y, n, t: jnp.isfinite(x)),
    ("nextafter", lambda x, y, n, t: lax.nextafter(x, y), lambda x, y, n, t: jax.lax.nextafter(x, y)),
    ("sign", lambda x, y, n, t: lax.sign(x), lambda x, y, n, t: jax.lax.sign(x)),
    ("to_f32", lambda x, y, n, t: lax.convert_element_type(x, np.float32),
     lambda x, y, n, t: jax.lax.convert_element_type(x, np.float32)),
    ("to_f16", lambda x, y, n, t: lax.convert_element_type(x, np.float16),
     lambda x, y, n, t: jax.lax.convert_element_type(x, np.float16)),
    ("to_bf16", lambda x, y, n, t: lax.convert_element_type(x, BF16),
     lambda x, y, n, t: jax.lax.convert_element_type(x, BF16)),
    ("to_i32", lambda x, y, n, t: lax.convert_element_type(x, np.int32),
     lambda x, y, n, t: jax.lax.convert_element_type(x, np.int32)),
]


def _bits(a):
    """dtype, shape and bits; every NaN as one (the sign of a NaN result is not this test's)."""
    a = np.array(a)
    if a.dtype.kind == "f" or a.dtype == BF16:
        a[np.isnan(a.astype(np.float64))] = np.nan
    return a.dtype, a.shape, a.reshape(-1).view(np.uint8).tobytes()


def _mismatches(dtype, backend, as_jax_jit=()):
    """The cases whose result differs from JAX eager's (each case run eagerly by JAX, all of
    them in one minixla program), over every pair of the dtype's special values."""
    vals, normal, tiny = _values(dtype)
    x, y = np.repeat(vals, len(vals)), np.tile(vals, len(vals))
    got = minixla.jit(lambda a, b: [mf(a, b, normal, tiny) for _, mf, _ in CASES], backend=backend)(x, y)
    bad = []
    for (name, _, jf), g in zip(CASES, got):
        ref = (lambda a, b: jf(a, b, jnp.asarray(normal), jnp.asarray(tiny)))
        want = jax.jit(ref)(x, y) if name in as_jax_jit else ref(jnp.asarray(x), jnp.asarray(y))
        if _bits(g) != _bits(want):
            bad.append(name)
    return bad


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32], ids=["f16", "bf16", "f32"])
def test_subnormal_ops_llvm_match_jax_eager(dtype):
    assert not _mismatches(dtype, "llvm")


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32], ids=["f16", "bf16", "f32"])
def test_subnormal_scalar_constant_compare(dtype):
    """The reported case: a rank-0 input against a scalar constant (an immediate in the kernel)."""
    vals, normal, tiny = _values(dtype)
    for v in vals[:5]:
        want = jax.lax.lt(jax.lax.abs(jnp.asarray(v)), jnp.asarray(normal))
        got = minixla.jit(lambda a: lax.lt(lax.abs(a), normal))(v)
        assert _bits(got) == _bits(want), (v, got, want)
        want = jax.lax.eq(jnp.asarray(v), jnp.zeros((), dtype))
        got = minixla.jit(lambda a: lax.eq(a, np.zeros((), dtype)))(v)
        assert _bits(got) == _bits(want), (v, got, want)


def test_f64_subnormal_ops_llvm_match_jax_eager(x64):
    assert not _mismatches(np.float64, "llvm")


def test_f16_subnormal_compare_reported():
    f = lambda x: lax.lt(lax.abs(x), np.float16(6.104e-5))
    assert bool(minixla.jit(f)(np.float16(6e-8)))
    assert bool(minixla.jit(f, backend="jax")(np.float16(6e-8)))


# XLA's fused maximum keeps a subnormal's bits where eager's lone maximum flushes: the hand-off
# gives jax.jit's answer there (README "Semantics")
_HANDOFF_AS_JAX_JIT = {np.dtype(np.float32): ("max_neg",)}


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["f16", "f32"])  # (bf16 is f32 to XLA)
def test_subnormal_ops_handoff_match_jax_eager(dtype):
    assert not _mismatches(dtype, "jax", _HANDOFF_AS_JAX_JIT.get(np.dtype(dtype), ()))
