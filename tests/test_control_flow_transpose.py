"""Reverse mode through loops and branches that carry known (non-linear) values: a
``fori_loop`` counter, a primal value a ``custom_jvp`` rule's loop updates next to its tangent,
a carry computed from constants only. Partial evaluation splits each ``scan``/``cond``/``while``
into a known part, run forward, and an unknown (linear) part, the only one transposed
(``minixla/interpreters/control_flow_partial_eval.py``, JAX's ``_scan_partial_eval``).
Every value is JAX's, computed here with jax; errors are JAX's too.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax as mlax

X = np.float32(0.7)
XV = np.arange(1, 4, dtype=np.float32)
ONE = np.float32(1.0)


def _both(build, *args):
    """``build(api, lax, numpy)`` evaluated with jax and with minixla on ``args``."""
    want = build(jax, jax.lax, jnp)(*args)
    got = build(minixla, mlax, mnp)(*args)
    return want, got


def _close(want, got):
    jax.tree_util.tree_map(lambda w, g: np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6,
                                                                   atol=1e-6), want, got)


# linear_transpose of linear functions whose loops carry known values
_LT = {
    "fori_counter_coefficient":
        (lambda L, lax, np_: L.linear_transpose(lambda x: lax.fori_loop(0, 3, lambda i, c: c + x * i, 0.), ONE), ONE),
    "fori_counter_init_is_input":
        (lambda L, lax, np_: L.linear_transpose(lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2. + x * i, x), ONE),
         ONE),
    "nested_fori_counters":
        (lambda L, lax, np_: L.linear_transpose(lambda x: lax.fori_loop(
            0, 2, lambda i, c: lax.fori_loop(0, 3, lambda j, d: d + x * (i + j), c), 0.), ONE), ONE),
    "linear_outer_scan_inner_counter":  # the outer scan's carries are all linear
        (lambda L, lax, np_: L.linear_transpose(lambda x: lax.scan(
            lambda c, xi: (lax.fori_loop(0, 2, lambda j, a: a * 0.5 + xi * j, c), c), x[0], x)[1], XV), XV),
    "reverse_scan_constant_derived_carry":
        (lambda L, lax, np_: L.linear_transpose(lambda x: lax.scan(
            lambda c, xi: ((c[0] + 1., c[1] + xi * c[0]), c[1] * c[0]), (1., 0.), x, reverse=True)[1], XV), XV),
    "known_ys_used_downstream":
        (lambda L, lax, np_: L.linear_transpose(lambda x: (lambda r: (r[1][0] * r[1][1]).sum())(
            lax.scan(lambda c, xi: (c + 1., (xi * c, c)), 1., x)), XV), ONE),
    "cond_on_counter":
        (lambda L, lax, np_: L.linear_transpose(lambda x: lax.fori_loop(0, 4, lambda i, c: lax.cond(
            i % 2 == 0, lambda c: c + x * i, lambda c: c * 3., c), 0.), ONE), ONE),
    "switch_on_counter_constant_branch":
        (lambda L, lax, np_: L.linear_transpose(lambda x: lax.fori_loop(0, 4, lambda i, c: lax.switch(
            i, [lambda c: c + x, lambda c: c * 2., lambda c: c - x * i], c), 0.), ONE), ONE),
    "cond_known_output_used_downstream":
        (lambda L, lax, np_: L.linear_transpose(lambda x: (lambda r: r[0] * r[1])(lax.cond(
            True, lambda c, x: (x * c, c * 2.), lambda c, x: (-x, c), np_.float32(3.), x)), ONE), ONE),
    "while_linear_carry_passed_through":  # (a loop invariant: a body const, as JAX's while_loop makes it)
        (lambda L, lax, np_: L.linear_transpose(lambda x: lax.while_loop(
            lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1]), (0, x))[1] * 2., ONE), ONE),
    "while_known_carries":
        (lambda L, lax, np_: L.linear_transpose(lambda x: x * lax.while_loop(
            lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.), (0, 1.))[1], ONE), ONE),
    "jitted_callee":
        (lambda L, lax, np_: L.linear_transpose(L.jit(lambda x: lax.fori_loop(0, 3, lambda i, c: c + x * i, 0.)),
                                                ONE), ONE),
}


@pytest.mark.parametrize("name", list(_LT))
def test_linear_transpose_with_known_carries(name):
    build, arg = _LT[name]
    _close(*_both(build, arg))


def _cj_scan(L, lax, np_):
    """A custom_jvp whose rule loops over its tangent while carrying a primal value ``k``,
    whose final value and per-step values are used after the loop."""
    @L.custom_jvp
    def f(x):
        return np_.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (tx,) = primals, tangents

        def body(c, _):
            k, acc = c
            return (k * x, acc + k * tx), k
        (kf, tout), ks = lax.scan(body, (np_.ones_like(x), np_.zeros_like(tx)), None, length=3)
        return np_.sin(x), tout * kf + tx * ks[1]
    return f


def _cj_fori_cond(L, lax, np_):
    """A custom_jvp whose rule runs a fori_loop (counter as a coefficient) and a cond with a
    primal-only output."""
    @L.custom_jvp
    def f(x):
        return np_.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (tx,) = primals, tangents
        t = lax.fori_loop(0, 3, lambda i, acc: acc + tx * i, np_.zeros_like(tx))
        t, k = lax.cond(x > 0, lambda c, t: (t * c, c * 2.), lambda c, t: (-t, c), np_.sin(x), t)
        return np_.cos(x), t * k
    return f


def test_grad_of_custom_jvp_with_loops_over_the_tangent():
    for cj in (_cj_scan, _cj_fori_cond):
        _close(*_both(lambda L, lax, np_: L.grad(cj(L, lax, np_)), X))
        _close(*_both(lambda L, lax, np_: (lambda x: L.linearize(cj(L, lax, np_), x)[1](np.float32(2.))), X))
    _close(*_both(lambda L, lax, np_: L.vmap(L.grad(_cj_scan(L, lax, np_))), XV))
    # checkpoint's differentiated part is not staged by partial evaluation: its transpose splits it
    _close(*_both(lambda L, lax, np_: L.grad(L.checkpoint(lambda x: _cj_scan(L, lax, np_)(x) * x)), X))
    _close(*_both(lambda L, lax, np_: L.hessian(lambda x: _cj_scan(L, lax, np_)(x) * x), X))


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_jit_grad_of_custom_jvp_loops(backend):
    want = jax.jit(jax.grad(_cj_scan(jax, jax.lax, jnp)))(X)
    got = minixla.jit(minixla.grad(_cj_scan(minixla, mlax, mnp)), backend=backend)(X)
    _close(want, got)
    want = jax.jit(lambda c: jax.linear_transpose(
        lambda x: jax.lax.fori_loop(0, 3, lambda i, c: c + x * i, 0.), ONE)(c))(np.float32(2.))
    got = minixla.jit(lambda c: minixla.linear_transpose(
        lambda x: mlax.fori_loop(0, 3, lambda i, c: c + x * i, 0.), ONE)(c), backend=backend)(np.float32(2.))
    _close(want, got)


def test_linear_part_carries_only_tangents():
    """The linear jaxpr's scan carries the tangent alone (the counter and the primal ``k`` are
    computed by the known scan and read as xs), and linear_transpose's jaxpr likewise."""
    _, f_jvp = minixla.linearize(_cj_scan(minixla, mlax, mnp), X)
    scans = [e for e in f_jvp.jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    assert [e.params["num_carry"] for e in scans] == [1]
    _, f_jvp = minixla.linearize(lambda x: mlax.scan(
        lambda c, xi: ((c[0] * 2., c[1] + xi * c[0]), None), (1., 0.), x)[0][1], XV)
    scans = [e for e in f_jvp.jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    assert [e.params["num_carry"] for e in scans] == [1]  # the constant-derived carry has a zero tangent


def test_reverse_mode_errors_and_known_while_loops():
    """A while loop with a linear carry has no transpose (JAX's error, also for a carry whose
    tangent the body passes through: ``c + 1``); one whose carries are all known, or whose
    linear value is only carried along unchanged, differentiates as in JAX."""
    def linear_carry(L, lax, np_):
        return L.grad(lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x), (0, 1.))[1])
    with pytest.raises(ValueError) as want:
        linear_carry(jax, jax.lax, jnp)(X)
    with pytest.raises(ValueError) as got:
        linear_carry(minixla, mlax, mnp)(X)
    assert str(want.value).splitlines()[0] in str(got.value)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        minixla.grad(lambda x: mlax.while_loop(lambda c: c[0] < 3, lambda c: c + 1, x).sum())(XV)
    _close(*_both(lambda L, lax, np_: L.grad(lambda x: lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1]), (0, x))[1]), X))
    _close(*_both(lambda L, lax, np_: L.grad(lambda x: x * lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.), (0, 1.))[1]), X))
    with pytest.raises(TypeError, match=r"linear_transpose only supports .* but got \[dtype\('float32'\)\] -> "
                       r"\[dtype\('int32'\), dtype\('float32'\)\]"):
        minixla.linear_transpose(lambda x: mlax.scan(lambda c, xi: ((c[0] + 1, c[1] + xi), None), (0, 0.), x)[0],
                                 XV)


