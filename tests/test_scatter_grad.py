"""JVP/VJP of the scatters that do not add (overwrite, multiply, min/max) against JAX, with
colliding indices (only one update lands: JAX's scatter-of-ids rule), ties (shared equally)
and dropped out-of-bounds windows."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

SDN = lax.ScatterDimensionNumbers((1,), (0,), (0,))
JSDN = jax.lax.ScatterDimensionNumbers((1,), (0,), (0,))
X = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
# rows 1 and 3 hit twice, one window out of bounds (dropped)
IDX = np.array([[1], [3], [1], [0], [3], [7]], np.int32)
U = (np.arange(18, dtype=np.float32).reshape(6, 3) - 7) / 3
U_TIES = np.array([[9, 0, 1], [2, 2, 2], [9, 5, 1], [0, 1, 2], [2, 2, 0], [1, 1, 1]], np.float32)
X_TIES = np.array([[0, 1, 2], [9, 5, 0], [3, 3, 3], [2, 2, 2]], np.float32)


def _check(name, x, u, idx=IDX, unique=False, wrt=(0, 2)):
    """jvp and grad with respect to the operand (0) and/or the updates (2), against JAX's."""
    def make(lib, dn):
        def f(*args):
            full = dict(zip(wrt, args))
            return getattr(lib, name)(full.get(0, x), idx, full.get(2, u), dn, unique_indices=unique)
        return f
    ours, theirs = make(lax, SDN), make(jax.lax, JSDN)
    r = np.random.default_rng(0)
    args = tuple(x if a == 0 else u for a in wrt)
    tans = tuple(r.normal(size=a.shape).astype(np.float32) for a in args)
    want = jax.jit(lambda *a: jax.jvp(theirs, a, tans))(*args)
    np.testing.assert_allclose(minixla.jvp(ours, args, tans)[1], want[1], rtol=1e-6, atol=1e-6)
    ct = r.normal(size=x.shape).astype(np.float32)
    nums = tuple(range(len(wrt)))
    want_g = jax.jit(jax.grad(lambda *a: (theirs(*a) * ct).sum(), nums))(*args)
    got_g = minixla.jit(minixla.grad(lambda *a: (ours(*a) * ct).sum(), nums))(*args)
    for g, w in zip(got_g, want_g):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_overwriting_scatter_with_colliding_indices():
    _check("scatter", X, U)


def test_overwriting_scatter_with_unique_indices_and_its_transpose():
    idx = np.array([[2], [0]], np.int32)
    _check("scatter", X, U[:2], idx=idx, unique=True)
    f = lambda x, u: lax.scatter(x, idx, u, SDN, unique_indices=True)  # noqa: E731
    ct = np.ones((4, 3), np.float32)
    got = minixla.linear_transpose(f, X, U[:2])(ct)
    want = jax.linear_transpose(lambda x, u: jax.lax.scatter(x, idx, u, JSDN, unique_indices=True), X, U[:2])(ct)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", ["scatter_max", "scatter_min"])
def test_scatter_extrema_share_ties(name):
    _check(name, X_TIES, U_TIES)


def test_scatter_mul_in_the_operand_and_with_unique_indices():
    _check("scatter_mul", X, U, wrt=(0,))
    _check("scatter_mul", X, U[:2], idx=np.array([[2], [0]], np.int32), unique=True)
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        minixla.grad(lambda u: lax.scatter_mul(X, IDX, u, SDN).sum())(U)


@pytest.mark.parametrize("name", ["scatter_max", "scatter_min"])
def test_scatter_extrema_nan_results_have_zero_tangent(name):
    # the grad fuzzer (seed 9621): x.at[0].min(2) with a NaN in x. No contender equals a NaN
    # result, so JAX's rule gives 0 there; dividing by the count of winners gave 0/0 = NaN.
    x = X_TIES.copy()
    x[1, 2] = x[3, 0] = np.nan
    u = U_TIES.copy()
    u[0, 1] = np.nan
    _check(name, x, u)
    _check(name, x, u, wrt=(0,))


@pytest.mark.parametrize("shape,index", [((0, 0), np.array([0, 0, -1], np.int32)), ((3,), slice(2, 2)),
                                         ((2, 0, 3), (0, slice(None)))])
def test_multiply_into_an_empty_slice_is_no_scatter(shape, index):
    # JAX returns x when the indexed slice is empty, before any scatter: grad of a non-unique
    # .multiply is then defined (the fuzzer's grad mode: minixla raised scatter_mul's error)
    def f(np_):
        return lambda x, v: (x.at[index].multiply(v) * 2).sum() + v * 3
    x, v = np.zeros(shape, np.float32), np.float32(2)
    want = jax.grad(f(jnp), argnums=(0, 1))(x, v)
    for got in (minixla.grad(f(mnp), argnums=(0, 1))(x, v), minixla.jit(minixla.grad(f(mnp), argnums=(0, 1)))(x, v)):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_scatter_max_grad_of_bfloat16_compiles(backend):
    # the grad fuzzer (seed 9641): the JVP's gathers in JAX's formula need an explicit fill
    # (NaN, JAX's default); a None reached the gather's lowering of a bf16 program and raised
    x = (np.arange(5, dtype=np.float32).reshape(5, 1, 1) - 2).astype(jnp.bfloat16)

    def f(np_):
        return lambda v: (v.at[0].max(-1.5).astype(np_.float32) * 2).sum()
    got = minixla.jit(minixla.grad(f(mnp)), backend=backend)(x)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(jax.grad(f(jnp))(x), np.float32))
