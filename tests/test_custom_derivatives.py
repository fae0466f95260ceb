"""custom_jvp / custom_vjp: the examples of JAX's "Custom derivative rules" documentation, run
with jax and with minixla (eagerly, and jitted on both backends), their jaxprs, their nesting
with jit/grad/vmap, and the errors for rules that return the wrong thing (JAX's messages)."""
from collections import namedtuple
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

LIBS = {"jax": (jax, jnp), "minixla": (minixla, mnp)}


def _close(got, want, rtol=1e-5, atol=1e-6):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=rtol, atol=atol)


# --- the documentation's examples, written once for either library --------------------

def log1pexp_of(X, np_):
    @X.custom_jvp
    def log1pexp(x):
        return np_.log(1. + np_.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = log1pexp(x)
        ans_dot = (1 - 1 / (1 + np_.exp(x))) * x_dot
        return ans, ans_dot
    return log1pexp


def clip_gradient_of(X, np_):
    @X.custom_vjp
    def clip_gradient(lo, hi, x):
        return x  # identity function

    def clip_gradient_fwd(lo, hi, x):
        return x, (lo, hi)  # save bounds as residuals

    def clip_gradient_bwd(res, g):
        lo, hi = res
        return (None, None, np_.clip(g, lo, hi))  # use None to indicate zero cotangents for lo and hi
    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)

    def clip_sin(x):
        x = clip_gradient(-0.75, 0.75, x)
        return np_.sin(x)
    return clip_sin


