"""lax functions composed from primitives (minixla/lax/composites.py), against jax.lax."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.lax as ml

RNG = np.random.RandomState(0)
X = RNG.randn(7, 3).astype(np.float32)


def _affine(p, q):  # (a, b) o (c, d) = (a*c, b*c + d): associative, not commutative
    return (p[0] * q[0], p[1] * q[0] + q[1])


@pytest.mark.parametrize("n", [1, 5, 8])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_eager(n, reverse):
    xs = X[:n]
    np.testing.assert_allclose(ml.associative_scan(ml.add, xs, reverse=reverse),
                               jax.lax.associative_scan(jax.lax.add, xs, reverse=reverse),
                               rtol=1e-5, atol=1e-5)
    got = ml.associative_scan(_affine, (xs, xs + 1), reverse=reverse)
    ref = jax.lax.associative_scan(_affine, (xs, xs + 1), reverse=reverse)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


def test_associative_scan_jit_grad_vmap_axis():
    f = minixla.jit(lambda v: ml.associative_scan(_affine, (v, v + 1), axis=1))
    for g, r in zip(f(X), jax.lax.associative_scan(_affine, (X, X + 1), axis=1)):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(ml.associative_scan(ml.max, X, axis=-1),
                                  jax.lax.associative_scan(jax.lax.max, X, axis=-1))
    loss = lambda lax: lambda v: (lax.associative_scan(lax.mul, v) ** 2).sum()  # noqa: E731
    np.testing.assert_allclose(minixla.grad(loss(ml))(X[:5]), jax.grad(loss(jax.lax))(X[:5]),
                               rtol=1e-4)
    np.testing.assert_allclose(minixla.vmap(lambda v: ml.associative_scan(ml.add, v))(X),
                               jax.vmap(lambda v: jax.lax.associative_scan(jax.lax.add, v))(X),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="same first dimension"):
        ml.associative_scan(ml.add, (X, X[:3]))


@pytest.mark.parametrize("padding", ["SAME", "VALID", ((1, 1), (0, 2))])
def test_conv_transpose(padding):
    lhs = RNG.randn(2, 5, 5, 3).astype(np.float32)
    rhs = RNG.randn(3, 3, 3, 4).astype(np.float32)
    ref = jax.lax.conv_transpose(lhs, rhs, (2, 2), padding)
    got = minixla.jit(lambda a, b: ml.conv_transpose(a, b, (2, 2), padding))(lhs, rhs)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    rhs_t = RNG.randn(3, 3, 4, 3).astype(np.float32)
    np.testing.assert_allclose(
        ml.conv_transpose(lhs, rhs_t, (2, 2), padding, rhs_dilation=(1, 2), transpose_kernel=True),
        jax.lax.conv_transpose(lhs, rhs_t, (2, 2), padding, rhs_dilation=(1, 2),
                               transpose_kernel=True), rtol=1e-4, atol=1e-4)


def test_conv_transpose_consistent_padding():
    # use_consistent_padding: explicit pairs are the forward conv's padding (k_eff - p - 1 pads)
    lhs = (RNG.randint(-8, 9, (1, 2, 4)) / 4).astype(np.float32)  # NCH, exact sums
    rhs = (RNG.randint(-8, 9, (3, 2, 3)) / 4).astype(np.float32)  # OIH
    dn = ("NCH", "OIH", "NCH")
    for pad in [((0, 0),), ((1, 2),), ((2, 0),)]:
        kw = dict(rhs_dilation=(2,), dimension_numbers=dn, use_consistent_padding=True)
        ref = jax.lax.conv_transpose(lhs, rhs, (2,), pad, **kw)
        np.testing.assert_array_equal(minixla.jit(lambda a, b: ml.conv_transpose(a, b, (2,), pad, **kw))(lhs, rhs),
                                      ref)
        np.testing.assert_array_equal(ml.conv_transpose(lhs, rhs, (2,), pad, **kw), ref)


def test_reduce_monoids_and_errors():
    i = RNG.randint(-9, 9, (4, 5)).astype(np.int32)
    for ours, theirs, init, x in [
            (jax.lax.add, jax.lax.add, 0.0, X), (ml.mul, jax.lax.mul, 1.0, X),
            (jax.lax.max, jax.lax.max, -np.inf, X), (ml.min, jax.lax.min, np.int32(2**31 - 1), i),
            (jax.lax.bitwise_or, jax.lax.bitwise_or, np.int32(0), i)]:
        np.testing.assert_allclose(ml.reduce(x, init, ours, (0,)),
                                   jax.lax.reduce(x, init, theirs, (0,)), rtol=1e-6)
    a, b = ml.reduce((X, i), (0.0, np.int32(0)), ml.add, (1,))
    np.testing.assert_allclose(a, X.sum(1), rtol=1e-6)
    np.testing.assert_array_equal(b, i.sum(1))
    with pytest.raises(NotImplementedError, match="standard monoid"):
        ml.reduce(X, 1.0, ml.add, (0,))  # 1 is not add's identity
    with pytest.raises(NotImplementedError, match="standard monoid"):
        ml.reduce(X, 0.0, lambda a, b: a + 2 * b, (0,))


def test_conveniences():
    np.testing.assert_array_equal(ml.square(X), jax.lax.square(X))
    np.testing.assert_array_equal(ml.reciprocal(X), jax.lax.reciprocal(X))
    assert ml.full_like(X, 2, dtype=np.int32).dtype == jax.lax.full_like(X, 2, dtype=jnp.int32).dtype
    y = RNG.randn(2, 3, 4).astype(np.float32)
    assert ml.collapse(y, 1).shape == jax.lax.collapse(y, 1).shape == (2, 12)
    assert ml.collapse(y, 0, 2).shape == jax.lax.collapse(y, 0, 2).shape
    assert ml.broadcast_to_rank(X, 4).shape == jax.lax.broadcast_to_rank(X, 4).shape
    w = RNG.randn(2, 4, 5).astype(np.float32)
    np.testing.assert_allclose(ml.batch_matmul(y, w), jax.lax.batch_matmul(y, w), rtol=1e-5)
    z = np.zeros((3, 4), np.float32)
    np.testing.assert_array_equal(ml.dynamic_update_index_in_dim(z, np.ones(4, np.float32), 1, 0),
                                  jax.lax.dynamic_update_index_in_dim(z, np.ones(4), 1, 0))
    np.testing.assert_array_equal(
        ml.dynamic_update_slice_in_dim(z, np.ones((3, 2), np.float32), 5, 1),
        jax.lax.dynamic_update_slice_in_dim(z, np.ones((3, 2), np.float32), 5, 1))
