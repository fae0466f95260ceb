"""``asin``/``acos``/``atan``/``sinh``/``cosh``/``asinh``/``acosh``/``atanh`` (``jnp.arcsin`` ...):
primitives lowered to XLA's own decomposition of the CHLO ops, op for op, so the JAX hand-off is
bit-identical to JAX eager and the LLVM backend is within a few ulp (its exp/log/atan2 round
differently), with special values (±0, ±inf, NaN, the domain edges, overflow thresholds) exact.
f16/bf16 are bit-identical on both backends (sinh/cosh computed in f32, as XLA does)."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp

SPECIAL = np.array([0, -0.0, 1, -1, 0.5, -0.5, 1.5, -1.5, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 3e38,
                    -3e38, 88, 89.4, -89.4, 1e19, 2e19, 1.7e38], np.float32)
GRIDS = {
    "arcsin": np.linspace(-1, 1, 2001), "arccos": np.linspace(-1, 1, 2001),
    "arctan": np.linspace(-50, 50, 2001), "sinh": np.linspace(-89, 89, 2001),
    "cosh": np.linspace(-89, 89, 2001),
    "arcsinh": np.concatenate([np.linspace(-100, 100, 2001), np.geomspace(1e-30, 3e38, 100)]),
    "arccosh": np.concatenate([np.linspace(1, 100, 2001), np.geomspace(1, 3e38, 100)]),
    "arctanh": np.linspace(-1, 1, 2001),
}
#: max ulp of the LLVM backend against JAX eager in f32, measured on these grids
LLVM_ULPS = {"arcsin": 1, "arccos": 1, "arctan": 1, "sinh": 4, "cosh": 4, "arcsinh": 2, "arccosh": 2,
             "arctanh": 4}


def _ulps(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.where(same, 0.0, np.abs(got - want) / spacing)


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_values_against_jax(name):
    x = np.concatenate([GRIDS[name].astype(np.float32), SPECIAL])
    want = np.asarray(getattr(jnp, name)(x))
    np.testing.assert_array_equal(minixla.jit(getattr(mnp, name), backend="jax")(x), want)
    got = minixla.jit(getattr(mnp, name), backend="llvm")(x)
    assert np.nanmax(_ulps(got, want)) <= LLVM_ULPS[name]
    special = slice(len(GRIDS[name]), None)  # exact: zeros, infinities, NaN, thresholds
    exact = ~np.isfinite(want[special]) | (want[special] == 0)
    np.testing.assert_array_equal(got[special][exact], want[special][exact])
    for dt in (np.float16, ml_dtypes.bfloat16):
        xs = x.astype(dt)
        for backend in ("llvm", "jax"):
            got = minixla.jit(getattr(mnp, name), backend=backend)(xs)
            assert got.dtype == xs.dtype
            np.testing.assert_array_equal(got.astype(np.float32),  # (NaN == NaN only in f32)
                                          np.asarray(getattr(jnp, name)(xs)).astype(np.float32))


def test_integers_promote_and_jaxpr_names():
    i = np.arange(-2, 3, dtype=np.int32)
    for name in ("arcsin", "sinh", "arctan"):
        got, want = getattr(mnp, name)(i), getattr(jnp, name)(i)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert "asinh" in str(minixla.make_jaxpr(mnp.arcsinh)(np.float32(1)))
    for alias, name in ("asin", "arcsin"), ("acosh", "arccosh"), ("atanh", "arctanh"):  # Array API names
        assert getattr(mnp, alias)(np.float32(0.75)) == getattr(jnp, alias)(np.float32(0.75)) or alias == "acosh"
    assert mnp.acosh(np.float32(1.5)) == jnp.acosh(np.float32(1.5))


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_grad_and_vmap(name):
    x = np.float32({"arccosh": 1.7}.get(name, 0.3))
    f = lambda v: getattr(mnp, name)(v)  # noqa: E731
    np.testing.assert_allclose(minixla.jit(minixla.grad(f))(x), jax.grad(getattr(jnp, name))(x), rtol=2e-6)
    xs = np.full((3,), x) + np.float32(0.1) * np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(minixla.vmap(f)(xs), jax.vmap(getattr(jnp, name))(xs), rtol=2e-6)
