"""Fresh-user findings of issue 14 (JAX programs as they are): ``pow`` with an integer
exponent (``jax.lax.pow(f32, i32)``, ``0.9 ** step`` with an int32 step, what every ported Adam
binds) through minixla.lax, minixla.numpy and the JAX front end, with JAX's dtype rules,
derivative and values; JAX's total-order comparisons ``eq_to``/``le_to``/``lt_to`` (bound by
``jnp.searchsorted``, ``digitize``, ``interp``, ``histogram``) through the JAX front end."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

import minixla
import minixla.lax as L
import minixla.numpy as mnp
from minixla.core import errors

X = np.array([0.0, 0.5, -2.0, 3.0], np.float32)
T = np.array([0, 1, -1, 3], np.int32)
U = np.array([0, 1, 2, 200], np.uint8)


def _f(np_, pow_, operator=True):
    def f(x, t, u):
        # a Python float base, an int32 and a uint8 exponent, through ** (tracers only: eagerly
        # minixla's arrays are NumPy's), power, pow (its alias), lax.pow (also in float16), float_power
        p = (lambda a, b: a ** b) if operator else np_.power
        return (p(0.9, t) + p(x, t) + np_.pow(x, u) + pow_(x, t)
                + pow_(x.astype(np.float16), t).astype(np.float32) + np_.float_power(x, t))
    return f


def test_pow_integer_exponent_values_everywhere():
    want = jax.jit(_f(jnp, jax.lax.pow))(X, T, U)
    np.testing.assert_array_equal(np.asarray(_f(mnp, L.pow, operator=False)(X, T, U)), want)  # eager
    f, jaxf = _f(mnp, L.pow), _f(jnp, jax.lax.pow)
    for backend in ("llvm", "jax"):
        np.testing.assert_array_equal(minixla.jit(f, backend=backend)(X, T, U), want)
        np.testing.assert_array_equal(minixla.jit(jaxf, frontend="jax", backend=backend)(X, T, U), want)
    # the exponents stay integers in the jaxpr, as in JAX's: only float_power converts one
    text = str(minixla.make_jaxpr(f)(X, T, U))
    assert text.count(" = pow ") == 6 and text.count("new_dtype=float32 weak_type=False] c") == 1, text


def test_pow_integer_exponent_grad_vmap_and_dtype_rules():
    # d/dx x**t at x = 0: 0 for t = 0 (not NaN), 1 for t = 1, -inf for t = -1, as JAX
    g = lambda x, t: jnp.sum(jax.lax.pow(x, t))
    gm = lambda x, t: mnp.sum(L.pow(x, t))
    want = jax.grad(g)(X, T)
    np.testing.assert_array_equal(minixla.grad(gm)(X, T), want)
    np.testing.assert_array_equal(minixla.jit(minixla.grad(gm))(X, T), want)
    np.testing.assert_array_equal(minixla.jit(jax.grad(g), frontend="jax")(X, T), want)
    np.testing.assert_array_equal(minixla.vmap(L.pow, in_axes=(None, 0))(np.float32(2), T),
                                  jax.vmap(jax.lax.pow, in_axes=(None, 0))(np.float32(2), T))
    assert L.pow(X, T).dtype == np.float32 and L.pow(np.float16(X), U).dtype == np.float16
    # JAX's TypeErrors: an integer base, a bool exponent, two different float dtypes
    for x, y in [(T, T), (X, np.ones(4, bool)), (X, np.float16(X)), (np.float16(X), 2.5), (2, X)]:
        with pytest.raises(TypeError):
            jax.lax.pow(x, y)
        with pytest.raises(TypeError):  # eagerly JAX's own op runs
            L.pow(x, y)
        with pytest.raises(errors.DTypeError, match="pow"):
            minixla.make_jaxpr(L.pow)(x, y)


def test_total_order_comparisons_import_as_xla_totalorder():
    from jax._src.lax import lax as jax_lax_internal  # (eq_to_p & co. are not public)
    nan = np.float32(np.nan)
    other_nan = np.uint32(0x7FC00001).view(np.float32)
    v = np.array([-nan, -np.inf, -1, -0.0, 0.0, 1, np.inf, nan, other_nan], np.float32)
    a, b = np.meshgrid(v, v, indexing="ij")
    prims = (jax_lax_internal.eq_to_p, jax_lax_internal.le_to_p, jax_lax_internal.lt_to_p)
    # float32 pairs, a float16 row against a column (size-1 broadcast), int32, uint8 and bool
    i, u = np.arange(-2, 3, dtype=np.int32), np.array([0, 1, 255], np.uint8)
    bl = np.array([False, True])

    def f(a, b, h, i, u, bl):
        out = []
        for p in prims:
            out += [p.bind(a, b), p.bind(h[None, :], h[:, None]), p.bind(i[:, None], i[None, :]),
                    p.bind(u[:, None], u[None, :]), p.bind(bl[:, None], bl[None, :])]
        return out
    args = (a, b, v.astype(np.float16), i, u, bl)
    want = jax.jit(f)(*args)
    for backend in ("llvm", "jax"):
        for got, w in zip(minixla.jit(f, frontend="jax", backend=backend)(*args), want):
            np.testing.assert_array_equal(got, w)


def test_searchsorted_digitize_interp_histogram_with_the_jax_front_end():
    xs = np.array([-3.0, -0.0, 0.0, 0.5, 2.0, np.inf], np.float32)
    q = np.array([-np.inf, -0.0, 0.0, 0.25, 0.5, 3.0, np.nan], np.float32)
    data = np.array([0.1, 0.4, 0.4, 0.9, -1.0, 2.5], np.float32)

    def f(xs, q, data):
        return (jnp.searchsorted(xs, q, side="right"), jnp.digitize(q, xs, right=True),
                jnp.interp(q[:-1], xs[:-1], xs[:-1] * 2 + 1),
                *jnp.histogram(data, bins=4, range=(0.0, 1.0)))
    want = jax.jit(f)(xs, q, data)
    for backend in ("llvm", "jax"):
        for got, w in zip(minixla.jit(f, frontend="jax", backend=backend)(xs, q, data), want):
            np.testing.assert_array_equal(got, w)


def test_jax_typed_keys_as_eager_control_flow_operands():
    import minixla.random as mr
    jk = jax.random.key(0)

    def programs(lax_, random):
        split0 = lambda k: random.split(k)[0]
        data = lambda k: random.key_data(k) if isinstance(k, (mr.PRNGKeyArray, jax.Array)) else k
        return [
            lambda k: lax_.scan(lambda c, _: (split0(c), random.uniform(c, ())), k, None, length=3),
            lambda k: lax_.scan(lambda c, x: (c + random.uniform(x, ()), None), 0.0, random.split(k, 3))[0],
            lambda k: lax_.map(lambda x: random.uniform(x, ()), random.split(k, 2)),
            lambda k: data(lax_.cond(True, split0, lambda k: random.split(k)[1], k)),
            lambda k: data(lax_.switch(1, [split0, lambda k: random.split(k)[1]], k)),
            lambda k: data(lax_.fori_loop(0, 3, lambda i, k: split0(k), k)),
            lambda k: data(lax_.fori_loop(np.int32(0), np.int32(3), lambda i, k: split0(k), k)),
            lambda k: data(lax_.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, split0(c[1])), (0, k))[1]),
        ]
    # JAX's values in one jax.jit (one compile; the same bits as eagerly: uniform is jitted in JAX)
    wants = jax.jit(lambda k: [jax.tree_util.tree_map(
        lambda x: jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x, p(k))
        for p in programs(jax.lax, jax.random)])(jk)
    for got_fn, want in zip(programs(L, mr), wants):
        want = jax.tree_util.tree_leaves(want)
        # a JAX typed key, eagerly (minixla's own keys took this path already: a pytree)
        got = jax.tree_util.tree_leaves(jax.tree_util.tree_map(
            lambda x: mr.key_data(x) if isinstance(x, mr.PRNGKeyArray) else x, got_fn(jk),
            is_leaf=lambda x: isinstance(x, mr.PRNGKeyArray)))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