def app_vjp_of(X, np_):
    @partial(X.custom_vjp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    def app_fwd(f, x):
        return app(f, x), x

    def app_bwd(f, x, g):
        return (5 * g,)  # a bogus derivative, to see that the rule is used
    app.defvjp(app_fwd, app_bwd)
    return app


def app_jvp_of(X, np_):
    @partial(X.custom_jvp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    @app.defjvp
    def app_jvp(f, primals, tangents):
        x, = primals
        x_dot, = tangents
        return f(x), 2. * x_dot
    return app


Point = namedtuple("Point", ["x", "y"])


def pytree_jvp_of(X, np_):
    @X.custom_jvp
    def f(pt):
        x, y = pt.x, pt.y
        return {'a': x ** 2, 'b': (np_.sin(x), np_.cos(y))}

    @f.defjvp
    def f_jvp(primals, tangents):
        pt, = primals
        pt_dot, = tangents
        ans = f(pt)
        ans_dot = {'a': 2 * pt.x * pt_dot.x, 'b': (np_.cos(pt.x) * pt_dot.x, -np_.sin(pt.y) * pt_dot.y)}
        return ans, ans_dot

    def fun(pt):
        dct = f(pt)
        return dct['a'] + dct['b'][0]
    return fun


def pytree_vjp_of(X, np_):
    @X.custom_vjp
    def f(pt):
        x, y = pt.x, pt.y
        return {'a': x ** 2, 'b': (np_.sin(x), np_.cos(y))}

    def f_fwd(pt):
        return f(pt), pt

    def f_bwd(pt, g):
        a_bar, (b0_bar, b1_bar) = g['a'], g['b']
        x_bar = 2 * pt.x * a_bar + np_.cos(pt.x) * b0_bar
        y_bar = -np_.sin(pt.y) * b1_bar
        return (Point(x_bar, y_bar),)
    f.defvjp(f_fwd, f_bwd)

    def fun(pt):
        dct = f(pt)
        return dct['a'] + dct['b'][0] * dct['b'][1]
    return fun


def f_sin_jvp_of(X, np_):
    """The first example of the docs: ``f(x, y) = sin(x) * y`` with its JVP written out."""
    @X.custom_jvp
    def f(x, y):
        return np_.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        primal_out = f(x, y)
        tangent_out = np_.cos(x) * x_dot * y + np_.sin(x) * y_dot
        return primal_out, tangent_out
    return f


def test_log1pexp_gradient_is_stable_where_autodiff_gives_nan():
    ours, theirs = log1pexp_of(minixla, mnp), log1pexp_of(jax, jnp)
    xs = np.array([-3.0, 0.0, 3.0, 100.0], np.float32)
    want = jax.jit(jax.vmap(jax.grad(theirs)))(xs)
    assert float(minixla.grad(ours)(100.)) == float(want[-1]) == 1.0
    for backend in ("llvm", "jax"):
        _close(minixla.jit(minixla.vmap(minixla.grad(ours)), backend=backend)(xs), want)
    # the rule is itself differentiated: second derivative through the custom JVP
    _close(minixla.jit(minixla.grad(minixla.grad(ours)))(1.5), jax.jit(jax.grad(jax.grad(theirs)))(1.5))


def test_jit_of_a_custom_function_keeps_its_rule():
    """``minixla.jit`` copies the wrapped function's attributes (``functools.update_wrapper``);
    a ``custom_jvp`` (and ``jax.grad`` of JAX's) carries ``fun``, its primal, which once
    overwrote ``Jitted.fun``: the rule was dropped (nan) or the primal computed instead of the
    gradient (fresh-user find)."""
    ours, theirs = log1pexp_of(minixla, mnp), log1pexp_of(jax, jnp)
    want = float(jax.grad(jax.jit(theirs))(100.))
    assert float(minixla.grad(minixla.jit(ours))(100.)) == want == 1.0
    relu_grad = jax.grad(jax.nn.relu)  # a custom_jvp inside JAX: its grad's __dict__ has 'fun'
    assert float(minixla.jit(relu_grad, frontend="jax")(3.0)) == float(relu_grad(3.0)) == 1.0

    def double(x):
        return 2 * x
    double.backend = "not-a-backend"  # a user attribute is copied, and the Jitted's own wins
    jitted = minixla.jit(double)
    assert jitted.backend == "llvm" and float(jitted(2.0)) == 4.0
    outer = minixla.jit(jitted, backend="jax")  # (was: llvm, the inner's cache shared, fun = double)
    assert outer.backend == "jax" and outer.fun is jitted and outer._cache is not jitted._cache


def test_clip_gradient_custom_vjp_per_example():
    ours, theirs = clip_gradient_of(minixla, mnp), clip_gradient_of(jax, jnp)
    t = np.linspace(0, 10, 7, dtype=np.float32)
    want = jax.jit(jax.vmap(jax.grad(theirs)))(t)
    for backend in ("llvm", "jax"):
        _close(minixla.jit(minixla.vmap(minixla.grad(ours)), backend=backend)(t), want)
    _close(minixla.grad(lambda x: minixla.vmap(ours)(x).sum())(t),
           jax.jit(jax.grad(lambda x: jax.vmap(theirs)(x).sum()))(t))


@pytest.mark.parametrize("kind", ["vjp", "jvp"])
def test_nondiff_argnums_with_a_function_argument(kind):
    make = app_vjp_of if kind == "vjp" else app_jvp_of
    ours, theirs = make(minixla, mnp), make(jax, jnp)
    cube = lambda x: x ** 3  # noqa: E731
    assert float(ours(cube, 3.)) == float(theirs(cube, 3.)) == 27.
    assert float(minixla.grad(ours, 1)(cube, 3.)) == float(jax.grad(theirs, 1)(cube, 3.))
    _close(minixla.jit(lambda x: minixla.grad(ours, 1)(cube, x), backend="jax")(3.), jax.grad(theirs, 1)(cube, 3.))
    if kind == "jvp":
        got = minixla.jvp(lambda x: ours(cube, x), (3.,), (1.,))
        _close(got, jax.jvp(lambda x: theirs(cube, x), (3.,), (1.,)))


@pytest.mark.parametrize("make", [pytree_jvp_of, pytree_vjp_of])
def test_pytree_inputs_and_outputs(make):
    ours, theirs = make(minixla, mnp), make(jax, jnp)
    pt = Point(np.float32(1.), np.float32(2.))
    got = minixla.grad(ours)(pt)
    assert isinstance(got, Point)
    _close(got, jax.jit(jax.grad(theirs))(pt))
    pts = Point(np.linspace(0, 1, 3, dtype=np.float32), np.linspace(1, 2, 3, dtype=np.float32))
    _close(minixla.jit(minixla.vmap(minixla.grad(ours)))(pts), jax.jit(jax.vmap(jax.grad(theirs)))(pts))


def test_custom_jvp_composes_with_every_transformation():
    ours, theirs = f_sin_jvp_of(minixla, mnp), f_sin_jvp_of(jax, jnp)
    x, y = np.float32(0.7), np.float32(-1.3)
    xs = np.linspace(-1, 1, 4, dtype=np.float32)
    jj = jax.jit
    cases = [  # (minixla's transformation, jax's, args)
        (lambda T: lambda a, b: T.jvp(T_f(T), (a, b), (np.float32(1.), np.float32(0.5))), (x, y)),
        (lambda T: T.grad(T_f(T), (0, 1)), (x, y)),
        (lambda T: T.grad(T.jit(T_f(T))), (x, y)),
        (lambda T: T.vmap(T_f(T), (0, None)), (xs, y)),
        (lambda T: T.jacrev(T_f(T), 1), (xs, xs)),
        (lambda T: T.vmap(T.vmap(T_f(T), (0, None)), (None, 0)), (xs, xs)),
        # closures over jit and vmap tracers are constants of the call (closure-converted)
        (lambda T: T.vmap(lambda s: T.grad(lambda a: T_f(T)(a, s))(x)), (xs,)),
    ]
    T_f = lambda T: ours if T is minixla else theirs  # noqa: E731
    for make, args in cases:
        _close(make(minixla)(*args), jj(make(jax))(*args))
    _close(minixla.jit(minixla.jacfwd(ours))(xs, xs), jj(jax.jacfwd(theirs))(xs, xs))
    _close(minixla.jit(minixla.hessian(ours), backend="jax")(x, y), jj(jax.hessian(theirs))(x, y))
    _close(minixla.jit(lambda s: minixla.grad(lambda a: ours(a * s, s))(x))(y),
           jj(lambda s: jax.grad(lambda a: theirs(a * s, s))(x))(y))


def test_the_rule_is_used_not_the_function():
    @minixla.custom_jvp
    def f(x):
        return mnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), 10. * t[0]))
    assert float(minixla.grad(f)(1.)) == 10.
    assert float(minixla.jit(minixla.grad(f))(1.)) == 10.
    np.testing.assert_array_equal(minixla.vmap(minixla.grad(f))(np.ones(3, np.float32)), [10., 10., 10.])
    assert float(f(0.5)) == pytest.approx(np.sin(0.5))  # the primal is f's


