"""The ``jax.numpy`` names of floatbits.py, editing.py and index_tricks.py (and the others of
the same round), against ``jax.numpy`` eagerly: minixla eagerly, under ``minixla.jit`` on the LLVM
backend and, for some, on the hand-off. Values, dtypes and shapes must be equal (NaNs as NaNs);
each case's programs are compiled once, all its outputs in one."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

BF16 = np.dtype(ml_dtypes.bfloat16)


def _same(got, want):
    if isinstance(want, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(got) == len(want) and all(map(_same, got, want))
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype != w.dtype or g.shape != w.shape:
        return False
    if g.dtype.kind == "f" or g.dtype == BF16:  # bits, so -0.0 and subnormals count; NaN as NaN
        g, w = g.astype(np.float64), w.astype(np.float64)
        return bool(np.all((g == w) & (np.signbit(g) == np.signbit(w)) | (np.isnan(g) & np.isnan(w))))
    return np.array_equal(g, w)


def _check(f, *args, jit=True, handoff=False, eager=True, ref_jit=False):
    """``f(mnp, ...)`` eagerly, under ``minixla.jit`` and on the hand-off against ``f(jnp, ...)``
    eagerly (``ref_jit``: under ``jax.jit``, one compile instead of one per op, for the
    functions that only move data, whose values ``jit`` does not change)."""
    jf = lambda *a: f(jnp, *a)  # noqa: E731
    want = jax.jit(jf)(*args) if ref_jit else jf(*[jnp.asarray(a) for a in args])
    if eager:
        got = f(mnp, *args)
        assert _same(got, want), ("eager", got, want)
    if jit:
        got = minixla.jit(lambda *a: f(mnp, *a))(*args)
        assert _same(got, want), ("jit", got, want)
    if handoff:
        got = minixla.jit(lambda *a: f(mnp, *a), backend="jax")(*args)
        assert _same(got, want), ("hand-off", got, want)


def _specials(dtype):
    fi = ml_dtypes.finfo(dtype)
    t = float(fi.smallest_subnormal)
    return np.array([0, -0.0, np.inf, -np.inf, np.nan, t, -t, 3 * t, float(fi.tiny), 1, -1.5, 3,
                     1000, float(fi.max), -float(fi.max), 0.3], dtype)


# ---------------------------------------------------------------------------------------
# floatbits

@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32], ids=["f16", "bf16", "f32"])
def test_float_bits_functions(dtype):
    x = _specials(dtype)
    e = np.array([0, 1, -1, 3, -30, 20, -20, 200, -200, 5, -5, 1, 2, -1, 1, 0], np.int32)
    _check(lambda m, x, e: (m.frexp(x), m.ldexp(x, e), m.spacing(x), m.modf(x), m.i0(x)), x, e,
           handoff=dtype != np.float32)


def test_frexp_f32_subnormals_handoff():
    """JAX's frexp gives (±0.5, -149) for every f32 subnormal (XLA:CPU's multiply flushes the
    scaled value; the zero test is on the bits): so do both backends."""
    x = _specials(np.float32)[5:8]
    _check(lambda m, x: m.frexp(x), x, handoff=True)


def test_frexp_f64_subnormals(x64):
    x = np.array([5e-324, -1e-310, 0.0, -0.0, 3.0, np.inf, np.nan], np.float64)
    _check(lambda m, x: (m.frexp(x), m.ldexp(x, 3), m.spacing(x)), x)


def test_float_bits_int_inputs_and_errors():
    i = np.array([-3, 0, 4, 7], np.int32)
    _check(lambda m, x: (m.frexp(x), m.modf(x), m.spacing(x), m.i0(x), m.ldexp(x, x)), i, jit=False)
    with pytest.raises(ValueError, match="ldexp not supported"):
        mnp.ldexp(np.float32(1), np.float32(2))
    with pytest.raises(ValueError, match="must be integers"):
        mnp.gcd(1.0, 2)
    with pytest.raises(ValueError, match="must be integers"):
        mnp.lcm(1.0, 2)
    with pytest.raises(TypeError, match="population_count does not accept dtype float32"):
        mnp.bitwise_count(np.float32(1))
    with pytest.raises(NotImplementedError):
        mnp.modf(np.float32(1), out=np.zeros(()))


def test_gcd_lcm_bitwise_count():
    a = np.array([0, 12, -18, 7, 2**30, -2**31, 9], np.int32)
    b = np.array([0, 8, 12, 0, 6, 2, -6], np.int32)
    # (not gcd(INT_MIN, 6): abs wraps, and JAX's loop -- so minixla's -- never ends)
    _check(lambda m, a, b: (m.gcd(a, b), m.lcm(a, b), m.gcd(a[:5], 6), m.bitwise_count(a)), a, b, handoff=True)
    for dtype in (np.int8, np.uint16, np.bool_):
        v = np.array([0, 1, 7, 5], dtype)
        _check(lambda m, v: m.bitwise_count(v), v)
    x = np.array([-128, -1, 0, 127], np.int8)
    assert _same(minixla.jit(lax.population_count)(x), jax.lax.population_count(x))
    assert _same(minixla.jit(lax.clz)(x), jax.lax.clz(x))


def test_packbits_unpackbits():
    b = np.array([[1, 0, 1, 1, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 0, 0, 1, 1]], np.int32)
    u = np.array([[3, 255], [128, 7]], np.uint8)
    _check(lambda m, b, u: (m.packbits(b), m.packbits(b, axis=1), m.packbits(b > 0, axis=0, bitorder="little"),
                            m.unpackbits(u), m.unpackbits(u, axis=1),
                            m.unpackbits(u, axis=0, count=3, bitorder="little"), m.unpackbits(u, count=40)),
           b, u, eager=False, handoff=True)
    with pytest.raises(TypeError, match="unsigned byte"):
        mnp.unpackbits(b)
    with pytest.raises(TypeError, match="integer or boolean"):
        mnp.packbits(np.ones(3, np.float32))


def test_float_bits_transformations():
    x = np.array([0.3, 2.0, 5.0, -0.7], np.float32)
    for mf, jf in [(lambda x: mnp.frexp(x)[0], lambda x: jnp.frexp(x)[0]),
                   (lambda x: mnp.ldexp(x, 3), lambda x: jnp.ldexp(x, 3)),
                   (lambda x: mnp.modf(x)[0], lambda x: jnp.modf(x)[0])]:
        assert _same(minixla.jit(minixla.grad(lambda x: mf(x).sum()))(x), jax.grad(lambda x: jf(x).sum())(x))
    g = minixla.grad(lambda x: mnp.i0(x).sum())(x)
    np.testing.assert_allclose(g, jax.grad(lambda x: jnp.i0(x).sum())(x), rtol=1e-6)
    assert float(minixla.grad(mnp.i0)(np.float32(0))) == 0.0
    a = np.array([[12, 18], [7, 0]], np.int32)
    assert _same(minixla.vmap(mnp.gcd)(a, a[::-1]), jax.vmap(jnp.gcd)(a, a[::-1]))
    assert _same(minixla.vmap(mnp.frexp)(x), jax.vmap(jnp.frexp)(x))


# ---------------------------------------------------------------------------------------
# editing

X = np.arange(12, dtype=np.float32).reshape(3, 4)
I = np.array([[0, 2, 1, 0], [1, 1, 0, 2], [2, 0, 0, 1]], np.int32)


def test_editing_functions():
    def f(m, a, b):
        return (m.block([[a, a], [a[:, :3], a, a[:, 3:]]]), m.block([a[0], a[1]]),
                m.choose(b + 2, [a, -a, a * 2], mode="wrap"), m.choose(b * 2, [a, -a, a * 2], mode="clip"),
                m.compress(a[0] > 1, a, axis=1, size=3, fill_value=-1),
                m.extract(a > 5, a, size=8, fill_value=7),
                m.delete(a, -1, axis=1), m.delete(a, slice(0, 4, 2), axis=1),
                m.delete(a, np.array([0, 2]), axis=0), m.delete(a, np.array([True] * 6 + [False] * 6)),
                m.delete(a, b[0, 1:3], axis=1, assume_unique_indices=True),
                m.insert(a, 1, 9.0, axis=1), m.insert(a, np.array([0, 2, 2]), np.array([7, 8, 9]), axis=1),
                m.insert(a, slice(0, 6, 3), a[0, :2]), m.insert(a, 3, a[0], axis=0), m.insert(a, b[0, 1], -1.0),
                m.place(a, a > 4, np.array([-1.0, -2.0]), inplace=False),
                m.diagflat(a[:2], k=-1), m.diagflat(a[:2, :2], 2),
                m.hsplit(a, 2), m.vsplit(a, [1]), m.dsplit(a.reshape(1, 3, 4), 2),
                m.rollaxis(a.reshape(1, 3, 4), 2, 1), m.resize(a[0], (3, 3)), m.resize(a[0, :0], 5))
    _check(f, X, I, handoff=True, eager=False, ref_jit=True)
    # eagerly, a few (each op of an eager call is a JAX compile)
    _check(lambda m, a, b: (m.delete(a, b[0, 1:3], axis=1, assume_unique_indices=True),
                            m.compress(np.array([True, False, True]), a, axis=0),
                            m.compress(np.array([1, 0, 1, 1, 0]), a)), X, I, jit=False)


def test_editing_concrete_only_and_errors():
    z = np.array([[0, 0, 1, 0], [0, 2, 0, 0]], np.int32)
    _check(lambda m, a: (m.trim_zeros(a[0]), m.trim_zeros(a, "b", axis=1), m.trim_zeros(a),
                         m.choose(np.array([0, 1]), [a[0, :2], a[1, :2]])), z, jit=False)
    with pytest.raises(minixla.core.errors.ConcretizationTypeError):
        minixla.jit(mnp.trim_zeros)(z[0])
    with pytest.raises(minixla.core.errors.ConcretizationTypeError):
        minixla.jit(lambda i: mnp.choose(i, [X[0], X[1]]))(I[0])
    with pytest.raises(minixla.core.errors.ConcretizationTypeError):
        minixla.jit(lambda c: mnp.compress(c, X[0]))(np.array([True, False]))
    with pytest.raises(ValueError, match="invalid entry in choice array"):
        mnp.choose(np.array([0, 3]), [X[0, :2], X[1, :2]])
    with pytest.raises(ValueError, match="cannot modify arrays in-place"):
        mnp.place(X, X > 1, np.array([1.0]))
    with pytest.raises(ValueError, match="out of bounds"):
        mnp.compress(np.array([0, 0, 0, 0, 1]), X[0])
    with pytest.raises(ValueError, match="does not allow tuples"):
        mnp.block((X, X))
    with pytest.raises(ValueError, match="Mismatched list depths"):
        mnp.block([X, [X]])
    with pytest.raises(ValueError, match="non-negative"):
        mnp.resize(X, (-1, 2))


# ---------------------------------------------------------------------------------------
# index tricks

def test_index_functions():
    fi = np.array([0, 5, 11, 12, -1, -2, -20], np.int32)
    a0, a1 = np.array([0, 2, 1, 5], np.int32), np.array([3, 0, 1, -1], np.int32)
    _check(lambda m, i, a, b: (m.unravel_index(i, (3, 4)), m.unravel_index(i, 7),
                               m.ravel_multi_index((a, b), (3, 4), mode="clip"),
                               m.ravel_multi_index((a, b), (3, 4), mode="wrap", order="F"), m.ix_(a, b)),
           fi, a0, a1, handoff=True)
    _check(lambda m, a, b: m.ravel_multi_index((a, b), (6, 4)), a0, np.abs(a1), jit=False)
    with pytest.raises(ValueError, match="invalid entry in coordinates array"):
        mnp.ravel_multi_index((a0, a1), (3, 4))
    with pytest.raises(minixla.core.errors.ConcretizationTypeError):
        minixla.jit(lambda a: mnp.ravel_multi_index((a, a), (6, 6)))(a0)
    with pytest.raises(ValueError, match="1-dimensional"):
        mnp.ix_(X)


def test_index_trick_objects():
    for expr in ("m.mgrid[0:3, 1:5:2]", "m.mgrid[0:1:5j, -1:1:3j]", "m.mgrid[2:7]", "m.ogrid[0:3, 0:4]",
                 "m.r_[1:4, 0, np.array([7, 8])]", "m.r_[0.5:1:3j, np.array([7., 8.])]",
                 "m.r_['0,2,0', [1, 2], [3, 4]]", "m.r_['c', 1:3]",
                 "m.c_[np.array([1, 2, 3]), np.array([4, 5, 6])]", "m.c_[np.ones((2, 2)), np.zeros((2, 1))]"):
        got, want = eval(expr, {"m": mnp, "np": np}), eval(expr, {"m": jnp, "np": np})
        assert _same(got, want), expr
    assert mnp.s_[1:3, ::2] == jnp.s_[1:3, ::2] and mnp.index_exp[2] == jnp.index_exp[2]


# ---------------------------------------------------------------------------------------
# polynomials and windows

def test_polynomials():
    p1, p2 = np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, -5.0], np.float32)
    pi = np.array([3, 0, -2, 5], np.int32)
    _check(lambda m, a, b, c: (m.polyadd(a, b), m.polyadd(b, a), m.polysub(a, b), m.polysub(b, a),
                               m.polyadd(c, b), m.polymul(a, b), m.polymul(c, b), m.polyder(c),
                               m.polyder(a, 2), m.polyder(a, 0), m.polyder(a, 5), m.polyint(a),
                               m.polyint(a, 2, k=np.array([1.0, 2.0], np.float32)), m.polyint(c, 3, k=7.0),
                               m.poly(a), m.poly(c), m.poly(a[:0])),
           p1, p2, pi, eager=False, handoff=True)
    _check(lambda m, a, b: (m.polymul(a, b, trim_leading_zeros=True), m.polyint(a, 2)),
           np.array([0.0, 0.0, 1.0, 2.0], np.float32), p2, jit=False)
    with pytest.raises(ValueError, match="Order of derivative must be positive"):
        mnp.polyder(p1, -1)
    with pytest.raises(ValueError, match="k must be a scalar"):
        mnp.polyint(p1, 2, k=np.ones(3, np.float32))


def test_window_functions():
    _check(lambda m: (m.hamming(7), m.hanning(8), m.blackman(9), m.bartlett(6), m.kaiser(7, 3.0),
                      m.hamming(1), m.hanning(0), m.kaiser(1, 2.0)), handoff=True)
    want = jnp.kaiser(6, np.float32(5.0))
    assert _same(minixla.jit(lambda b: mnp.kaiser(6, b))(np.float32(5.0)), want)
    with pytest.raises(minixla.core.errors.ConcretizationTypeError):
        minixla.jit(mnp.hamming)(5)


# ---------------------------------------------------------------------------------------
# functional, union1d, copy, dtype aliases

def test_functional_and_union1d():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    _check(lambda m, a: (m.apply_along_axis(lambda v: m.sum(v * v), 1, a),
                         m.apply_along_axis(lambda v: v[::-1] * 2, -1, a),
                         m.apply_along_axis(lambda v, k: m.outer(v, v) + k, 0, a, 1.0),
                         m.apply_over_axes(m.sum, a, [0, 2]),
                         m.apply_over_axes(lambda a, ax: m.cumsum(a, ax), a, (1,)),
                         m.fromfunction(lambda i, j: i * 10 + j, (3, 4)),
                         m.fromfunction(lambda i, j: i - j, (2, 3), dtype=int),
                         m.copy(a), m.copy(3)), x, eager=False, handoff=True)
    a, b = np.array([3, 1, 1, 7], np.int32), np.array([[2, 3], [9, 1]], np.int32)
    c = np.array([5, 1, 3, 3, 9, 1, 7], np.int32)
    _check(lambda m, a, b, c: (m.union1d(a, b, size=8, fill_value=-1), m.setdiff1d(c, b, size=6),
                               m.setdiff1d(c, b, size=3, fill_value=-1), m.setdiff1d(c, b, assume_unique=True, size=7),
                               m.setdiff1d(c, b[:0], size=5), m.setdiff1d(c[:0], b, size=2)), a, b, c, handoff=True)
    _check(lambda m, a, b, c: (m.union1d(a, b), m.setdiff1d(c, b), m.setdiff1d(c, b, assume_unique=True)),
           a, b, c, jit=False)
    with pytest.raises(minixla.core.errors.ConcretizationTypeError):
        minixla.jit(mnp.union1d)(a, b)
    with pytest.raises(TypeError, match="copy requires ndarray"):
        mnp.copy([1, 2])
    for name in ("double", "single", "float_", "int_", "uint", "bool"):
        assert np.dtype(getattr(mnp, name)) == np.dtype(getattr(jnp, name)), name


def test_put_along_axis_and_unwrap():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    i = np.array([[0, 3], [1, 1], [2, 0]], np.int32)
    ph = np.array([0.0, 1.0, 6.5, 7.0, 13.0, 2.0, -4.0, -10.0], np.float32)
    _check(lambda m, a, i, p: (m.put_along_axis(a, i, -1.0, axis=1, inplace=False),
                               m.put_along_axis(a, np.array([[0, 1, 2, 0], [2, 2, 1, 1]], np.int32), a[:2],
                                                axis=0, inplace=False),
                               m.put_along_axis(a, i.ravel()[:3], 9.0, axis=None, inplace=False),
                               m.unwrap(p), m.unwrap(p, discont=4.0), m.unwrap(p.reshape(2, 4), axis=0),
                               m.unwrap(p, period=5.0), m.unwrap(np.array([0, 3, 9, 1, 20], np.int32), period=8)),
           x, i, ph, eager=False, handoff=True)
    _check(lambda m, p: m.unwrap(p), ph, jit=False)
    with pytest.raises(ValueError, match="cannot modify arrays in-place"):
        mnp.put_along_axis(x, i, 1.0, axis=1)