def test_constant_tangents_and_cotangents_of_bodies():
    """A branch or body whose tangent or cotangent is a constant (an instantiated zero) closes
    over it: it becomes an operand (these raised AssertionError)."""
    cases = [
        lambda L, lax, np_: L.grad(lambda x: lax.cond(x > 0, lambda c: c * x, lambda c: c * 2., 3.)),
        lambda L, lax, np_: (lambda x: L.jvp(lambda x: lax.cond(x > 0, lambda c: c * x, lambda c: 2., x),
                                             (x,), (ONE,))),
        lambda L, lax, np_: L.grad(lambda x: lax.scan(lambda c, _: (c * x, 1.), 1., None, length=3)[0]),
        lambda L, lax, np_: (lambda x: L.jvp(lambda x: lax.while_loop(
            lambda c: c[0] < 3, lambda c: (c[0] + 1, 1.), (0, x))[1], (x,), (ONE,))),
        lambda L, lax, np_: (lambda x: L.linear_transpose(lambda xs, y: lax.scan(
            lambda c, xi: (c * 2., c + y), 0., xs)[1], XV, X)(XV)),
    ]
    for build in cases:
        _close(*_both(build, X))


def _cv(L, np_):
    @L.custom_vjp
    def g(x):
        return np_.sin(x)
    g.defvjp(lambda x: (np_.sin(x), np_.cos(x)), lambda r, ct: (ct * r * 2.,))
    return g


def test_custom_vjp_inside_loops_and_branches():
    """A custom_vjp called in a loop or branch body: its bwd transposes the body in reverse
    mode (the tangent body stages ``custom_lin``); forward mode is JAX's error."""
    def loop(L, lax, np_):
        return lambda x: lax.fori_loop(0, 3, lambda i, c: _cv(L, np_)(c * x) * i + c, 1.)
    _close(*_both(lambda L, lax, np_: L.grad(loop(L, lax, np_)), X))
    _close(*_both(lambda L, lax, np_: L.grad(lambda x: lax.scan(
        lambda c, xi: (c + _cv(L, np_)(xi * c), None), 1., x)[0]), XV))
    _close(*_both(lambda L, lax, np_: L.grad(lambda x: lax.cond(x > 0, _cv(L, np_), lambda c: c, x)), X))
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jax.jvp(loop(jax, jax.lax, jnp), (X,), (X,))
    for run in (lambda f: f, minixla.jit):
        with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
            run(lambda x: minixla.jvp(loop(minixla, mlax, mnp), (x,), (x,)))(X)
