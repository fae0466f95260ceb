"""minixla.vjp / grad / value_and_grad against JAX: every primitive's transpose, eagerly and
under jit on both backends; pytrees, argnums, has_aux, allow_int; nesting; JAX's errors;
numerical (central-difference) gradient checks in float64."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

from ad_cases import CASES, IDS, MODES, as_np, assert_tree_close, run, tangents_like


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn,args", CASES, ids=IDS)
def test_vjp_matches_jax(name, fn, args, mode):
    f, jf = fn(lax), fn(jax.lax)
    out, jpull = jax.vjp(jf, *args)
    ct = tangents_like((out,), seed=2)[0]
    want = as_np((out, jpull(ct)))

    def both(a, c):
        y, pull = minixla.vjp(f, *a)
        return y, pull(c)
    assert_tree_close(run(mode, both, args, ct), want)


@pytest.mark.parametrize("mode", MODES)
def test_grad_of_an_mlp_with_pytree_params(mode):
    r = np.random.default_rng(0)
    params = {"w1": r.normal(size=(4, 8)).astype(np.float32), "b1": np.zeros(8, np.float32),
              "w2": r.normal(size=(8, 2)).astype(np.float32)}
    x, y = r.normal(size=(5, 4)).astype(np.float32), r.normal(size=(5, 2)).astype(np.float32)

    def loss(np_, p, x, y):
        h = np_.tanh(x @ p["w1"] + p["b1"])
        logits = h @ p["w2"]
        return np_.mean((np_.maximum(logits, 0.0) - y) ** 2)
    want = as_np(jax.value_and_grad(lambda p: loss(jnp, p, x, y))(params))
    got = run(mode, minixla.value_and_grad(lambda p, x, y: loss(mnp, p, x, y)), params, x, y)
    assert_tree_close(got, want, rtol=1e-4, atol=1e-5)


def test_grad_argnums_has_aux_allow_int():
    f = lambda x, y, n: (x * y * n, {"aux": x + 1})  # noqa: E731
    args = (np.float32(2.0), np.float32(3.0), np.int32(4))
    g, aux = minixla.grad(f, argnums=(0, 1), has_aux=True)(*args)
    jg, jaux = jax.grad(f, argnums=(0, 1), has_aux=True)(*args)
    assert_tree_close((g, aux), as_np((jg, jaux)))
    gi = minixla.grad(lambda x, n: x * n, argnums=1, allow_int=True)(np.float32(2.0), np.int32(3))
    assert gi.dtype == jax.dtypes.float0 and gi.shape == ()
    ((v, a), g1) = minixla.value_and_grad(lambda x: (x * x, x), has_aux=True)(3.0)
    assert (float(v), float(a), float(g1)) == (9.0, 3.0, 6.0)


def test_grad_errors_match_jax():
    cases = [
        (lambda: minixla.grad(lambda x: x * 2)(np.ones(3, np.float32)),
         lambda: jax.grad(lambda x: x * 2)(np.ones(3, np.float32))),
        (lambda: minixla.grad(lambda x: x * 2)(np.int32(3)), lambda: jax.grad(lambda x: x * 2)(np.int32(3))),
        (lambda: minixla.grad(lambda x: lax.convert_element_type(x, np.int32))(1.0),
         lambda: jax.grad(lambda x: jax.lax.convert_element_type(x, np.int32))(1.0)),
        (lambda: minixla.grad(lambda x: x, argnums=3)(1.0), lambda: jax.grad(lambda x: x, argnums=3)(1.0)),
        (lambda: minixla.grad(lambda x: x, argnums=(0, 3))(1.0),
         lambda: jax.grad(lambda x: x, argnums=(0, 3))(1.0)),
    ]
    for ours, theirs in cases:
        with pytest.raises(TypeError) as want:
            theirs()
        with pytest.raises(TypeError) as got:
            ours()
        # JAX's message word for word, then the user's line (a minixla error: TypeError/ValueError)
        msg, at = str(got.value).rsplit("\n  at: ", 1)
        assert msg == str(want.value)
        assert isinstance(got.value, minixla.errors.MinixlaError) and __file__ in at
    with pytest.raises(TypeError, match="expected function with aux output to return a two-element tuple"):
        minixla.grad(lambda x: x * 2, has_aux=True)(1.0)
    with pytest.raises(TypeError, match="expected function with aux output to return a two-element tuple"):
        minixla.grad(lambda x: (x, 1, 2), has_aux=True)(1.0)


def test_vjp_cotangent_errors():
    _, pull = minixla.vjp(lambda x: x, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="unexpected JAX type"):
        pull(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="unexpected tree structure"):
        pull((np.ones(3, np.float32),))


def test_no_perturbation_confusion():
    for inner in (lambda x, y: x + y, lambda x, y: x * y):
        ours = minixla.grad(lambda x: x * minixla.grad(lambda y: inner(x, y))(1.0))(2.0)
        theirs = jax.grad(lambda x: x * jax.grad(lambda y: inner(x, y))(1.0))(2.0)
        assert float(ours) == float(theirs)


@pytest.mark.parametrize("mode", MODES)
def test_nesting(mode):
    f = lambda x: mnp.sum(mnp.sin(x) * x ** 3)  # noqa: E731
    jf = lambda x: jnp.sum(jnp.sin(x) * x ** 3)  # noqa: E731
    x = np.linspace(-1, 1, 5).astype(np.float32)
    xs = np.stack([x, 2 * x])
    assert_tree_close(run(mode, minixla.grad(minixla.jit(f)), x), as_np(jax.grad(jf)(x)))
    assert_tree_close(run(mode, minixla.grad(lambda x: mnp.sum(minixla.grad(f)(x))), x),
                      as_np(jax.grad(lambda x: jnp.sum(jax.grad(jf)(x)))(x)), rtol=1e-4, atol=1e-5)
    assert_tree_close(run(mode, minixla.vmap(minixla.grad(f)), xs), as_np(jax.vmap(jax.grad(jf))(xs)))
    assert_tree_close(run(mode, minixla.grad(lambda x: mnp.sum(minixla.vmap(f)(x))), xs),
                      as_np(jax.grad(lambda x: jnp.sum(jax.vmap(jf)(x)))(xs)))
    # a closure over an outer tracer, and jit inside grad with constant arguments
    g = minixla.grad(lambda x: minixla.jit(lambda y: y * x)(3.0) + x)
    assert float(run(mode, g, np.float32(2.0))) == 4.0


def test_grad_third_order():
    f = lambda x: lax.sin(x) * x  # noqa: E731
    jf = lambda x: jax.lax.sin(x) * x  # noqa: E731
    ours = minixla.grad(minixla.grad(minixla.grad(f)))(np.float32(0.7))
    theirs = jax.grad(jax.grad(jax.grad(jf)))(np.float32(0.7))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)


def test_make_jaxpr_of_grad_shows_the_backward_pass():
    text = str(minixla.make_jaxpr(minixla.grad(lambda x: mnp.sum(mnp.sin(x) * x)))(np.ones(3, np.float32)))
    # (the primal output nobody reads prints as ``_``, and the seed cotangent is broadcast in
    # the jaxpr -- staged, not computed eagerly -- as jax.make_jaxpr prints them)
    assert text == """{ lambda ; a:f32[3]. let
    b:f32[3] = sin a
    c:f32[3] = cos a
    d:f32[3] = mul b a
    _:f32[] = reduce_sum[axes=(0,)] d
    e:f32[3] = broadcast_in_dim[shape=(3,) broadcast_dimensions=()] 1.0:f32[]
    f:f32[3] = mul b e
    g:f32[3] = mul e a
    h:f32[3] = mul g c
    i:f32[3] = add_any f h
  in (i,) }"""


def test_tangents_and_cotangents_accumulate_with_add_any_as_jax():
    # JAX sums two tangents (JVP rules) and two cotangents of one variable (the backward pass)
    # with ``add_any``: the printed jaxprs are JAX's, and the primitive is linear (its JVP,
    # transpose and batching run in grad-of-grad and vmap) and lowers to an HLO add.
    ours, theirs = (lambda x: mnp.sin(x) * x), (lambda x: jnp.sin(x) * x)
    assert str(minixla.make_jaxpr(minixla.grad(ours))(1.)) == str(jax.make_jaxpr(jax.grad(theirs))(1.))
    jvp_of = lambda J, f: (lambda x, t: J.jvp(f, (x,), (t,)))  # noqa: E731
    assert str(minixla.make_jaxpr(jvp_of(minixla, ours))(1., 1.)) == str(jax.make_jaxpr(jvp_of(jax, theirs))(1., 1.))
    xs = np.linspace(-1, 1, 3, dtype=np.float32)
    want = jax.vmap(jax.grad(jax.grad(theirs)))(xs)
    np.testing.assert_allclose(minixla.vmap(minixla.grad(minixla.grad(ours)))(xs), want, rtol=1e-6)
    lowered = minixla.jit(minixla.grad(ours)).lower(np.float32(1.))
    assert "add_any" in str(lowered.jaxpr) and "add_any" not in lowered.as_text()
    np.testing.assert_allclose(lowered.compile()(np.float32(.5)), jax.grad(theirs)(np.float32(.5)), rtol=1e-6)


def test_grad_under_jit_traces_once_and_caches():
    calls = []

    def f(x):
        calls.append(1)
        return mnp.sum(x * x)
    g = minixla.jit(minixla.grad(f))
    for _ in range(3):
        np.testing.assert_allclose(g(np.ones(3, np.float32)), np.full(3, 2.0, np.float32))
    assert len(calls) == 1


def test_escaped_tracer_is_still_an_error():
    leak = []
    minixla.grad(lambda x: leak.append(x) or x)(1.0)
    with pytest.raises(minixla.errors.UnexpectedTracerError):
        lax.add(leak[0], 1.0)



def _numerical_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (float(f(x + d)) - float(f(x - d))) / (2 * eps)
    return g


@pytest.mark.parametrize("name", ["tanh_mlp", "logsumexp", "pow_div", "conv_like_dot"])
def test_numerical_gradients_float64(x64, name):
    r = np.random.default_rng(1)
    x = r.uniform(0.5, 1.5, (3, 4))
    w = r.normal(size=(4, 2))
    fns = {
        "tanh_mlp": lambda x: mnp.sum(mnp.tanh(x @ w) ** 2),
        "logsumexp": lambda x: mnp.log(mnp.sum(mnp.exp(x - mnp.max(x)))) + mnp.max(x),
        "pow_div": lambda x: mnp.sum(x ** 1.7 / (1.0 + x) + mnp.sqrt(x) * mnp.log1p(x)),
        "conv_like_dot": lambda x: mnp.sum(lax.dot_general(x, x, (((0,), (0,)), ((), ()))) * mnp.cos(x[0, 0])),
    }
    f = fns[name]
    g = minixla.grad(f)(x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, _numerical_grad(f, x), rtol=1e-6, atol=1e-8)
    # second order: the gradient of the directional derivative, against central differences of it
    v = r.normal(size=x.shape)
    hv = minixla.grad(lambda x: mnp.sum(minixla.grad(f)(x) * v))(x)
    np.testing.assert_allclose(hv, _numerical_grad(lambda x: np.sum(minixla.grad(f)(x) * v), x, 1e-5),
                               rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_where_gradient_nan_poisoning_is_jaxs(mode):
    # the unselected branch's NaN derivative (sqrt at 0: 0 * inf) poisons the gradient, as in JAX
    x = np.array([0.0, 1.0, 4.0], np.float32)
    f = lambda np_: (lambda x: np_.sum(np_.where(x > 0, np_.sqrt(x), 0.0)))  # noqa: E731
    g = lambda np_: (lambda x: np_.sum(np_.where(x > 0, x, np_.log(x))))  # noqa: E731
    for fn in (f, g):
        want = as_np(jax.grad(fn(jnp))(x))
        assert_tree_close(run(mode, minixla.grad(fn(mnp)), x), want)


def test_grad_accepts_jax_arrays_and_python_scalars():
    assert_tree_close(minixla.grad(lambda x: mnp.sum(x ** 3))(jnp.arange(3.0)),
                      as_np(jax.grad(lambda x: jnp.sum(x ** 3))(jnp.arange(3.0))))
    assert float(minixla.grad(lambda x: x ** 2)(3.0)) == 6.0


def test_linear_transpose_matches_jax():
    def f(np_):
        return lambda x, y: {"a": 2.0 * x[::-1] + np_.sum(y, axis=0), "b": x @ np_.ones((3, 2), np.float32)}
    x, y = np.arange(3, dtype=np.float32), np.ones((4, 3), np.float32)
    ct = {"a": np.array([1.0, -2.0, 0.5], np.float32), "b": np.array([3.0, 1.0], np.float32)}
    want = as_np(jax.linear_transpose(f(jnp), x, y)(ct))
    assert_tree_close(minixla.linear_transpose(f(mnp), x, y)(ct), want)
    assert_tree_close(minixla.jit(lambda c: minixla.linear_transpose(f(mnp), x, y)(c))(ct), want)
    with pytest.raises(minixla.errors.UnsupportedError, match="Transpose rule"):
        minixla.linear_transpose(lambda x: mnp.exp(x), x)(x)
