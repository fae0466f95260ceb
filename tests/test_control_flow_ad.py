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


def _dead_equations(closed):
    """The primitive of every equation inside a control-flow sub-jaxpr of ``closed`` (minixla's
    or JAX's) whose outputs nothing reads (printed as ``_:f32[] = ...``), at any depth."""
    dead = []

    def key(v):  # (minixla's Var has an id; JAX's is its own key; literals are None)
        return None if type(v).__name__ == "Literal" else getattr(v, "id", v)

    def walk(jaxpr, top):
        used = {key(v) for v in jaxpr.outvars}
        for e in reversed(jaxpr.eqns):
            if not top and not any(key(v) in used for v in e.outvars):
                dead.append(e.primitive.name)
            used.update(key(a) for a in e.invars)
            for p in ("jaxpr", "body_jaxpr", "cond_jaxpr"):
                if p in e.params:
                    walk(e.params[p].jaxpr, False)
            for b in e.params.get("branches", ()):
                walk(b.jaxpr, False)
    walk(closed.jaxpr, True)
    return dead


def test_grad_jaxpr_of_loops_and_branches_has_no_dead_equations_or_unread_residuals():
    """make_jaxpr(grad(f)) of scans, a static fori_loop and cond/switch against JAX's: equal
    gradients, no dead equation in a re-traced body or branch (the primal values a tangent or
    transposed body recomputes and does not return), and a fori_loop's counter is not saved as
    a residual: its forward scan returns what JAX's does (counter, carry, the saved carry)."""
    from minixla.interpreters.eval import eval_jaxpr
    def scan1(L, np_):
        return lambda x: (lambda c, ys: c + ys.sum())(*L.scan(lambda c, a: (np_.sin(c) * a, c * a), x, np_.arange(3.0) + 0.5))

    def scan2(L, np_):
        def f(w):
            _, ys = L.scan(lambda h, x: (np_.tanh(h * w + x),) * 2, 0.5, np_.arange(4.0))
            return (ys ** 2).sum()
        return f

    def fori(L, np_):
        return lambda x: L.fori_loop(0, 3, lambda i, c: c * c + 1.0, x)

    def scan_fwd(L, np_):  # a carry returned unchanged is a const: not carried, not saved per step
        def f(w):
            (_, h), ys = L.scan(lambda c, x: ((c[0], np_.sin(c[1] * c[0]) + x), (c[1], x)), (w, 1.0), np_.arange(3.0))
            return h + ys[0].sum() + ys[1].sum()
        return f

    def branches(L, np_):
        return lambda x: (L.cond(x > 1.0, lambda y: np_.sin(y) * y, lambda y: np_.cos(y), x)
                          + L.switch(1, [np_.exp, lambda y: y * y, np_.log], x))
    # jax.grad(f)(1.5) with jax 0.10.2, pinned: JAX's eager scans compile each (~1.5 s a function)
    pinned = {scan1: 0.7572875618934631, scan2: 0.5497319102287292, fori: 450.9375,
              scan_fwd: -1.9450996, branches: 4.10360050201416}
    for build, value in pinned.items():
        got = minixla.make_jaxpr(minixla.grad(build(lax, mnp)))(1.5)
        want = jax.make_jaxpr(jax.grad(build(jax.lax, jnp)))(1.5)
        assert _dead_equations(got) == [], (build.__name__, str(got))
        np.testing.assert_allclose(eval_jaxpr(got.jaxpr, got.consts, [1.5])[0], value, rtol=1e-6)

        def scans(closed):
            return [(e.params["num_consts"], e.params["num_carry"]) for e in closed.jaxpr.eqns
                    if e.primitive.name == "scan"]
        assert scans(got) == scans(want), (build.__name__, str(got))
        if build is fori:
            assert [len(e.outvars) for e in got.jaxpr.eqns if e.primitive.name == "scan"] == \
                [len(e.outvars) for e in want.jaxpr.eqns if e.primitive.name == "scan"]
