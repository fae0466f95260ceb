"""minixla.vmap against jax.vmap: every covered primitive with several in_axes, eagerly and
under jit on both backends; out_axes, axis_size, pytrees, nesting; JAX's errors."""
import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

from ad_cases import CASES, IDS, MODES, as_np, assert_tree_close, run

B = 3


def batched(args, axes, seed=5):
    r = np.random.default_rng(seed)
    out = []
    for a, ax in zip(args, axes):
        a = np.asarray(a)
        if ax is None:
            out.append(a)
            continue
        stack = [a] + [(a * r.uniform(0.5, 1.5, a.shape)).astype(a.dtype) for _ in range(B - 1)]
        out.append(np.stack(stack, axis=ax))
    return tuple(out)


def axes_variants(args):
    n = len(args)
    yield (0,) * n
    last = tuple(np.ndim(a) for a in args)  # the new axis after every example dim
    yield last
    if n > 1:
        yield (0,) + (None,) * (n - 1)
        yield (None,) * (n - 1) + (np.ndim(args[-1]),)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn,args", CASES, ids=IDS)
def test_vmap_matches_jax(name, fn, args, mode):
    f, jf = fn(lax), fn(jax.lax)
    for axes in axes_variants(args):
        xs = batched(args, axes)
        want = as_np(jax.vmap(jf, in_axes=axes)(*xs))
        got = run(mode, minixla.vmap(f, in_axes=axes), *xs)
        assert_tree_close(got, want)


