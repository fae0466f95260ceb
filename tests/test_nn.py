"""``minixla.nn`` against ``jax.nn`` on both backends, including NaN/inf/±0 and large |x|."""
import jax
import numpy as np
import pytest

import minixla
import minixla.nn as mnn
from minixla.testing import check_against_jax
from conftest import BACKENDS

RNG = np.random.default_rng(0)
X = np.concatenate([RNG.standard_normal(40) * 4, [np.nan, np.inf, -np.inf, -0.0, 0.0, 30., -30., 100., -100.]]
                   ).astype(np.float32).reshape(7, 7)


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


# gelu's tanh form computes 1 + tanh(z) with tanh(z) near -1 for z < -5: the inline tanh is
# within a few ulp of XLA's, which leaves an absolute error of a few 1e-7 there.
@pytest.mark.parametrize("name,atol", [("relu", 0), ("relu6", 0), ("sigmoid", 1e-7), ("silu", 1e-7),
                                       ("log_sigmoid", 1e-7), ("gelu", 1e-6), ("elu", 1e-7), ("selu", 1e-7),
                                       ("softplus", 1e-7), ("leaky_relu", 0), ("hard_tanh", 0),
                                       ("softmax", 1e-7), ("log_softmax", 1e-6), ("logsumexp", 1e-6)])
def test_activation(name, atol, backend):
    check_against_jax(getattr(mnn, name), getattr(jax.nn, name), X, rtol=4e-6 if atol else 0, atol=atol,
                      backends=(backend,))


def test_gelu_exact_softmax_axes_logsumexp_keepdims(backend):
    kw = dict(rtol=4e-6, atol=1e-7, backends=(backend,))
    check_against_jax(lambda a: mnn.gelu(a, approximate=False), lambda a: jax.nn.gelu(a, approximate=False), X, **kw)
    for axis in (0, 1, (0, 1)):
        check_against_jax(lambda a: mnn.softmax(a, axis), lambda a: jax.nn.softmax(a, axis), X, **kw)
        check_against_jax(lambda a: mnn.log_softmax(a, axis), lambda a: jax.nn.log_softmax(a, axis), X,
                          rtol=4e-6, atol=1e-6, backends=(backend,))
    check_against_jax(lambda a: mnn.logsumexp(a, 1, keepdims=True),
                      lambda a: jax.nn.logsumexp(a, 1, keepdims=True), X, **kw)
    check_against_jax(mnn.logsumexp, jax.nn.logsumexp, np.full((3,), -np.inf, np.float32), **kw)
    check_against_jax(lambda a: mnn.elu(a, 0.5), lambda a: jax.nn.elu(a, 0.5), X, **kw)


def test_one_hot(backend):
    kw = dict(rtol=0, atol=0, backends=(backend,))
    check_against_jax(lambda a: mnn.one_hot(a, 5), lambda a: jax.nn.one_hot(a, 5), np.array([0, 3, 7, -1], np.int32),
                      **kw)
    check_against_jax(lambda a: mnn.one_hot(a, 3, axis=0, dtype=np.int32),
                      lambda a: jax.nn.one_hot(a, 3, axis=0, dtype=np.int32), np.array([[0, 2], [1, 1]], np.int32),
                      **kw)


def test_softmax_gradient_stops_at_the_max_as_jax():
    # Fuzzer find (grad mode): JAX 0.10's softmax (jax_softmax_custom_jvp off) subtracts
    # stop_gradient(max); minixla differentiated through the max, whose cancelling terms rounded
    # to -1e-8 where JAX's gradient is exactly 0.
    x = np.array([[1, -0.25, 20], [88, 4, 1]], np.float32)
    c = np.array([[0.5, -2, -1.5], [-1.25, 2.25, -1]], np.float32)
    want = jax.vjp(lambda x: jax.nn.softmax(x, axis=1), x)[1](c)[0]
    got = minixla.jit(lambda x, c: minixla.vjp(lambda x: minixla.nn.softmax(x, axis=1), x)[1](c)[0])(x, c)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# Functions JAX defines with custom_jvp (or builds on one), each at its kinks/ties and at ordinary
