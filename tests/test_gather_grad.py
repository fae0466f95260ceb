"""gather and scatter-add: jvp, vjp (clamped / dropped indices as minixla's gather and scatter
define them: JAX's mode='clip' / mode='drop') and vmap against JAX, eager and jitted."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

from ad_cases import MODES, as_np, assert_tree_close, run

M = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
IDX = np.array([[2], [0], [5], [-3], [0]], np.int32)  # out of range ones are clamped / dropped
GDN = (lax.GatherDimensionNumbers((1,), (0,), (0,)), jax.lax.GatherDimensionNumbers((1,), (0,), (0,)))
SDN = (lax.ScatterDimensionNumbers((1,), (0,), (0,)), jax.lax.ScatterDimensionNumbers((1,), (0,), (0,)))


def gather(L):
    dn = GDN[0] if L is lax else GDN[1]
    kw = {} if L is lax else {"mode": "clip"}
    return lambda x: L.gather(x, IDX, dn, (1, 4), **kw) * x[0, 0]


def scatter_add(L):
    dn = SDN[0] if L is lax else SDN[1]
    kw = {} if L is lax else {"mode": "drop"}
    return lambda x, u: L.scatter_add(x, IDX, u, dn, **kw) * u[0, 0]


U = np.linspace(-1, 1, 20).astype(np.float32).reshape(5, 4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn,args", [(gather, (M,)), (scatter_add, (M, U))], ids=["gather", "scatter_add"])
def test_gather_scatter_transformations_match_jax(fn, args, mode):
    f, jf = fn(lax), fn(jax.lax)
    tans = tuple(np.ones_like(a) * 0.5 for a in args)
    y, pull = jax.vjp(jf, *args)
    ct = np.cos(np.arange(y.size, dtype=np.float32)).reshape(y.shape)
    want = as_np((jax.jvp(jf, args, tans), pull(ct)))

    def ours(a, t, c):
        return minixla.jvp(f, a, t), minixla.vjp(f, *a)[1](c)
    assert_tree_close(run(mode, ours, args, tans, ct), want)
    xs = tuple(np.stack([a, 2 * a]) for a in args)
    assert_tree_close(run(mode, minixla.vmap(f), *xs), as_np(jax.vmap(jf)(*xs)))


@pytest.mark.parametrize("mode", MODES)
def test_vmap_gather_with_batched_indices(mode):
    idx = np.array([[[1], [2]], [[0], [7]]], np.int32)  # per example, one clamped

    def f(L, x, i):
        dn = GDN[0] if L is lax else GDN[1]
        kw = {} if L is lax else {"mode": "clip"}
        return L.gather(x, i, dn, (1, 4), **kw)
    xs = np.stack([M, -M])
    for axes in [(None, 0), (0, 0)]:
        a = xs if axes[0] == 0 else M
        want = as_np(jax.vmap(lambda x, i: f(jax.lax, x, i), in_axes=axes)(a, idx))
        assert_tree_close(run(mode, minixla.vmap(lambda x, i: f(lax, x, i), in_axes=axes), a, idx), want)


def test_grad_through_numpy_indexing():
    import jax.numpy as jnp
    import minixla.numpy as mnp
    labels = np.array([2, 0, 1], np.int32)
    logits = np.linspace(-1, 1, 12).astype(np.float32).reshape(3, 4)

    def xent(np_, z):
        lse = np_.log(np_.sum(np_.exp(z), axis=1))
        return np_.mean(lse - z[np_.arange(3), labels])
    want = as_np(jax.grad(lambda z: xent(jnp, z))(logits))
    for mode in MODES:
        assert_tree_close(run(mode, minixla.grad(lambda z: xent(mnp, z)), logits), want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"])
def test_vmap_scatter_family(name, mode):
    idx = np.array([[[1], [2]], [[0], [7]]], np.int32)
    upd = np.stack([U[:2], -U[2:4]])

    def f(L, x, i, u):
        dn = SDN[0] if L is lax else SDN[1]
        kw = {} if L is lax else {"mode": "drop"}
        return getattr(L, name)(x, i, u, dn, **kw)
    xs = np.stack([M, -M])
    # the three in_axes in one program (one compile per mode, not three)
    all_axes = [(0, None, 0), (None, 0, 0), (0, 0, None)]
    args = [a for axes in all_axes
            for a in (xs if axes[0] == 0 else M, idx if axes[1] == 0 else idx[0], upd if axes[2] == 0 else upd[0])]
    want = [as_np(jax.vmap(lambda *a: f(jax.lax, *a), in_axes=axes)(*args[3 * k:3 * k + 3]))
            for k, axes in enumerate(all_axes)]

    def ours(*args):
        return [minixla.vmap(lambda *a: f(lax, *a), in_axes=axes)(*args[3 * k:3 * k + 3])
                for k, axes in enumerate(all_axes)]
    assert_tree_close(run(mode, ours, *args), want)


def test_gradients_keep_every_out_of_bounds_mode():
    """Each gather/scatter mode (``lax.GatherScatterMode``) differentiates as in JAX: a filled
    window has no cotangent, a clamped one sends it to the clamped start, a dropped update none.
    (The six (gather mode, scatter mode) pairs are one program per backend.)"""
    import minixla.numpy as mnp
    import jax.numpy as jnp
    idx = np.array([9, 3, -1, 0], np.int32)
    x = np.linspace(-1, 1, 5).astype(np.float32)
    pairs = [(g, s) for s in ("clip", "drop") for g in ("clip", "fill", "wrap")]

    def f(np_, x, gmode, smode):
        g = np_.take(x, idx, mode=gmode, **({"fill_value": 0.0} if gmode == "fill" else {}))
        return (g * g).sum() + (x.at[idx].add(g, mode=smode) ** 2).sum()

    def grads(np_, grad):
        return lambda x: [grad(lambda x: f(np_, x, g, s))(x) for g, s in pairs]
    want = grads(jnp, jax.grad)(x)
    for backend in ("llvm", "jax", None):
        fn = grads(mnp, minixla.grad)
        got = fn(x) if backend is None else minixla.jit(fn, backend=backend)(x)
        for gs, a, b in zip(pairs, got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=f"{gs} {backend or 'eager'}")


def test_gather_cotangent_is_scattered_in_the_gathers_mode():
    # Fuzzer find (grad mode, seed 7001): x[i] gathers PROMISE_IN_BOUNDS, whose forward clamps an
    # out-of-bounds start (HLO gather) while JAX transposes it to a scatter-add in the same mode,
    # which drops that window's cotangent (HLO scatter); minixla scattered it clamped.
    x = np.array([0.75, 2.0], np.float32)
    i = np.array([1, 2, -3, 5], np.int32)
    c = np.array([-0.25, 1.5, 3.0, 0.5], np.float32)

    def pulled(vjp, np_):
        def f(x, i, c):
            outs = [vjp(lambda x: x[i], x)[1](c)[0]]
            outs += [vjp(lambda x: x.at[i].get(mode=m), x)[1](c)[0] for m in ("clip", "fill", "promise_in_bounds")]
            return outs
        return f
    want = jax.jit(pulled(jax.vjp, jnp))(x, i, c)
    for backend in ("llvm", "jax"):
        got = minixla.jit(pulled(minixla.vjp, mnp), backend=backend)(x, i, c)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=backend)


@pytest.mark.parametrize("shape,index", [((5, 0), 1), ((5, 5, 0), 7)])
def test_scatter_gradients_into_an_empty_operand(shape, index):
    """A deep-fuzz find (grad mode, seed 8001): ``x.at[i].min(v)`` on an array with a size-0 dim
    had a JVP/transpose that gathered a size-1 window from the flattened, empty operand (a gather
    shape error under jit and vmap). Every window was dropped: the gradients are JAX's."""
    def f(np_):
        def g(x, v):
            at = x.at[index]
            return (np_.sum(at.min(v)) + np_.sum(at.max(v)) + np_.sum(at.set(v)) + np_.sum(at.add(v))
                    + 2 * v)
        return g
    x, v = np.zeros(shape, np.float32), np.float32(0.5)
    want = jax.grad(f(jnp), argnums=(0, 1))(x, v)
    g = minixla.grad(f(mnp), argnums=(0, 1))
    for got in (g(x, v), minixla.jit(g)(x, v), minixla.jit(g, backend="jax")(x, v)):
        assert_tree_close(as_np(got), as_np(want))
    vs = np.array([0.5, -1.0], np.float32)
    got = minixla.jit(minixla.vmap(g, in_axes=(None, 0)))(x, vs)
    assert_tree_close(as_np(got), as_np(jax.vmap(jax.grad(f(jnp), argnums=(0, 1)), in_axes=(None, 0))(x, vs)))


def test_static_int_index_into_an_empty_axis_of_at_raises_as_jax():
    for op in ("set", "add", "min"):
        with pytest.raises(IndexError, match="out of bounds for axis 1 with size 0"):
            minixla.jit(lambda x: getattr(x.at[:, 2], op)(1.0))(np.zeros((3, 0), np.float32))
        with pytest.raises(IndexError):
            jax.jit(lambda x: getattr(x.at[:, 2], op)(1.0))(np.zeros((3, 0), np.float32))
