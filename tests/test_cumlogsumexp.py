"""lax.cumlogsumexp, an associative_scan of logaddexp (associative_scan itself: test_lax_composites.py):
values against JAX eager (cumlogsumexp to a few ulp: JAX lowers it to a reduce-window that XLA
rewrites), infinities and NaN, pytrees and reverse, one program under jit on both backends, the
gradient with JAX's logaddexp JVP (+inf and -inf entries), vmap, errors."""
import jax
import numpy as np
import pytest

import minixla
import minixla.lax as mlax
from minixla.core import errors
from minixla.testing import check_against_jax

rng = np.random.default_rng(0)
X = (3 * rng.standard_normal((3, 8))).astype(np.float32)
SPECIAL = np.array([-np.inf, -np.inf, 1.0, np.inf, 2.0, np.nan, 0.0], np.float32)


def test_values_like_jax():
    for x, axis, rev in ((X[:, :7], 1, True), (SPECIAL, 0, False)):
        with jax.disable_jit():
            want = jax.lax.cumlogsumexp(x, axis, rev)
        got = mlax.cumlogsumexp(x, axis, rev)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # (associative_scan itself: tests/test_lax_composites.py)


def test_jit_grad_vmap_like_jax():
    check_against_jax(lambda x, s: (mlax.cumlogsumexp(x, 1), mlax.cumlogsumexp(s, 0, reverse=True)),
                      lambda x, s: (jax.lax.cumlogsumexp(x, 1), jax.lax.cumlogsumexp(s, 0, reverse=True)),
                      X, SPECIAL[:5], rtol=1e-6, atol=1e-6)
    for x in (np.array([-np.inf, 0.5, 1.0, -2, 3], np.float32), np.array([0.5, np.inf, 1.0, -np.inf], np.float32)):
        got = minixla.grad(lambda v: (mlax.cumlogsumexp(v, reverse=True) ** 2).sum())(x)
        want = jax.grad(lambda v: (jax.lax.cumlogsumexp(v, reverse=True) ** 2).sum())(x)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    got = minixla.vmap(lambda r: mlax.cumlogsumexp(r))(X)
    np.testing.assert_allclose(got, jax.vmap(jax.lax.cumlogsumexp)(X), rtol=1e-6, atol=1e-6)


def test_errors():
    with pytest.raises(TypeError, match="fn argument should be callable"):
        mlax.associative_scan(1, X)
    with pytest.raises(ValueError, match="same first dimension"):
        mlax.associative_scan(lambda a, b: a, (X, X[:2]))
    with pytest.raises(errors.DTypeError, match="cumlogsumexp does not accept dtype int32"):
        mlax.cumlogsumexp(np.arange(3, dtype=np.int32))