# points: relu/relu6 have derivative 0 at their kinks (not max's 0.5 split), logaddexp(2) 0.5 on a
# tie (softplus, log_sigmoid, mish inherit it), hard_sigmoid/hard_silu inherit relu6's, sinc's
# derivatives at 0 are the Maclaurin coefficients, log1mexp uses g / expm1(x).
def _custom_jvp_cases():
    import jax.numpy as jnp
    import minixla.numpy as mnp
    f32 = lambda *v: np.array(v, np.float32)  # noqa: E731
    return [
        (mnn.relu, jax.nn.relu, f32(0., -1., 2.)),
        (mnn.relu6, jax.nn.relu6, f32(0., 6., 3., 7.)),
        (mnn.hard_sigmoid, jax.nn.hard_sigmoid, f32(-3., 3., 0.5)),
        (mnn.hard_silu, jax.nn.hard_silu, f32(-3., 3., 0.5)),
        (mnn.softplus, jax.nn.softplus, f32(0., -2., 3.)),
        (mnn.log_sigmoid, jax.nn.log_sigmoid, f32(0., 1.5)),
        (mnn.mish, jax.nn.mish, f32(0., 1.)),
        (mnn.log1mexp, jax.nn.log1mexp, f32(np.log(2.), 0.3, 2.)),
        (mnp.sinc, jnp.sinc, f32(0., 0.3)),
        (lambda x: mnp.logaddexp(x, 1.), lambda x: jnp.logaddexp(x, 1.), f32(1., 0.)),
        (lambda x: mnp.logaddexp(1., x), lambda x: jnp.logaddexp(1., x), f32(1., 0.)),
        (lambda x: mnp.logaddexp2(x, 1.), lambda x: jnp.logaddexp2(x, 1.), f32(1., 0.)),
        (lambda x: mnp.logaddexp2(1., x), lambda x: jnp.logaddexp2(1., x), f32(1., -3.)),
    ]


def test_custom_jvp_derivatives_at_kinks_and_ties_match_jax():
    cases = _custom_jvp_cases()
    xs = [c[2] for c in cases]

    def derivatives(grad, vmap, fns):
        def run(xs):
            outs = []
            for f, x in zip(fns, xs):
                d1 = grad(f)
                outs += [vmap(d1)(x), vmap(grad(d1))(x)]
            return outs
        return run

    want = jax.jit(derivatives(jax.grad, jax.vmap, [c[1] for c in cases]))(xs)
    mine = derivatives(minixla.grad, minixla.vmap, [c[0] for c in cases])
    for how, fn in [("eager", mine)] + [(b, minixla.jit(mine, backend=b)) for b in BACKENDS]:
        got = fn(xs)
        for i, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=1e-6,
                                       err_msg=f"{how}: case {i // 2} derivative {i % 2 + 1}")
    # JAX's own functions through the JAX front end keep JAX's rules under minixla's grad (the
    # importer carries each custom_jvp_call's rule), and a jax.grad inside gives JAX's values.
    some = [0, 1, 4, 8, 9]  # relu, relu6, softplus, sinc, logaddexp
    imported = derivatives(minixla.grad, minixla.vmap, [minixla.jit(cases[i][1], frontend="jax") for i in some])
    got = minixla.jit(imported)([xs[i] for i in some])
    for k, i in enumerate(some):
        for order in (0, 1):
            np.testing.assert_allclose(np.asarray(got[2 * k + order]), np.asarray(want[2 * i + order]),
                                       rtol=2e-6, atol=1e-6, err_msg=f"imported: case {i} derivative {order + 1}")
    relu_grad = minixla.jit(jax.grad(jax.nn.relu), frontend="jax")
    assert (float(relu_grad(3.0)), float(relu_grad(0.0))) == (1.0, 0.0)
    # The rules are visible as JAX's: one custom_jvp_call per function.
    jaxpr = str(minixla.make_jaxpr(mnn.softplus)(1.0))
    assert "custom_jvp_call" in jaxpr and "name=logaddexp" in jaxpr, jaxpr
    assert "name=relu" in str(minixla.make_jaxpr(mnn.relu)(1.0))


def test_narrow_float_silu_and_softmax_round_after_every_op_as_jax():
    """Every bf16 and f16 value through ``silu`` and ``softmax``, bit for bit with ``jax.nn``
    (which rounds after each op, here as with ``jax.disable_jit()``): eagerly, where the nn
    functions used to compute with NumPy between minixla ops (508 bf16 silu and 8,272 f16
    softmax values differed), and under ``jit`` on both backends. Eagerly every ``minixla.nn``
    function now runs its ops one by one (``interpreters.eval.op_by_op``)."""
    import ml_dtypes

    def differ(got, want):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype
        nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
        return int(((got.view(np.uint16) != want.view(np.uint16)) & ~nan).sum())
    for dt in (ml_dtypes.bfloat16, np.float16):
        x = np.arange(65536, dtype=np.uint16).view(dt).reshape(256, 256)
        for name in ("silu", "softmax"):
            want = getattr(jax.nn, name)(x)
            fn = getattr(mnn, name)
            assert differ(fn(x), want) == 0, (dt, name, "eager")
            for b in BACKENDS:
                assert differ(minixla.jit(fn, backend=b)(x), want) == 0, (dt, name, b)
