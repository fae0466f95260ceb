"""The last ``jax.numpy`` names: ``intersect1d``/``setxor1d`` (setpairs.py), ``vectorize``/
``piecewise`` (vectorize.py), ``gradient``/``histogram2d``/``histogramdd`` (numeric.py), against
``jax.numpy`` eagerly: minixla eagerly, under ``minixla.jit`` (LLVM) and, for some, on the hand-off."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from test_numpy_more_names import _check, _same


def test_intersect1d_and_setxor1d():
    a, b = np.array([3, 1, 2, 3, 7, 5, 1], np.int32), np.array([[5, 3], [9, 3]], np.int32)
    u, v = np.array([4, 1, 3], np.int32), np.array([3, 9, 4, 0], np.int32)
    c, d = np.array([1, np.nan, 2, 2], np.float32), np.array([np.nan, 2, 4], np.float32)
    _check(lambda m, a, b, u, v: (
        m.intersect1d(a, b, size=2), m.intersect1d(a, b, size=6, fill_value=-9),
        m.intersect1d(a, b, return_indices=True, size=5), m.intersect1d(u, v, assume_unique=True, size=4),
        m.intersect1d(u, v, assume_unique=True, return_indices=True, size=3), m.intersect1d(a, b[:0], size=2),
        m.setxor1d(a, b, size=3), m.setxor1d(a, b, size=9, fill_value=-9), m.setxor1d(u, v, assume_unique=True, size=6),
        m.setxor1d(a[:0], b, size=4)), a, b, u, v)
    _check(lambda m, a, b: (m.intersect1d(a, b, return_indices=True, size=4), m.setxor1d(a, b, size=5)),
           a, b, eager=False, handoff=True)
    _check(lambda m, c, d: (m.intersect1d(c, d, size=3), m.setxor1d(c, d, size=7), m.setxor1d(c, d, size=2)), c, d)
    _check(lambda m, a, b, u, v, c, d: (
        m.intersect1d(a, b), m.intersect1d(a, b, return_indices=True), m.intersect1d(u, v, assume_unique=True),
        m.intersect1d(c, d), m.setxor1d(a, b), m.setxor1d(u, v, assume_unique=True), m.setxor1d(c, d)),
        a, b, u, v, c, d, jit=False)
    for f in (mnp.intersect1d, mnp.setxor1d):
        with pytest.raises(minixla.core.errors.ConcretizationTypeError):
            minixla.jit(f)(a, b)


def _vectorized(m, x, y, z):
    vec, pw = m.vectorize, m.piecewise
    return (vec(lambda a, b: a * b + 1)(x, y), vec(lambda a, b: a - b)(z, y),
            vec(lambda a, b: m.dot(a, b), signature="(n),(n)->()")(x, y),
            vec(lambda a, k: a * k, excluded={1})(x, 3.0),
            vec(lambda a, s: (m.sum(a) * s, m.max(a)), signature="(n)->(),()", excluded={"s"})(x, s=2.0),
            vec(lambda a: m.outer(a, a), signature="(n)->(n,n)")(z),
            pw(x, [x < 3, x > 8], [lambda v: v * 2, lambda v: -v, 7.5]),
            pw(x, [x > 5], [lambda v, k: v + k], 10.0),
            pw(x.astype(np.int32), [x < 2, x < 5], [1.7, lambda v: v * 3]))


def test_vectorize_and_piecewise():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y, z = np.arange(4, dtype=np.float32), np.float32([[1], [2], [3]])
    _check(_vectorized, x, y, z)
    _check(lambda m, x: m.piecewise(x, [x < 3], [lambda v: v * v, 1.0]), x, eager=False, handoff=True)
    for make, err, text in [(lambda v: v(abs, excluded={-1}), ValueError, "contains negative numbers"),
                            (lambda v: v(abs, excluded={1.5}), TypeError, "can only exclude integer or string"),
                            (lambda v: v(abs, signature="(n->()")(x), ValueError, "not a valid gufunc signature"),
                            (lambda v: v(lambda a, b: a, signature="(n),(n)->()")(x, y[:3]), ValueError,
                             "inconsistent size for core dimension 'n': 3 vs 4"),
                            (lambda v: v(abs, signature="(n)->()")(x), ValueError,
                             r"output shape \(4,\) does not match"),
                            (lambda v: v(abs, signature="(n)->()")(x, y), TypeError, "wrong number of positional")]:
        for v in (jnp.vectorize, mnp.vectorize):
            with pytest.raises(err, match=text):
                make(v)
    with pytest.raises(ValueError, match="either 1 or 2 functions are expected; got 3"):
        mnp.piecewise(x, [x < 1], [1, 2, 3])


def _close(got, want):
    """Same structure, dtypes and shapes; floats within a few ulp of the range (histogram
    edges: linspace rounds differently op by op, see test_numpy_order_stats), others equal."""
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want)
        return [_close(g, w) for g, w in zip(got, want)]
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
    if g.dtype.kind == "f":
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(g, w)


def test_gradient():
    rng = np.random.default_rng(0)
    f = rng.normal(size=(4, 5)).astype(np.float32)
    xs = np.cumsum(rng.uniform(0.5, 2, size=5)).astype(np.float32)
    xi = np.arange(6, dtype=np.int32) ** 2
    # uniform spacings: eagerly and under jit, bit-identical
    _check(lambda m, f, xi: (m.gradient(f), m.gradient(f, 2.0), m.gradient(f, axis=-2), m.gradient(f, 0.5, 4.0),
                             m.gradient(xi), m.gradient(xi, 3), m.gradient(f, axis=())), f, xi, handoff=True)
    # coordinate arrays, against JAX op by op (JAX's jitted gradient fuses and rounds otherwise)
    prog = lambda m, f, xs: (m.gradient(f, 0.5, xs), m.gradient(f, xs, axis=1),  # noqa: E731
                             m.gradient(f[:, :2], xs[:2], axis=1))
    with jax.disable_jit():
        want = prog(jnp, f, xs)
    assert _same(prog(mnp, f, xs), want)
    assert _same(minixla.jit(lambda *a: prog(mnp, *a))(f, xs), want)
    for call, err, text in [(lambda m: m.gradient(f, edge_order=1), NotImplementedError, "'edge_order' argument"),
                            (lambda m: m.gradient(f[:1]), ValueError, "too small to calculate a numerical gradient"),
                            (lambda m: m.gradient(f, 1.0, 2.0, 3.0), TypeError,
                             "Invalid number of spacing arguments 3"),
                            (lambda m: m.gradient(f, xs[:3], axis=1), ValueError, "must have the same length"),
                            (lambda m: m.gradient(f, f[None], axis=1), ValueError, "must be 1D arrays or scalars")]:
        for m in (jnp, mnp):
            with pytest.raises(err, match=text):
                call(m)


def test_histogramdd_and_histogram2d():
    rng = np.random.default_rng(1)
    pts, w = rng.normal(size=(20, 3)).astype(np.float32), rng.uniform(size=20).astype(np.float32)
    xi = np.arange(6, dtype=np.int32)
    edges = np.float32([-2, 0, 1, 3])
    prog = lambda m, p, w, xi: (  # noqa: E731
        m.histogramdd(p), m.histogramdd(p, bins=(2, 3, 4), range=[(-1, 1), None, (0, 2)]),
        m.histogramdd(p, bins=3, weights=w, density=True), m.histogramdd(p[:, :2], bins=[edges, 2]),
        m.histogram2d(p[:, 0], p[:, 1]), m.histogram2d(p[:, 0], p[:, 1], bins=(3, 2), weights=w),
        m.histogram2d(p[:, 0], p[:, 1], bins=edges, density=True), m.histogram2d(xi, xi[::-1], bins=3))
    with jax.disable_jit():
        want = prog(jnp, pts, w, xi)
    _close(prog(mnp, pts, w, xi), want)
    _close(minixla.jit(lambda *a: prog(mnp, *a))(pts, w, xi), want)
    # explicit edges: exact, also on the hand-off
    _check(lambda m, p, w: (m.histogramdd(p[:, :2], bins=[edges, edges], weights=w),
                            m.histogram2d(p[:, 0], p[:, 2], bins=edges)),
           pts, w, handoff=True)
    for call, text in [(lambda m: m.histogramdd(pts, weights=w[:3]), "one weight for each sample"),
                       (lambda m: m.histogramdd(pts, range=[(0, 1)]), r"range must be a sequence of 3 pairs"),
                       (lambda m: m.histogramdd(pts, bins=[2, 3]), "should be a bin for each dimension")]:
        for m in (jnp, mnp):
            with pytest.raises(ValueError, match=text):
                call(m)