@pytest.mark.parametrize("mode", MODES)
def test_vmap_out_axes_axis_size_pytrees(mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = lambda d, c: {"s": d["a"] * c, "t": (d["a"] + 1.0, c)}  # noqa: E731
    args = ({"a": x}, np.float32(2.0))
    want = as_np(jax.vmap(f, in_axes=({"a": 1}, None), out_axes={"s": 0, "t": (1, None)})(*args))
    got = run(mode, minixla.vmap(f, in_axes=({"a": 1}, None), out_axes={"s": 0, "t": (1, None)}), *args)
    assert_tree_close(got, want)
    want = as_np(jax.vmap(lambda c: c * 2.0, in_axes=None, axis_size=4)(np.float32(1.5)))
    got = run(mode, minixla.vmap(lambda c: c * 2.0, in_axes=None, axis_size=4), np.float32(1.5))
    assert_tree_close(got, want)


@pytest.mark.parametrize("mode", MODES)
def test_vmap_nesting_and_per_example_gradients(mode):
    r = np.random.default_rng(0)
    w = r.normal(size=(4, 2)).astype(np.float32)
    xs, ys = r.normal(size=(6, 4)).astype(np.float32), r.normal(size=(6, 2)).astype(np.float32)
    loss = lambda np_, w, x, y: np_.sum((np_.tanh(x @ w) - y) ** 2)  # noqa: E731
    want = as_np(jax.vmap(jax.grad(lambda w, x, y: loss(jnp, w, x, y)), in_axes=(None, 0, 0))(w, xs, ys))
    got = run(mode, minixla.vmap(minixla.grad(lambda w, x, y: loss(mnp, w, x, y)), in_axes=(None, 0, 0)),
              w, xs, ys)
    assert_tree_close(got, want, rtol=1e-4, atol=1e-5)
    m = r.normal(size=(2, 3, 4)).astype(np.float32)
    f = lambda a: mnp.sum(a * a) + a[0]  # noqa: E731
    jfn = lambda a: jnp.sum(a * a) + a[0]  # noqa: E731
    assert_tree_close(run(mode, minixla.vmap(minixla.vmap(f)), m), as_np(jax.vmap(jax.vmap(jfn))(m)))
    assert_tree_close(run(mode, minixla.vmap(minixla.jit(f), in_axes=1), m), as_np(jax.vmap(jfn, in_axes=1)(m)))


def test_vmap_errors_match_jax():
    def check(ours, theirs):
        with pytest.raises(ValueError) as want:
            theirs()
        with pytest.raises(ValueError) as got:
            ours()
        # JAX's message word for word, then the user's line (a minixla error: TypeError/ValueError)
        msg, at = str(got.value).rsplit("\n  at: ", 1)
        assert msg == str(want.value)
        assert isinstance(got.value, minixla.errors.MinixlaError) and __file__ in at
    add = lambda x, y: x + y  # noqa: E731
    a2, a3 = np.ones(2, np.float32), np.ones(3, np.float32)
    check(lambda: minixla.vmap(add)(a2, a3), lambda: jax.vmap(add)(a2, a3))
    check(lambda: minixla.vmap(add, in_axes=(0, 1))(a3, a3), lambda: jax.vmap(add, in_axes=(0, 1))(a3, a3))
    check(lambda: minixla.vmap(add, in_axes=(0, 0, 0))(a3, a3), lambda: jax.vmap(add, in_axes=(0, 0, 0))(a3, a3))
    check(lambda: minixla.vmap(lambda x: x, in_axes=None)(a3), lambda: jax.vmap(lambda x: x, in_axes=None)(a3))
    # JAX 0.10's wording: out_axes=None on a batched output names its key path; sizes are grouped
    # (most common first) and name pytree paths, *args and kwargs; in_axes/out_axes that are no
    # tree prefix show JAX's mismatch details; vmap of nothing says so.
    pair = collections.namedtuple("pair", "sign logdet")
    for f, oa in [(lambda x: x * 2, None), (lambda x: (x, x * 2), (0, None)), (lambda x: {"a": x}, {"a": None}),
                  (lambda x: pair(x, x), None), (lambda x: [x, (x, x)], None)]:
        check(lambda: minixla.vmap(f, out_axes=oa)(a3), lambda: jax.vmap(f, out_axes=oa)(a3))
    three = lambda a, b, c: a  # noqa: E731
    check(lambda: minixla.vmap(three)(a3, a2, a3), lambda: jax.vmap(three)(a3, a2, a3))
    check(lambda: minixla.vmap(add)((a3, a2), a2), lambda: jax.vmap(add)((a3, a2), a2))
    star = lambda *a: a[0]  # noqa: E731
    check(lambda: minixla.vmap(star)(a3, a2), lambda: jax.vmap(star)(a3, a2))
    kw = lambda x, *, k: x  # noqa: E731
    check(lambda: minixla.vmap(kw)(a3, k=a2), lambda: jax.vmap(kw)(a3, k=a2))
    check(lambda: minixla.vmap(lambda x: x, axis_size=5)(a3), lambda: jax.vmap(lambda x: x, axis_size=5)(a3))
    check(lambda: minixla.vmap(lambda x: x, in_axes=((0, 0),))(a3), lambda: jax.vmap(lambda x: x, in_axes=((0, 0),))(a3))
    check(lambda: minixla.vmap(lambda x: x, out_axes=(0, 0))(a3), lambda: jax.vmap(lambda x: x, out_axes=(0, 0))(a3))
    check(lambda: minixla.vmap(lambda: 1.0)(), lambda: jax.vmap(lambda: 1.0)())
    for bad in [dict(in_axes=1.5), dict(in_axes=("a",)), dict(out_axes=1.5)]:
        with pytest.raises(TypeError) as want:
            jax.vmap(lambda x: x, **bad)
        with pytest.raises(TypeError) as got:
            minixla.vmap(lambda x: x, **bad)
        assert str(got.value) == str(want.value) and isinstance(got.value, minixla.errors.MinixlaError)


@pytest.mark.parametrize("mode", MODES)
def test_vmap_dynamic_slice_with_batched_indices(mode):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    ks = np.array([0, 2, 9, -7], np.int32)  # clamped like lax.dynamic_slice
    f = lambda L: (lambda x, k: L.dynamic_slice(x, (k, np.int32(1)), (2, 3)))  # noqa: E731
    g = lambda L: (lambda x, u, k: L.dynamic_update_slice(x, u, (np.int32(1), k)))  # noqa: E731
    u = np.ones((2, 3), np.float32)
    for axes in [(None, 0), (0, 0)]:
        xs = x if axes[0] is None else np.stack([x + i for i in range(4)])
        want = as_np(jax.vmap(f(jax.lax), in_axes=axes)(xs, ks))
        assert_tree_close(run(mode, minixla.vmap(f(lax), in_axes=axes), xs, ks), want)
        want = as_np(jax.vmap(g(jax.lax), in_axes=axes[:1] + (None,) + axes[1:])(xs, u, ks))
        assert_tree_close(run(mode, minixla.vmap(g(lax), in_axes=axes[:1] + (None,) + axes[1:]), xs, u, ks), want)


def test_vmap_maps_keyword_arguments_over_axis_0_like_jax():
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32)
    f = lambda a, *, b: a * b + 1.0  # noqa: E731
    assert_tree_close(minixla.vmap(f, in_axes=1)(x.T, b=y), as_np(jax.vmap(f, in_axes=1)(x.T, b=y)))