def test_jaxprs_print_as_jax_prints_them():
    for make, args in [(f_sin_jvp_of, (1., 2.)), (log1pexp_of, (1.,))]:
        ours, theirs = make(minixla, mnp), make(jax, jnp)
        assert str(minixla.make_jaxpr(ours)(*args)) == str(jax.make_jaxpr(theirs)(*args))

    def g_of(X, np_):
        @X.custom_vjp
        def g(x):
            return np_.sin(x)

        def g_fwd(x):
            return np_.sin(x), np_.cos(x)

        def g_bwd(r, ct):
            return (r * ct,)
        g.defvjp(g_fwd, g_bwd)
        return g
    ours, theirs = g_of(minixla, mnp), g_of(jax, jnp)
    assert str(minixla.make_jaxpr(ours)(1.)) == str(jax.make_jaxpr(theirs)(1.))
    assert str(minixla.make_jaxpr(minixla.vmap(ours))(np.ones(3, np.float32))) == str(
        jax.make_jaxpr(jax.vmap(theirs))(np.ones(3, np.float32)))
    # under grad the forward keeps the call and the tangent is the rule's (as in JAX's jaxpr)
    text = str(minixla.make_jaxpr(minixla.grad(f_sin_jvp_of(minixla, mnp)))(1., 2.))
    assert text.count("custom_jvp_call[") == 1 and "cos" in text


def test_integer_inputs_get_float0_tangents_in_the_rule():
    seen = {}

    @minixla.custom_jvp
    def f(x, n):
        return x * n

    @f.defjvp
    def f_jvp(p, t):
        seen["dtype"] = t[1].dtype
        return f(*p), t[0] * p[1]
    assert float(minixla.grad(f)(2., 3)) == 3.
    assert seen["dtype"] == jax.dtypes.float0


# --- errors -------------------------------------------------------------------------------

def _jax_message(fn):
    with pytest.raises(Exception) as e:
        fn()
    return str(e.value).splitlines()[0]


