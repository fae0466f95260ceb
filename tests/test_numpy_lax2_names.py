"""jnp / jnp.linalg names of issue 14: ``polydiv``, ``polyfit``, ``put``, ``mask_indices``,
``einsum_path``, ``linalg.multi_dot``/``cond``/``tensorinv``/``tensorsolve``, on both backends
against JAX, with JAX's errors."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

import minixla as mx
import minixla.numpy as mnp

BACKENDS = ("llvm", "jax")
R = np.random.default_rng(0)


def _close(got, want, exact=False):
    gl, wl = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(gl) == len(wl)
    for g, w in zip(gl, wl):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


_U, _V = np.array([3., -2, 5, 1, 4], np.float32), np.array([2., 1, -1], np.float32)
_PX = np.linspace(-1, 2, 9).astype(np.float32)
_PY = (_PX ** 3 - 2 * _PX + 0.5 + 0.01 * np.sin(7 * _PX)).astype(np.float32)


def _polys(np_):
    return lambda u, v, x, y: (np_.polydiv(u, v), np_.polydiv(v[:2].astype(np.int32), u[:3]), np_.polyfit(x, y, 3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_polydiv_polyfit(backend):
    _close(mx.jit(_polys(mnp), backend=backend)(_U, _V, _PX, _PY), _polys(jnp)(_U, _V, _PX, _PY))


def test_polydiv_polyfit_options_and_errors():
    x, y = _PX, _PY
    _close(mnp.polydiv(_U, _V), jnp.polydiv(_U, _V), exact=True)  # (the same ops in the same order)
    _close(mnp.polydiv(np.array([1., 3, 2]), np.array([1., 1]), trim_leading_zeros=True),
           jnp.polydiv(np.array([1., 3, 2]), np.array([1., 1]), trim_leading_zeros=True))
    y2, w = np.stack([y, 2 * y], 1), np.abs(x) + 1
    fits = lambda np_: lambda x, y, y2, w: (np_.polyfit(x, y2, 2, w=w, cov=True), np_.polyfit(x, y, 2, full=True),
                                            np_.polyfit(x, y, 1, cov="unscaled"))
    _close(mx.jit(fits(mnp))(x, y, y2, w), fits(jnp)(x, y, y2, w))  # (one compile: cheaper than op by op)
    for bad, err in (((x, y, -1), ValueError), ((x[:, None], y, 1), TypeError), ((x[:3], y, 1), TypeError)):
        with pytest.raises(err):
            mnp.polyfit(*bad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_put_and_mask_indices(backend):
    a = np.arange(12.).reshape(3, 4).astype(np.float32)
    ind = np.array([1, 13, -1, 5])
    puts = lambda np_: lambda a: [np_.put(a, ind, v, mode=mode, inplace=False) for mode in (None, "clip", "wrap")
                                  for v in (np.array([9., 8.], np.float32), np.float32(5))]
    _close(mx.jit(puts(mnp), backend=backend)(a), puts(jnp)(a), exact=True)
    with pytest.raises(ValueError, match="cannot modify arrays in-place"):
        mnp.put(a, ind, 1.0)
    with pytest.raises(ValueError, match="mode should be one of 'wrap' or 'clip'"):
        mnp.put(a, ind, 1.0, mode="bad", inplace=False)
    with pytest.raises(NotImplementedError):
        mnp.put(a, ind, 1.0, mode="raise", inplace=False)
    _close(mnp.mask_indices(3, mnp.triu, 1), jnp.mask_indices(3, jnp.triu, 1), exact=True)
    _close(mx.jit(lambda: mnp.mask_indices(4, mnp.tril, -1, size=6), backend=backend)(),
           jnp.mask_indices(4, jnp.tril, -1, size=6), exact=True)


def test_einsum_path():
    ops = (np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)))
    for opt in ("auto", True, False, "greedy"):
        got, want = mnp.einsum_path("ij,jk,kl->il", *ops, optimize=opt), jnp.einsum_path("ij,jk,kl->il", *ops, optimize=opt)
        assert got[0] == want[0] and str(got[1]) == str(want[1])


_A = [R.normal(size=s).astype(np.float32) for s in [(5,), (5, 3), (3, 7), (7, 2)]]
_M = R.normal(size=(2, 3, 3)).astype(np.float32)
_T = R.normal(size=(2, 3, 3, 2)).astype(np.float32)
_TA, _TB = R.normal(size=(6, 2, 3)).astype(np.float32), R.normal(size=(6,)).astype(np.float32)


def _linalg(la):
    return lambda A, m, t, a, b: (la.multi_dot(A), la.multi_dot(A[1:]), la.cond(m), la.cond(m, 1),
                                  la.tensorinv(t, 2), la.tensorsolve(a, b))


@pytest.mark.parametrize("backend", BACKENDS)
def test_linalg_compositions(backend):
    _close(mx.jit(_linalg(mnp.linalg), backend=backend)(_A, _M, _T, _TA, _TB), _linalg(jnp.linalg)(_A, _M, _T, _TA, _TB))


def test_linalg_options():
    la = mnp.linalg
    singular, b2 = np.array([[1., 2], [2, 4]], np.float32), R.normal(size=(2, 3)).astype(np.float32)
    opts = lambda la: lambda A, m, s, a, b: (
        la.multi_dot([A[1], A[2], A[3][:, 0]]), [la.cond(m, p) for p in (2, -2, -1, np.inf, "fro")],
        la.cond(s, 1), la.tensorsolve(a, b, axes=(0,)))
    _close(mx.jit(opts(la))(_A, _M, singular, _TA, b2), opts(jnp.linalg)(_A, _M, singular, _TA, b2))


def test_linalg_errors():
    la = mnp.linalg
    with pytest.raises(ValueError, match="multi_dot requires at least two arrays"):
        la.multi_dot([np.ones((2, 2))])
    with pytest.raises(ValueError, match="last dimension of each array must match"):
        la.multi_dot([np.ones((2, 3)), np.ones((2, 2))])
    with pytest.raises(ValueError, match="must be at least 2D"):
        la.cond(np.ones(3))
    with pytest.raises(ValueError, match="array must be square"):
        la.cond(np.ones((2, 3)), 1)
    with pytest.raises(ValueError, match="ind must be a positive integer"):
        la.tensorinv(np.ones((2, 2)), 0)
    with pytest.raises(ValueError, match="tensorinv is only possible"):
        la.tensorinv(np.ones((2, 3)), 1)
    with pytest.raises(ValueError, match="leading shape of a must match shape of b"):
        la.tensorsolve(np.ones((2, 3, 6)), np.ones(6))