def test_jit_of_vmap_over_an_empty_batch_of_gathers():
    # Fuzzer find (vmap mode, seed 7002): with the operand and the indices both batched, the
    # batching rule picked each example's slice with a slice of size 1 along a batch of size 0.
    x, i = np.zeros((0, 3), np.float32), np.zeros((0, 5), np.int32)

    def f(np_, lax_):
        return lambda x, i: (x[i], lax_.dynamic_slice(x, (i[0],), (2,)), np_.take_along_axis(x, i % 3, axis=0))
    want = jax.vmap(f(jnp, jax.lax))(x, i)
    got = minixla.jit(minixla.vmap(f(mnp, minixla.lax)))(x, i)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype


# Whether a result is batched is part of what vmap computes: ``out_axes=None`` accepts exactly
# the unbatched ones. JAX's jnp makes some results constants of the static shapes (an empty
# gather is ``full_like(y, 0)``, an empty ``where`` is its ``x``, ``isin`` with an empty side is
# ``zeros``), and keeps others batched that minixla once wrote as constants (an empty ``svd``/``lu``
# of a batched matrix, ``var`` with too few elements, ``take_along_axis`` of empty indices,
# ``polyval`` of no coefficients, ``diagonal`` of a 0x0 matrix).
_I0 = np.zeros((0,), np.int32)
_EMPTY_CASES = [  # (name, fn(np, lax, x), per-example shape)
    ("x[empty]", lambda n, l, x: x[_I0], (3,)),
    ("x[..., empty, :]", lambda n, l, x: x[..., _I0, :], (2, 3)),
    ("x(2,0)[[0,1]]", lambda n, l, x: x[np.array([0, 1])], (2, 0)),
    ("x(0,3)[:, [1]]", lambda n, l, x: x[:, np.array([1])], (0, 3)),
    ("x(2,0)[1]", lambda n, l, x: x[1], (2, 0)),
    ("at[empty].get fill", lambda n, l, x: x.at[_I0].get(mode="fill", fill_value=1.0), (3,)),
    ("take_along_axis idx empty", lambda n, l, x: n.take_along_axis(x, np.zeros((2, 0), np.int32), axis=1), (2, 3)),
    ("diagonal 0x0", lambda n, l, x: n.diagonal(x), (0, 0)),
    ("diagonal 3d empty", lambda n, l, x: n.diagonal(x, axis1=1, axis2=2), (2, 0, 0)),
    ("where empty", lambda n, l, x: n.where(x > 0, 1.0, x), (0,)),
    ("where empty x batched", lambda n, l, x: n.where(True, x, 1.0), (0,)),
    ("isin empty tests", lambda n, l, x: n.isin(x, np.zeros((0,), np.float32), invert=True), (3,)),
    ("nansum empty", lambda n, l, x: n.nansum(x), (0,)),
    ("var ddof", lambda n, l, x: n.var(x, ddof=3), (3,)),
    ("polyval no coefficients", lambda n, l, x: n.polyval(np.ones((0,), np.float32), x), (3,)),
    ("svd 0x3", lambda n, l, x: n.linalg.svd(x), (0, 3)),
    ("svdvals 0x0", lambda n, l, x: n.linalg.svd(x, compute_uv=False), (0, 0)),
    ("lu 0x0", lambda n, l, x: l.linalg.lu(x), (0, 0)),
]


def _fuzz_slogdet(n, l, x):  # (deep vmap fuzz, seed 9302: fam_linalg slogdet with n=0 of a bool[0,1])
    from minixla.fuzz import families
    p = dict(fn="slogdet", n=0, m=0, perm=np.zeros((0,), np.int32), out=0)
    return families._la(n, l, [x], p)


_EMPTY_CASES.append(("fuzz 9302 slogdet", _fuzz_slogdet, (0, 1)))


def test_vmap_batchedness_of_static_shape_results_matches_jax():
    def attempt(vmap, n, l, fn, x, out_axes):
        try:
            return True, jax.tree_util.tree_map(np.asarray, vmap(lambda a: fn(n, l, a), out_axes=out_axes)(x))
        except ValueError:
            return False, None
    bad = []
    for name, fn, shape in _EMPTY_CASES:
        x = (np.random.default_rng(0).standard_normal((2,) + shape) * 3).astype(np.float32)
        if name.startswith("fuzz"):
            x = x > 0
        for out_axes in (None, 0):
            ok_j, want = attempt(jax.vmap, jnp, jax.lax, fn, x, out_axes)
            ok_m, got = attempt(minixla.vmap, mnp, lax, fn, x, out_axes)
            if ok_j != ok_m:
                bad.append(f"{name} out_axes={out_axes}: jax {'accepts' if ok_j else 'refuses'}, minixla does not")
            elif ok_j:  # (leaves: jnp's svd/slogdet return named tuples)
                assert_tree_close(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want))
    assert not bad, bad
