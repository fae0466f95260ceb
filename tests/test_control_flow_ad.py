"""Transformations of control flow (issue 15): jvp of ``cond``/``switch``/``while_loop``/``scan``/``fori_loop``;
grad of ``cond``/``switch``/``scan``/static ``fori_loop`` (the backward pass is a reverse scan over
saved residuals); ``while_loop`` reverse mode raises JAX's error; vmap of each (a batched predicate:
both branches and a select, or a loop run until every example is done). Checked against JAX."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
from minixla import lax, numpy as mnp

X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
W = np.eye(3, dtype=np.float32) * 0.7 + 0.1


def _rnn(L, np_):
    def loss(w, x):
        def cell(h, xt):
            h = np_.tanh(h @ w + xt)
            return h, (h * h).sum()
        h, ys = L.scan(cell, np.zeros(3, np.float32), x)
        _, back = L.scan(lambda c, xt: (c * 0.5 + xt, c), h, x, reverse=True)
        return (h * h).sum() + ys.sum() + back.sum()
    return loss


def _cond(L, np_):
    return lambda w, x: L.cond(x.sum() > 0, lambda a: (np_.sin(a) * x[0]).sum(), lambda a: (a * a).sum(), w)


def _switch(L, np_):
    return lambda w, x: sum(L.switch(i, [lambda a: np_.sin(a).sum(), lambda a: (a * x[1]).sum(),
                                         lambda a: (a ** 3).sum()], w) for i in (-2, 1, 4))


def _fori(L, np_):
    return lambda w, x: L.fori_loop(0, 4, lambda i, c: np_.sin(c) * w[0] + x[0], x[1]).sum()


def _nested(L, np_):
    def f(w, x):
        def step(c, xt):
            c = L.cond(xt.sum() > 0, lambda a: a * w[0], lambda a: np_.sin(a), c)
            return c, c.sum()
        c, ys = L.scan(step, x[0], x)
        return c.sum() + ys.sum()
    return f


PROGRAMS = {"rnn": _rnn, "cond": _cond, "switch": _switch, "fori": _fori, "nested": _nested}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jvp_and_grad_match_jax(name):
    f, g = PROGRAMS[name](lax, mnp), PROGRAMS[name](jax.lax, jnp)
    for x in (X, -X):
        t = (np.ones_like(W), np.full_like(x, 0.5))
        (p1, t1), (p2, t2) = minixla.jvp(f, (W, x), t), jax.jvp(g, (W, x), t)
        np.testing.assert_allclose(p1, p2, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(t1, t2, rtol=1e-5, atol=1e-5)
        for got, want in zip(minixla.grad(f, argnums=(0, 1))(W, x), jax.grad(g, argnums=(0, 1))(W, x)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_grad_of_scan_under_jit_on_both_backends():
    f, g = _rnn(lax, mnp), _rnn(jax.lax, jnp)
    want = jax.grad(g)(W, X)
    for backend in ("llvm", "jax"):
        np.testing.assert_allclose(minixla.jit(minixla.grad(f), backend=backend)(W, X), want, rtol=1e-5, atol=1e-6)


def test_while_loop_jvp_and_reverse_mode_error():
    f = lambda L, np_: lambda w, x: L.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, np_.sin(c[1]) * w[0]),
                                                (0, x[0]))[1].sum()
    t = (np.ones_like(W), np.zeros_like(X))
    (p1, t1), (p2, t2) = minixla.jvp(f(lax, mnp), (W, X), t), jax.jvp(f(jax.lax, jnp), (W, X), t)
    np.testing.assert_allclose(t1, t2, rtol=1e-5)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        minixla.grad(f(lax, mnp))(W, X)


VMAP = {
    "cond_batched_pred": lambda L, s: lambda x: L.cond(x.sum() > 0, lambda a: s(a) * 2, lambda a: a - 1, x),
    "cond_unbatched_pred": lambda L, s: lambda x: L.cond(True, lambda a: s(a) * 2, lambda a: a - 1, x),
    "switch": lambda L, s: lambda x: L.switch((x[0] * 3).astype(np.int32), [lambda a: a, s, lambda a: -a], x),
    "while_batched_pred": lambda L, s: lambda x: L.while_loop(
        lambda c: c[0] < 2 + (x[0] > 0).astype(np.int32) * 3, lambda c: (c[0] + 1, c[1] + s(c[1]) ** 2), (0, x)),
    "scan": lambda L, s: lambda x: L.scan(lambda c, a: (c * 0.5 + s(a), c.sum()), x, np.ones((5, 3), np.float32) * x),
}


@pytest.mark.parametrize("name", sorted(VMAP))
def test_vmap_matches_jax(name):
    xs = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    f, g = VMAP[name](lax, mnp.sin), VMAP[name](jax.lax, jnp.sin)
    want = jax.tree_util.tree_leaves(jax.vmap(g)(xs))
    for got in (minixla.vmap(f)(xs), minixla.jit(minixla.vmap(f), backend="jax")(xs)):
        for a, b in zip(jax.tree_util.tree_leaves(got), want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_grad_of_vmapped_cond_and_switch_takes_no_cotangent_from_the_branch_not_taken():
    """A fresh-user find: with a batched predicate both branches run and a select picks; the
    branch not taken (sqrt(-1), log(0)) must pass back nothing, as JAX's batching rule feeds it
    stop_gradient'ed operands (was: NaN, sqrt(-1)'s, in the gradient)."""
    import jax
    import jax.numpy as jnp
    import minixla.lax as mlax
    x = np.array([-1., 4., 0., 2.], np.float32)

    def mk(np_, L, vmap):
        def g(x):
            return (L.cond(x > 0, np_.sqrt, lambda x: 0. * x, x)
                    + L.switch(x.astype(np.int32) % 3, [np_.log, lambda x: x, np_.sqrt], x))
        return lambda x: np_.sum(vmap(g)(x))

    want = np.asarray(jax.grad(mk(jnp, jax.lax, jax.vmap))(x))
    f = minixla.grad(mk(mnp, mlax, minixla.vmap))
    for got in (f(x), minixla.jit(f)(x)):
        np.testing.assert_array_equal(np.asarray(got), want)  # (NaN where JAX has NaN: index 0)
