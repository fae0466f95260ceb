"""``where=``/``initial=``/``promote_integers=`` of the jnp reductions and the NaN-ignoring ones
(``nansum`` ... ``nanargmin``), ``count_nonzero``, ``ptp``, ``average``: each against JAX eager,
eagerly and under jit on both backends. Before, ``all``/``any``/``mean``/``var`` ignored
``where=`` silently (a wrong answer); now it selects the elements that count, as in JAX."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.core import errors
from minixla.testing import check_against_jax

NAN = np.nan
X = np.array([[1.5, -2.0, NAN, 4.0], [-0.0, 3.0, 7.25, -1.0], [NAN, NAN, NAN, NAN]], np.float32)
MASK = np.array([[True, False, True, True], [False, True, True, True], [True, True, False, True]])
ROW_MASK = np.array([True, False, True, True])  # broadcasts over the rows

# (name, kwargs); each runs with axis None and 1
CASES = [
    ("sum", dict(where=MASK)), ("sum", dict(where=ROW_MASK, initial=2.0)),
    ("prod", dict(where=MASK)), ("max", dict(where=MASK, initial=-5.0)),
    ("min", dict(where=ROW_MASK, initial=3.0)), ("mean", dict(where=MASK)),
    ("mean", dict(where=ROW_MASK, keepdims=True)), ("var", dict(where=MASK)),
    ("var", dict(where=MASK, ddof=1)), ("std", dict(where=ROW_MASK, ddof=2)),
    ("all", dict(where=MASK)), ("any", dict(where=~MASK)),
    ("nansum", {}), ("nansum", dict(where=MASK, initial=1.0)), ("nanprod", {}),
    ("nanmax", {}), ("nanmin", dict(keepdims=True)), ("nanmax", dict(initial=0.0)),
    ("nanmean", {}), ("nanmean", dict(where=MASK)), ("nanvar", {}), ("nanvar", dict(ddof=1)),
    ("nanstd", dict(where=ROW_MASK)), ("nanargmax", {}), ("nanargmin", dict(keepdims=True)),
    ("count_nonzero", {}), ("ptp", {}),
]


def _call(np_module, name, axis, kwargs):
    fn = getattr(np_module, name)
    if name == "nanargmax" or name == "nanargmin":
        if axis is None:
            return lambda x: fn(x[:2], axis=axis, **kwargs)  # JAX: -1 only along an axis
    return lambda x: fn(x, axis=axis, **kwargs)


@pytest.mark.parametrize("axis", [None, 1])
@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{'-'.join(k)}" for n, k in CASES])
def test_eager_matches_jax(name, kwargs, axis):
    want = np.asarray(_call(jnp, name, axis, kwargs)(X))
    got = np.asarray(_call(mnp, name, axis, kwargs)(X))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


JIT_CASES = [CASES[i] for i in (0, 3, 5, 8, 10, 12, 15, 19, 21, 23, 26)]


@pytest.mark.parametrize("name,kwargs", JIT_CASES, ids=[f"{n}-{'-'.join(k)}" for n, k in JIT_CASES])
def test_jit_matches_jax_on_both_backends(name, kwargs):
    check_against_jax(_call(mnp, name, 1, kwargs), _call(jnp, name, 1, kwargs), X)


def test_where_on_integers_and_promote_integers():
    i8 = np.array([[100, 100, -7], [1, 2, 3]], np.int8)
    m = np.array([True, True, False])
    for kwargs in (dict(where=m), dict(promote_integers=False), dict(where=m, promote_integers=False)):
        for name in ("sum", "prod"):
            want = getattr(jnp, name)(i8, axis=1, **kwargs)
            got = getattr(mnp, name)(i8, axis=1, **kwargs)
            assert got.dtype == want.dtype, (name, kwargs)
            np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(mnp.max(i8, axis=1, where=m, initial=-128),
                                  jnp.max(i8, axis=1, where=m, initial=-128))
    assert mnp.sum(np.array([True, True]), promote_integers=False).dtype == np.int32
    check_against_jax(lambda x: mnp.mean(x, where=m), lambda x: jnp.mean(x, where=m), i8)


def test_average_forms():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for kwargs in (dict(), dict(axis=1), dict(axis=1, weights=np.array([1.0, 3.0, 0.5], np.float32)),
                   dict(weights=np.ones((2, 3), np.float32) * 2), dict(axis=0, returned=True),
                   dict(axis=1, weights=np.array([1, 2, 3]), returned=True, keepdims=True)):
        want = jnp.average(a, **kwargs)
        got = mnp.average(a, **kwargs)
        for g, w in zip(np.atleast_1d(got) if not isinstance(got, tuple) else got,
                        np.atleast_1d(want) if not isinstance(want, tuple) else want):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(g, w, rtol=1e-6)
    check_against_jax(lambda x, w: mnp.average(x, axis=1, weights=w),
                      lambda x, w: jnp.average(x, axis=1, weights=w), a,
                      np.array([1.0, 0.0, 2.0], np.float32))


def test_variance_with_a_given_mean():
    x = np.array([[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]], np.float32)
    m = np.zeros((2, 1), np.float32)
    np.testing.assert_allclose(mnp.var(x, axis=1, mean=m), jnp.var(x, axis=1, mean=m), rtol=1e-6)
    np.testing.assert_allclose(mnp.nanstd(x, axis=1, mean=m), jnp.nanstd(x, axis=1, mean=m), rtol=1e-6)
    with pytest.raises(errors.ShapeError, match="keepdims=True"):
        mnp.var(x, axis=1, mean=np.zeros(2, np.float32))


def test_errors_like_jax():
    with pytest.raises(ValueError, match="does not have an identity, so to use a where mask"):
        mnp.max(X, where=MASK)
    with pytest.raises(ValueError, match="does not have an identity"):
        jnp.max(X, where=MASK)
    with pytest.raises(ValueError, match="cannot broadcast"):
        mnp.sum(X, where=np.array([True, False]))
    with pytest.raises(ValueError, match="Axis must be specified when shapes of a and weights differ"):
        mnp.average(X, weights=np.ones(4, np.float32))
    with pytest.raises(ValueError, match="Shape of weights must be consistent"):
        mnp.average(X, axis=1, weights=np.ones(3, np.float32))
    with pytest.raises(errors.UnsupportedError, match="out= is not supported"):
        mnp.sum(X, out=np.zeros(()))


def test_traced_mask_under_jit():
    """The mask may be a traced argument (it is data, not a static shape)."""
    f = minixla.jit(lambda x, m: (mnp.mean(x, axis=1, where=m), mnp.nanmax(x, axis=0)))
    got = f(X, MASK)
    want = (jnp.mean(X, axis=1, where=MASK), jnp.nanmax(X, axis=0))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    check_against_jax(lambda x, m: mnp.var(x, axis=0, where=m, ddof=1),
                      lambda x, m: jnp.var(x, axis=0, where=m, ddof=1), X, MASK)
    assert jax.__version__  # (the reference is jax eager; see check_against_jax)