def _bad_jvp(X, np_, returns):
    @X.custom_jvp
    def f(x):
        return np_.sin(x)

    def f_jvp(p, t):
        return returns(f, p, t, np_)
    f.defjvp(f_jvp)
    return f


@pytest.mark.parametrize("returns", [
    lambda f, p, t, np_: f(p[0]),                                   # not a pair
    lambda f, p, t, np_: ((f(p[0]), 1.), t[0]),                     # structures differ
    lambda f, p, t, np_: (f(p[0]), np_.ones(3)),                    # tangent shape
], ids=["not-a-pair", "structure", "shape"])
def test_bad_jvp_rule_gives_jax_message_and_the_line(returns):
    want = _jax_message(lambda: jax.jvp(_bad_jvp(jax, jnp, returns), (1.,), (1.,)))
    with pytest.raises(TypeError) as e:
        minixla.jvp(_bad_jvp(minixla, mnp, returns), (np.float32(1.),), (np.float32(1.),))
    assert str(e.value).splitlines()[0] == want
    assert "test_custom_derivatives.py" in str(e.value)


def _bad_bwd(X, np_, bwd):
    @X.custom_vjp
    def g(x, y):
        return np_.sin(x) * y
    g.defvjp(lambda x, y: (g(x, y), (x, y)), lambda r, ct: bwd(r, ct, np_))
    return g


@pytest.mark.parametrize("bwd,exc", [
    (lambda r, ct, np_: (ct,), TypeError),                          # tuple too short
    (lambda r, ct, np_: ct, TypeError),                             # not a tuple
    (lambda r, ct, np_: ([ct], ct), TypeError),                     # wrong nesting
    (lambda r, ct, np_: (ct, np_.ones(3)), ValueError),             # wrong shape
], ids=["short", "not-tuple", "nesting", "shape"])
def test_bad_bwd_rule_gives_jax_message_naming_the_rule_and_the_line(bwd, exc):
    want = _jax_message(lambda: jax.grad(_bad_bwd(jax, jnp, bwd))(1., 2.))
    with pytest.raises(exc) as e:
        minixla.grad(_bad_bwd(minixla, mnp, bwd))(1., 2.)
    msg = str(e.value)
    assert msg.splitlines()[0] == want
    assert "bwd rule <lambda> defined at" in msg and "test_custom_derivatives.py" in msg


def test_bwd_none_is_a_zero_cotangent_and_forward_mode_is_refused():
    g = _bad_bwd(minixla, mnp, lambda r, ct, np_: (ct, None))
    assert float(minixla.grad(g, 1)(1., 2.)) == 0.
    want = _jax_message(lambda: jax.jvp(_bad_bwd(jax, jnp, lambda r, ct, np_: (ct, ct)), (1., 2.), (1., 1.)))
    with pytest.raises(TypeError, match="forward-mode") as e:
        minixla.jvp(g, (1., 2.), (1., 1.))
    assert str(e.value).splitlines()[0] == want


def test_missing_rules_and_closures_over_differentiated_values():
    for X, np_ in LIBS.values():
        f = X.custom_jvp(lambda x: x)
        g = X.custom_vjp(lambda x: x)
        with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function <lambda> using defjvp"):
            f(1.)
        with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function <lambda> using defvjp"):
            g(1.)

    def outer(y):
        @minixla.custom_jvp
        def f(x):
            return mnp.sin(x) * y
        f.defjvp(lambda p, t: (f(p[0]), t[0]))
        return f(2.)
    with pytest.raises(minixla.errors.UnexpectedTracerError, match="closes over a value that is being"):
        minixla.grad(outer)(3.)


def test_lax_level_rules_and_eager_calls():
    @minixla.custom_jvp
    def relu(x):
        return lax.max(x, 0.)
    relu.defjvps(lambda t, ans, x: lax.select(x > 0, t, mnp.zeros_like(t)))
    xs = np.array([-1., 0., 2.], np.float32)
    np.testing.assert_array_equal(relu(xs), [0., 0., 2.])  # eager: the function itself
    np.testing.assert_array_equal(minixla.vmap(minixla.grad(relu))(xs), [0., 0., 1.])
