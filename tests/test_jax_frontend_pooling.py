"""Window reductions (``lax.reduce_window`` -> the ``reduce_window_sum/max/min`` primitives ->
HLO ``reduce-window``), which JAX programs use for pooling: against JAX eager bit for bit on both
backends and the HLO evaluator (strides, SAME/explicit padding, base and window dilation, NaN,
-0.0, ints), under minixla's grad and vmap, and a ResNet block with max and average pooling
imported through the JAX front end, matching ``jax.jit``."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.hlo.evaluator import evaluate

BACKENDS = ("llvm", "jax")
MONOIDS = {"sum": (0.0, lax.add, jax.lax.add), "max": (-np.inf, lax.max, jax.lax.max),
           "min": (np.inf, lax.min, jax.lax.min)}
WINDOWS = [  # window, strides, padding, base dilation, window dilation (NHWC)
    ((1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),                       # max_pool 2x2
    ((1, 3, 3, 1), (1, 1, 1, 1), "SAME", None, None),                         # 3x3 "same" pooling
    ((1, 2, 3, 1), (1, 2, 1, 1), ((0, 0), (1, 2), (0, 1), (0, 0)), (1, 2, 1, 1), (1, 1, 2, 1)),
]


def _x(dtype=np.float32):
    x = np.random.default_rng(0).normal(size=(2, 7, 6, 3)) * 4
    x = x.astype(dtype)
    if x.dtype.kind == "f":
        x[0, 0, 0, 0], x[1, 2, 3, 1], x[0, 4, 4, 2] = -0.0, np.nan, np.inf
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("monoid", sorted(MONOIDS))
def test_reduce_window_matches_jax_bit_for_bit(monoid, backend):
    init, ours, theirs = MONOIDS[monoid]
    for dtype in (np.float32, np.int32):
        x = _x(dtype)
        init_d = init if dtype == np.float32 else {"sum": 0, "max": np.iinfo(dtype).min,
                                                   "min": np.iinfo(dtype).max}[monoid]

        def f(x):
            return [lax.reduce_window(x, init_d, ours, *w) for w in WINDOWS]
        want = [np.asarray(jax.lax.reduce_window(x, init_d, theirs, *w)) for w in WINDOWS]
        got = minixla.jit(f, backend=backend)(x)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
        if backend == "llvm":  # the evaluator too
            for g, w in zip(evaluate(minixla.jit(f).lower(x).hlo_module, x), want):
                np.testing.assert_array_equal(g, w)


def test_reduce_window_grad_and_vmap():
    x = _x()[..., :2]
    x = np.nan_to_num(x, posinf=3.0)
    window = ((1, 3, 2, 1), (1, 2, 1, 1), ((0, 0), (1, 2), (0, 1), (0, 0)), None, (1, 1, 2, 1))

    def loss(x, lax_, np_):
        return np_.sum(np_.sin(lax_.reduce_window(x, 0.0, lax_.add, *window)))
    got = minixla.jit(minixla.grad(lambda x: loss(x, lax, mnp)))(x)
    np.testing.assert_allclose(got, jax.grad(lambda x: loss(x, jax.lax, jnp))(x), rtol=1e-5, atol=1e-5)
    pool = lambda lax_: lambda x: lax_.reduce_window(x, -np.inf, lax_.max, (2, 2, 1), (2, 1, 1), "SAME")
    np.testing.assert_array_equal(minixla.vmap(pool(lax))(x), jax.vmap(pool(jax.lax))(x))


def test_reduce_window_rejects_what_it_lacks():
    with pytest.raises(minixla.errors.UnsupportedError, match="lax.add, lax.max and lax.min"):
        minixla.jit(lambda x: lax.reduce_window(x, 1.0, lax.add, (2,), (1,), "VALID"))(np.ones(4, np.float32))
    with pytest.raises(minixla.errors.ShapeError, match="reduce_window_sum: window_strides must be positive"):
        minixla.jit(lambda x: lax.reduce_window(x, 0.0, lax.add, (2,), (0,), "VALID"))(np.ones(4, np.float32))


# ---------------------------------------------------------------------------------------
# A ResNet block with pooling, written with JAX and imported.

def _conv(x, w):
    return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _norm(x, scale, bias, eps=1e-5):
    mean = jnp.mean(x, axis=(0, 1, 2))
    var = jnp.var(x, axis=(0, 1, 2))
    return (x - mean) * jax.lax.rsqrt(var + eps) * scale + bias


def _resnet_block(p, x):
    h = jax.nn.relu(_norm(_conv(x, p["w1"]), p["s1"], p["b1"]))
    h = _norm(_conv(h, p["w2"]), p["s2"], p["b2"])
    h = jax.nn.relu(h + x)
    # max_pool and avg_pool as flax.linen writes them: lax.reduce_window with lax.max / lax.add
    h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = jax.lax.reduce_window(h, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "SAME") / 4.0
    return jnp.mean(h, axis=(1, 2)) @ p["head"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_resnet_block_with_pooling(backend):
    c = 4
    ks = jax.random.split(jax.random.key(5), 4)
    p = dict(w1=jax.random.normal(ks[0], (3, 3, c, c)) / np.sqrt(9 * c), s1=jnp.ones(c), b1=jnp.zeros(c),
             w2=jax.random.normal(ks[1], (3, 3, c, c)) / np.sqrt(9 * c), s2=jnp.ones(c), b2=jnp.zeros(c),
             head=jax.random.normal(ks[2], (c, 3)))
    x = jax.random.normal(ks[3], (2, 8, 8, c))
    names = {e.primitive.name for e in jax.make_jaxpr(_resnet_block)(p, x).eqns}
    assert {"reduce_window_max", "reduce_window_sum", "conv_general_dilated"} <= names
    got = minixla.jit(_resnet_block, frontend="jax", backend=backend)(p, x)
    np.testing.assert_allclose(got, jax.jit(_resnet_block)(p, x), rtol=2e-5, atol=2e-6)
    # its training gradient taken inside: jax.grad through max pooling binds select_and_scatter_add
    loss = lambda p, x: jnp.sum(jnp.tanh(_resnet_block(p, x)))  # noqa: E731
    value_and_grad = jax.value_and_grad(loss)
    assert "select_and_scatter_add" in {e.primitive.name for e in jax.make_jaxpr(value_and_grad)(p, x).eqns}
    got = minixla.jit(value_and_grad, frontend="jax", backend=backend)(p, x)
    want = jax.jit(value_and_grad)(p, x)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


# ---------------------------------------------------------------------------------------
# Derivatives of pooling and user reductions inside the imported function.

def _argmax_body(a, b):
    return (jnp.maximum(a[0], b[0]), jnp.where(a[0] >= b[0], a[1], b[1]))


def _pool_grads_and_reductions(x, t, i):
    # jax.jvp / jax.grad of max and min pooling bind select_and_gather_add / select_and_scatter_add
    pool = lambda op, init, win, st, pad: lambda x: jax.lax.reduce_window(x, init, op, win, st, pad)  # noqa: E731
    pools = [pool(jax.lax.max, -jnp.inf, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
             pool(jax.lax.max, -jnp.inf, (1, 3, 3, 1), (1, 2, 1, 1), "SAME"),
             pool(jax.lax.min, jnp.inf, (1, 2, 3, 1), (1, 1, 2, 1), "VALID")]
    outs = []
    for p in pools:
        outs += [jax.jvp(p, (x,), (t,))[1], jax.grad(lambda x: jnp.sum(jnp.sin(p(x))))(x)]
    # lax.reduce / reduce_window with a Python body: a `reduce` / `reduce_window` with its jaxpr
    y = x[0]
    idx = jax.lax.broadcasted_iota(jnp.int32, y.shape, 1)
    outs += [jax.lax.reduce(y, 0., lambda a, b: a + b, (1,)),         # a monoid: reduce_sum
             jax.lax.reduce(y, 2.5, lambda a, b: a + b, (1,)),        # another init value
             jax.lax.reduce((y, idx), (-jnp.inf, 0), _argmax_body, (1,)),  # argmax pairs, a NaN
             jax.lax.reduce(i, 0, lambda a, b: a ^ b, (0,)),
             jax.lax.reduce_window(y, 1., jax.lax.mul, (2, 2, 1), (1, 2, 1), "SAME"),
             jax.lax.reduce_window(i, 3, lambda a, b: a ^ b, (2, 2), (1, 1), "VALID"),
             jax.lax.reduce_window((y, idx), (-jnp.inf, 0), _argmax_body, (3, 1, 1), (2, 1, 1), "VALID")]
    return outs


@pytest.mark.parametrize("backend", BACKENDS)
def test_pooling_derivatives_and_user_reductions_inside(backend):
    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, size=(2, 6, 7, 3)).astype(np.float32)  # integers: many ties
    x[0, 1, 1, 0], x[1, 0, 0, 1] = np.nan, -np.inf
    t = rng.normal(size=x.shape).astype(np.float32)
    i = rng.integers(-50, 50, size=(5, 4)).astype(np.int32)
    names = set()
    for e in jax.make_jaxpr(_pool_grads_and_reductions)(x, t, i).eqns:
        names |= {e.primitive.name} | {q.primitive.name for q in e.params["jaxpr"].eqns} if "jaxpr" in e.params \
            and hasattr(e.params["jaxpr"], "eqns") else {e.primitive.name}
    assert {"select_and_gather_add", "select_and_scatter_add", "reduce", "reduce_window"} <= names
    want = jax.jit(_pool_grads_and_reductions)(x, t, i)
    got = minixla.jit(_pool_grads_and_reductions, frontend="jax", backend=backend)(x, t, i)
    for k, (g, w) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(want))):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w), k
        np.testing.assert_array_equal(g, w, err_msg=str(k))


def test_unsupported_reduce_window_body_is_clear():
    # a traced init value with a general body is refused, naming the primitive and the user's line
    def f(x, c):
        return jax.lax.reduce_window(x, c, lambda a, b: a * b + 1, (2,), (1,), "VALID")
    with pytest.raises(NotImplementedError, match="reduce_window.*traced init") as info:
        minixla.jit(f, frontend="jax")(np.ones(4, np.float32), np.float32(1))
    assert "test_jax_frontend_pooling.py" in str(info.value)


def _corner_pool_derivatives(x, t, ct):
    pools = [lambda v: jax.lax.reduce_window(v, -jnp.inf, jax.lax.max, (2,), (1,), ((1, 1),)),
             lambda v: jax.lax.reduce_window(v, jnp.inf, jax.lax.min, (3,), (2,), ((1, 1),))]
    outs = []
    for pool, y in zip(pools, (x, -x)):
        outs.append(jax.jvp(pool, (y,), (t,))[1])
        outs.append(jax.grad(lambda v: (pool(v) * ct[:pool(v).shape[0]]).sum())(y))
    return outs


def test_pooling_derivative_corners_through_the_front_end():
    # XLA's select_and_gather_add folds from the init over the operand's own elements (a NaN
    # before padding keeps its tangent, a window of -inf only gives 0); its SelectAndScatter
    # starts from the first tap, padding a candidate ([NaN, pad]: the cotangent is dropped,
    # [-inf, -inf]: the first gets it). The import used one selection for both.
    x = np.array([np.nan, 1.0, -np.inf, -np.inf, np.nan, 0.0, -0.0, 2.0, np.inf, np.nan], np.float32)
    t = np.arange(1, 11, dtype=np.float32)
    ct = np.arange(1, 12, dtype=np.float32)
    with jax.disable_jit():
        want = _corner_pool_derivatives(x, t, ct)
    for backend in BACKENDS:
        got = minixla.jit(_corner_pool_derivatives, frontend="jax", backend=backend)(x, t, ct)
        for k, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(g, w, err_msg=f"{backend} {k}")
