"""Sort-based jax.numpy functions (quantiles, searchsorted, digitize, histogram, interp) and the
static-size ones (nonzero, argwhere, unique, partition): values, dtypes and shapes against JAX
eager (op by op, ``jax.disable_jit()``: jnp.quantile is itself jitted, and XLA fuses its
``low*lw + high*hw`` into an FMA, 1 ulp away from eager), eagerly bit-for-bit over the options;
then one program per backend under jit, grad and vmap, and the errors."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.core import errors
from minixla.testing import check_against_jax

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 5)).astype(np.float32)
AN = A.copy()
AN[1, 2] = np.nan
AN[2, :] = np.nan
Q = np.array([0.0, 0.25, 0.5, 1.0], np.float32)
S = np.array([0.0, 1, 1, 2, np.inf, np.nan], np.float32)
V = np.array([-1, 0, 1, 1.5, 2, np.inf, np.nan, -0.0, 5], np.float32)
XP = np.array([0.0, 1, 2, 4], np.float32)
FP = np.array([1.0, 3, 2, 0], np.float32)
XQ = np.array([-1, 0, 0.5, 1, 3, 4, 5, np.nan], np.float32)
M = np.array([[0, 1, 0, 2], [3, 0, 0, 4], [0, 0, 5, 0]], np.int32)
F = np.array([3.0, 1, np.nan, 1, -0.0, 0, np.nan, 2], np.float32)
R = np.array([[1, 2], [0, 5], [1, 2], [0, 1]], np.int32)


def _leaves(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _same(got, want, exact=True):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, equal_nan=True)


def _eager_cases():
    variants = [dict(axis=None), dict(axis=1, keepdims=True), dict(axis=(0, 1))]
    for i, (name, args) in enumerate([("quantile", (A, Q)), ("quantile", (AN, 0.3)), ("nanquantile", (AN, Q)),
                                      ("nanquantile", (A, 0.7)), ("quantile", (AN[:2], Q))]):
        yield name, args, dict(method=("linear", "lower", "higher", "nearest", "midpoint")[i], **variants[i % 3])
    yield from [("median", (M,), dict(axis=0)), ("nanmedian", (AN,), dict(axis=1)),
                ("percentile", (A, np.array([10, 50])), dict(axis=0)), ("nanpercentile", (AN, 30.0), {}),
                ("searchsorted", (S, V), {}), ("searchsorted", (S, V), dict(side="right")),
                ("searchsorted", (S[:1], V), {}),
                ("searchsorted", (np.array([5, 1, 3, 2]), np.arange(-1, 7)), dict(sorter=np.array([1, 3, 2, 0]))),
                ("digitize", (XQ, np.array([0.0, 1, 2.5, 4])), {}),
                ("digitize", (XQ, np.array([4.0, 2.5, 1, 0])), dict(right=True)),
                ("histogram", (A, 4, (-1, 1)), dict(density=True)),
                ("histogram", (A, np.array([-2, 0, 0.5, 3.0])), dict(weights=A * 2)),
                ("histogram_bin_edges", (np.ones(3), 3), {}),
                ("interp", (XQ, XP, FP), dict(left=-5.0, right="extrapolate")), ("interp", (XQ, XP, FP), dict(period=3.0)),
                ("argwhere", (3,), {}), ("nonzero", (np.zeros((0, 3)),), {}), ("nonzero", (M,), {}),
                ("nonzero", (M,), dict(size=8, fill_value=(7, 9))), ("argwhere", (M,), dict(size=3)),
                ("flatnonzero", (M,), dict(size=8, fill_value=-1)), ("where", (M,), dict(size=5, fill_value=-1)),
                ("unique", (R, True, True, True), dict(axis=0)),
                ("unique", (R, True, True, True), dict(axis=1, size=3, fill_value=9)),
                ("unique", (F,), {}), ("unique", (F, True, True, True), dict(size=2)),
                ("unique", (M, False, True, True), dict(size=7, fill_value=0)),
                ("unique", (np.array([True, False, True]), True, False, True), dict(equal_nan=False)),
                ("unique_all", (F,), {}), ("unique_counts", (M,), dict(size=6, fill_value=-2)),
                ("partition", (A, 3), {}), ("argpartition", (A.T, 0), dict(axis=0)),
                ("argpartition", (M[1].astype(np.uint8), -1), {})]


def test_eager_bit_identical_to_jax_eager():
    # every eighth case in CI (each op-by-op JAX reference compiles its ops; the jit test below
    # covers every function), all with MINIXLA_DEEP_FUZZ=1
    cases = list(_eager_cases())
    for name, args, kwargs in cases if os.environ.get("MINIXLA_DEEP_FUZZ") else cases[::8]:
        got = getattr(mnp, name)(*args, **kwargs)
        with jax.disable_jit():
            want = getattr(jnp, name)(*args, **kwargs)
        try:
            # (histogram's edges come from linspace, which rounds 1 ulp differently op by op)
            _same(tuple(got) if isinstance(got, tuple) else got, tuple(want) if isinstance(want, tuple) else want,
                  exact=not name.startswith("histogram"))
        except AssertionError as e:
            raise AssertionError(f"{name} {kwargs}: {e}") from None


def _program(np_):
    def f(a, an, s, v, xq, fp, m):
        return (np_.quantile(a, np.array([0.1, 0.5, 0.9], np.float32), axis=1),
                np_.nanpercentile(an, 40.0, axis=0, method="nearest", keepdims=True),
                np_.searchsorted(s, v, side="right"), np_.digitize(a, np.array([-1.0, 0, 1])),
                np_.histogram(a, bins=4, range=(-1.0, 1.0))[0],
                np_.interp(xq, XP, fp), np_.nonzero(m, size=5, fill_value=-1),
                np_.unique(m, return_inverse=True, return_counts=True, size=4, fill_value=0),
                np_.argpartition(a, 2))
    return f


def test_one_program_under_jit_on_both_backends():
    check_against_jax(_program(mnp), _program(jnp), A, AN, S, V[:6], XQ, FP, M, rtol=2e-6, atol=1e-6)


def test_grad_and_vmap_like_jax():
    def loss(np_):
        return lambda a, f: (np_.sum(np_.quantile(a, np.array([0.3, 0.8], np.float32), axis=1))
                             + np_.nanmedian(a) + np_.sum(np_.interp(XQ[:7], XP, f) ** 2))
    got = minixla.grad(loss(mnp), argnums=(0, 1))(AN, FP)
    want = jax.grad(loss(jnp), argnums=(0, 1))(AN, FP)
    _same(got, want, exact=False)
    batched = minixla.vmap(lambda a, q: (mnp.median(a), mnp.searchsorted(mnp.sort(a), q),
                                         mnp.nonzero(a > 0, size=3)[0]))(A, A[:, :2])
    want = jax.vmap(lambda a, q: (jnp.median(a), jnp.searchsorted(jnp.sort(a), q),
                                  jnp.nonzero(a > 0, size=3)[0]))(A, A[:, :2])
    _same(batched, want, exact=False)


def test_errors_like_jax():
    with pytest.raises(errors.ConcretizationTypeError, match="size argument of jnp.nonzero"):
        minixla.jit(mnp.nonzero)(M)
    with pytest.raises(errors.ConcretizationTypeError, match="size argument of jnp.nonzero"):
        minixla.jit(lambda c: mnp.where(c))(M)
    with pytest.raises(TypeError, match="where requires ndarray or scalar arguments"):
        mnp.where(M, 1)
    with pytest.raises(ValueError, match="cannot be used in three-term where"):
        mnp.where(M, 1, 2, size=3)
    with pytest.raises(errors.ConcretizationTypeError, match="first argument of jnp.unique"):
        minixla.jit(mnp.unique)(M)
    with pytest.raises(ValueError, match="0d arrays"):
        mnp.nonzero(3)
    with pytest.raises(ValueError, match="method can only be"):
        mnp.quantile(A, 0.5, method="cubic")
    with pytest.raises(ValueError, match="q must be have rank <= 1"):
        mnp.quantile(A, np.ones((2, 2)))
    with pytest.raises(ValueError, match="a should be 1-dimensional"):
        mnp.searchsorted(A, 1.0)
    with pytest.raises(ValueError, match="expected 'left' or 'right'"):
        mnp.searchsorted(S, 1.0, side="middle")
    with pytest.raises(ValueError, match="bins must be a 1-dimensional"):
        mnp.digitize(A, A)
    with pytest.raises(ValueError, match="one-dimensional arrays of equal size"):
        mnp.interp(XQ, XP, FP[:3])
    with pytest.raises(ValueError, match="fill_value must be specified"):
        mnp.unique(np.zeros(0), size=2)
    with pytest.raises(ValueError, match="weights should have the same shape"):
        mnp.histogram(A, weights=A[0])
