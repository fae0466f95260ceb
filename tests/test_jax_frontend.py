"""The JAX front end (``minixla.import_jaxpr``, ``minixla.jit(f, frontend="jax")``): real JAX
programs -- written with jax.numpy / jax.lax / jax.nn, with jax.grad and jax.vmap inside -- traced
by JAX, imported into minixla's jaxpr and compiled by minixla, matching ``jax.jit`` on both
backends; JAX's types (weak types, x64, literals, consts) kept exactly; clear errors."""
import logging

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import lax

import minixla
from minixla.frontends import jax_importer
from minixla.frontends.jax_importer import UnsupportedJaxPrimitiveError

BACKENDS = ("llvm", "jax")


def assert_tree_close(got, want, rtol=2e-5, atol=2e-6):
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(got_leaves, want_leaves):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)
        if rtol == atol == 0 and np.asarray(w).dtype.kind == "f":  # exact: the sign of zero too
            g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
            np.testing.assert_array_equal(np.signbit(g64) | np.isnan(g64), np.signbit(w64) | np.isnan(w64))


# ---------------------------------------------------------------------------------------
# Real programs.

def _mlp_init(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [dict(w=jax.random.normal(k, (m, n)) * np.sqrt(2.0 / m), b=jnp.zeros(n))
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def _mlp_loss(params, x, y):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    logits = x @ params[-1]["w"] + params[-1]["b"]
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def _mlp_step(params, x, y):
    loss, grads = jax.value_and_grad(_mlp_loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads), loss


def _init_and_train(seed, x, y):
    # the whole script inside the imported function: jax.random init (split, normal), then two
    # steps of SGD with jax.value_and_grad
    params = _mlp_init(jax.random.key(seed), (16, 32, 10))
    params, loss0 = _mlp_step(params, x, y)
    params, loss1 = _mlp_step(params, x, y)
    return params, loss0, loss1


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlp_training_step_with_jax_grad(backend):
    key = jax.random.key(0)
    params = _mlp_init(key, (16, 32, 10))  # initialized with jax.random, outside the step
    x = jax.random.normal(jax.random.fold_in(key, 1), (8, 16))
    y = jax.random.randint(jax.random.fold_in(key, 2), (8,), 0, 10)
    step = minixla.jit(_mlp_step, frontend="jax", backend=backend)
    want = jax.jit(_mlp_step)(params, x, y)
    assert_tree_close(step(params, x, y), want)
    # three steps in a row: the loss goes down as with jax
    p_m, p_j = params, params
    for _ in range(3):
        (p_m, loss_m), (p_j, loss_j) = step(p_m, x, y), jax.jit(_mlp_step)(p_j, x, y)
    np.testing.assert_allclose(loss_m, loss_j, rtol=1e-5)
    assert loss_m < want[1]
    # jax.random init inside: the initial parameters are jax.random's bits, so the training
    # matches jax.jit's as closely as the step alone does
    got = minixla.jit(_init_and_train, frontend="jax", backend=backend)(np.int32(3), x, y)
    assert_tree_close(got, jax.jit(_init_and_train)(3, x, y))
    assert got[2] < got[1]


def _layernorm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + eps) * g + b


def _transformer_block(p, x, n_heads=2):
    t, d = x.shape
    h = _layernorm(x, p["ln1_g"], p["ln1_b"])
    q, k, v = jnp.split(h @ p["wqkv"], 3, axis=-1)
    split_heads = lambda a: a.reshape(t, n_heads, d // n_heads).transpose(1, 0, 2)
    q, k, v = map(split_heads, (q, k, v))
    scores = jnp.einsum("htd,hsd->hts", q, k) / np.sqrt(d // n_heads)
    mask = jnp.tril(jnp.ones((t, t), dtype=bool))  # iota / ge / select_n in the jaxpr
    scores = jnp.where(mask, scores, -jnp.inf)
    att = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("hts,hsd->htd", att, v).transpose(1, 0, 2).reshape(t, d)
    x = x + out @ p["wo"]
    h = _layernorm(x, p["ln2_g"], p["ln2_b"])
    return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_transformer_block(backend):
    d, t = 8, 6
    ks = jax.random.split(jax.random.key(1), 6)
    p = dict(ln1_g=jnp.ones(d), ln1_b=jnp.zeros(d), ln2_g=jnp.ones(d), ln2_b=jnp.zeros(d),
             wqkv=jax.random.normal(ks[0], (d, 3 * d)) / np.sqrt(d),
             wo=jax.random.normal(ks[1], (d, d)) / np.sqrt(d),
             w1=jax.random.normal(ks[2], (d, 4 * d)) / np.sqrt(d),
             w2=jax.random.normal(ks[3], (4 * d, d)) / np.sqrt(4 * d))
    x = jax.random.normal(ks[4], (t, d))
    jaxpr = jax.make_jaxpr(_transformer_block)(p, x)
    names = {e.primitive.name for e in jaxpr.eqns} | {
        e.primitive.name for eq in jaxpr.eqns if "jaxpr" in eq.params for e in eq.params["jaxpr"].eqns}
    assert {"iota", "ge", "select_n"} <= names  # jnp.tril, as JAX writes it
    got = minixla.jit(_transformer_block, frontend="jax", backend=backend)(p, x)
    assert_tree_close(got, jax.jit(_transformer_block)(p, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_inside_per_example_gradients(backend):
    def per_example_grads(w, xs, ys):
        loss = lambda w, x, y: jnp.sum((jnp.tanh(x @ w) - y) ** 2)
        return jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(w, xs, ys)

    w = jax.random.normal(jax.random.key(2), (5, 3))
    xs = jax.random.normal(jax.random.key(3), (4, 5))
    ys = jax.random.normal(jax.random.key(4), (4, 3))
    got = minixla.jit(per_example_grads, frontend="jax", backend=backend)(w, xs, ys)
    assert got.shape == (4, 5, 3)
    assert_tree_close(got, jax.jit(per_example_grads)(w, xs, ys))


# ---------------------------------------------------------------------------------------
# Types: weak types, x64, literals and consts follow JAX exactly.

def _avals(closed):
    return [(tuple(a.shape), np.dtype(a.dtype), bool(a.weak_type)) for a in closed.in_avals], \
           [(tuple(a.shape), np.dtype(a.dtype), bool(a.weak_type)) for a in closed.out_avals]


TYPE_CASES = [
    (lambda x: x * 2 + 1, (np.arange(4, dtype=np.uint8),)),      # weak int literals meet u8
    (lambda x: x / 3, (np.arange(4, dtype=np.int32),)),          # int / weak int -> f32
    (lambda x: (x * 0.5, x + 1.0), (1.5,)),                      # a weakly typed argument stays weak
    (lambda x: jnp.sin(x) + 1, (np.ones(3, jnp.bfloat16),)),     # bf16
    (lambda x: (x.astype(jnp.float16) * 3).sum(), (np.arange(5, dtype=np.int8),)),
    (lambda x: jnp.arange(5) * x, (2,)),                          # int arange, weak int argument
    (lambda x: jnp.where(x > 0, x, 0.5), (np.array([-1.0, 2.0], np.float16),)),
]


@pytest.mark.parametrize("case", range(len(TYPE_CASES)))
@pytest.mark.parametrize("x64_mode", [False, True])
def test_types_follow_jax(case, x64_mode, request):
    if x64_mode:
        request.getfixturevalue("x64")
    f, args = TYPE_CASES[case]
    closed = jax.make_jaxpr(f)(*args)
    imported = minixla.import_jaxpr(closed)
    assert _avals(imported) == _avals(closed)
    want = jax.jit(f)(*args)
    got = minixla.jit(f, frontend="jax", backend="jax")(*args)
    assert_tree_close(got, want, rtol=0, atol=0)


def test_literals_and_consts():
    table = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    big = jnp.asarray(np.arange(6, dtype=np.int32).reshape(2, 3))

    def f(x):
        return (x * table + big, x + np.float32(2.5), jnp.int8(3) * 2)
    closed = jax.make_jaxpr(f)(np.ones((2, 3), np.float32))
    imported = minixla.import_jaxpr(closed)
    assert len(imported.consts) >= 1  # closed-over arrays become constvars
    assert _avals(imported) == _avals(closed)
    x = np.full((2, 3), 0.25, np.float32)
    for backend in BACKENDS:
        assert_tree_close(minixla.jit(f, frontend="jax", backend=backend)(x), jax.jit(f)(x), rtol=0, atol=0)


def test_x64_program(x64):
    def f(x, n):
        return jnp.cumsum(x * 1e-300) * 1e300, jnp.arange(n.shape[0]) + n
    x = np.linspace(1, 2, 5)
    n = np.arange(3, dtype=np.int64) + 2**40
    out = minixla.jit(f, frontend="jax")(x, n)
    assert out[0].dtype == np.float64 and out[1].dtype == np.int64
    assert_tree_close(out, jax.jit(f)(x, n), rtol=1e-15, atol=0)


# ---------------------------------------------------------------------------------------
# The front end inside minixla: automatic, and under minixla's transformations.

def test_automatic_switch_says_so(caplog):
    def f(x):
        return jax.nn.softplus(x) * 2  # a JAX function meets a minixla tracer
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    jitted = minixla.jit(f)
    with caplog.at_level(logging.WARNING, logger="minixla.jit"):
        got = jitted(x)
    assert any("calls a JAX function" in r.getMessage() and "test_jax_frontend.py" in r.getMessage()
               for r in caplog.records)
    assert jitted.frontend == "jax"
    assert_tree_close(got, jax.jit(f)(x), rtol=1e-6, atol=1e-7)
    with pytest.raises(minixla.errors.JaxFunctionError):
        minixla.jit(f, frontend="minixla")(x)


def test_a_jax_function_itself_switches_too():
    """``minixla.jit(jnp.sin)``, ``minixla.jit(jax.grad(f))``: JAX's complaint has no frame of the
    user's in its traceback (fresh-user find: it escaped as JAX's bare TypeError); the switch
    happens, and inside ``minixla.grad`` it is a JaxFunctionError at the user's line."""
    x = np.linspace(-1, 2, 4, dtype=np.float32)
    loss = lambda v: jnp.sum(jnp.sin(v) ** 2)  # noqa: E731
    for fun in (jnp.sin, jax.grad(loss), jax.jit(jax.vmap(jnp.cos))):
        jitted = minixla.jit(fun)
        assert_tree_close(jitted(x), jax.jit(fun)(x), rtol=1e-6, atol=1e-7)
        assert jitted.frontend == "jax"
    with pytest.raises(minixla.errors.JaxFunctionError, match=r"at: .*test_jax_frontend\.py"):
        minixla.grad(jnp.sin)(1.0)


def test_under_minixla_grad_and_vmap():
    f = minixla.jit(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2), frontend="jax")
    w = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    x = np.linspace(0, 1, 12, dtype=np.float32).reshape(4, 3)
    g = minixla.jit(minixla.grad(f))(w, x)
    np.testing.assert_allclose(g, jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2))(w, x), rtol=1e-5)
    # (a custom_jvp inside keeps JAX's rule under minixla's AD: jax.nn.relu at exactly 0 is 0, not
    # max's tie split 0.5)
    relu = minixla.jit(jax.nn.relu, frontend="jax")
    assert minixla.grad(relu)(np.float32(0.0)) == 0.0 == jax.grad(jax.nn.relu)(0.0)
    assert minixla.grad(relu)(np.float32(2.0)) == 1.0
    per_example = minixla.vmap(f, in_axes=(None, 0))(w, x[:, None])
    np.testing.assert_allclose(per_example, jax.vmap(lambda x: jnp.sum(jnp.tanh(x @ w) ** 2))(x[:, None]),
                               rtol=1e-6)


def test_control_flow_imports_as_minixla_control_flow():
    # JAX's cond/while/scan (and fori_loop, switch) become minixla's own: bodies interpreted into
    # minixla sub-jaxprs, then lowered to HLO while/conditional on either backend.
    def f(x):
        _, ys = lax.scan(lambda c, xt: (jnp.tanh(c * 0.5 + xt),) * 2, jnp.zeros(3), x.reshape(-1, 3))
        n, p = lax.while_loop(lambda c: c[0] < x.sum(), lambda c: (c[0] + 1.0, c[1] * 1.5), (0.0, 1.0))
        z = lax.cond(x.sum() > 0, lambda v: v + 1, lambda v: v * x, x)
        s = lax.switch(2, [jnp.sin, jnp.cos, lambda v: v * 3], x)
        r = lax.fori_loop(0, 4, lambda i, c: c * 2 + i, x)
        top, idx = lax.top_k(x, 2)
        return ys, n, p, z, s, r, top, idx
    x = np.arange(6, dtype=np.float32) - 2
    closed = minixla.import_jaxpr(jax.make_jaxpr(f)(x))
    assert {"scan", "while", "cond"} <= {e.primitive.name for e in closed.eqns}
    for backend in BACKENDS:
        for got, want in zip(minixla.jit(f, frontend="jax", backend=backend)(x), f(x)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # minixla's reverse mode through an imported scan
    loss = lambda x: lax.scan(lambda c, y: (c * y + 1, c), 1.0, x)[0]  # noqa: E731
    np.testing.assert_allclose(minixla.grad(minixla.jit(loss, frontend="jax"))(x), jax.grad(loss)(x),
                               rtol=1e-5)
    # jax.grad of a cond (its branches hold JAX's `empty2` residual placeholders) and jax.vmap
    # of a loop with a batched predicate (JAX's while then updates only the running examples)
    g = jax.grad(lambda p, v: jnp.sum(lax.cond(p > 0, lambda v: jnp.sin(v) * 2, jnp.cos, v)), argnums=1)
    for p in (1.0, -1.0):
        np.testing.assert_allclose(minixla.jit(g, frontend="jax")(np.float32(p), x), g(p, x), rtol=1e-6)
    w = jax.vmap(lambda v, n: lax.while_loop(lambda c: c[0] < 5.0, lambda c: (c[0] + 1.3, c[1] * 2), (v, n)))
    for got, want in zip(minixla.jit(w, frontend="jax")(x, x + 1), w(x, x + 1)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


# ---------------------------------------------------------------------------------------
# Errors.

@pytest.mark.parametrize("prim, fn", [
    ("approx_top_k", lambda x: lax.approx_max_k(x, 2)[0]),
    ("rng_uniform", lambda x: x + lax.rng_uniform(0.0, 1.0, x.shape)),
    ("fft", lambda x: jnp.fft.fft(x).real),  # (inside jnp.fft's jit: the error named 'jit')
])  # (lgamma, random_gamma and rng_bit_generator import since issue 14: test_special.py, test_rng_bit_generator.py;
#     eq_to/le_to/lt_to: tests/test_pow_total_order_keys.py)
def test_unsupported_primitive_names_it_and_the_line(prim, fn):
    with pytest.raises(UnsupportedJaxPrimitiveError) as info:
        minixla.jit(fn, frontend="jax")(np.ones(4, np.float32))
    msg = str(info.value)
    assert f"jax primitive '{prim}'" in msg and jax_importer.UNSUPPORTED[prim].split(":")[0] in msg
    assert "test_jax_frontend.py" in msg  # the user's line, as JAX recorded it
    assert isinstance(info.value, NotImplementedError)


def test_imported_equations_carry_the_users_line():
    def f(x):
        return jnp.exp(x) + 1.0
    imported = minixla.import_jaxpr(jax.make_jaxpr(f)(np.ones(2, np.float32)))
    assert all(e.source_info.filename.endswith("test_jax_frontend.py") for e in imported.eqns)


@pytest.mark.parametrize("backend", BACKENDS)
def test_structural_primitives_of_jnp(backend):
    # jax 0.10's jnp.stack / jnp.tile / jnp.unstack / jnp.split bind primitives of their own
    def f(x, y, i):
        a, b, c = jnp.unstack(x[:3], axis=0)
        parts = jnp.split(x, [1, 3], axis=1)
        upd = jnp.zeros(4).at[i].add(y[0]).at[i + 1].subtract(2.0)  # scatter-add, scatter-sub
        return (jnp.stack([x, 2 * x], axis=1), jnp.tile(y, (2, 3)), jnp.tile(y, 2), a + b * c,
                parts[1], jnp.square(y), upd)
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    y = np.linspace(-1, 1, 5, dtype=np.float32)
    i = np.array([0, 2, 2], np.int32)
    names = {e.primitive.name for e in jax.make_jaxpr(f)(x, y, i).eqns}
    assert {"stack", "unstack", "tile", "split", "square", "scatter-add", "scatter-sub"} <= names
    assert_tree_close(minixla.jit(f, frontend="jax", backend=backend)(x, y, i), jax.jit(f)(x, y, i),
                      rtol=0, atol=0)


def test_calls_and_custom_derivatives_are_inlined():
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)
    f.defvjp(lambda x: (jnp.sin(x), x), lambda r, g: (g * jnp.cos(r),))

    @jax.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))
    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * jax.nn.sigmoid(p[0])))

    def g(x):
        y = jax.checkpoint(lambda z: z * 2)(x)
        return jnp.sum(f(y) + softplus(x) + jax.jit(jnp.exp)(x))
    x = np.linspace(-2, 2, 4).astype(np.float32)
    names = {e.primitive.name for e in jax.make_jaxpr(g)(x).eqns}
    assert {"custom_vjp_call", "custom_jvp_call", "remat2", "jit"} <= names
    assert_tree_close(minixla.jit(g, frontend="jax", backend="jax")(x), jax.jit(g)(x), rtol=1e-6, atol=0)
    gg = jax.grad(g)  # JAX applies the custom rules; the jaxpr holds their results
    assert_tree_close(minixla.jit(gg, frontend="jax", backend="jax")(x), jax.jit(gg)(x), rtol=1e-5, atol=1e-6)


def test_custom_vjp_keeps_jaxs_bwd_under_minixla_grad():
    """An imported ``custom_vjp_call`` differentiates with JAX's ``bwd``: a gradient-clipping
    identity (its bwd is not the derivative of its primal) under ``minixla.grad`` of the
    imported program, eagerly on its jaxpr and compiled on both backends; an integer operand."""
    from minixla.interpreters.eval import eval_jaxpr

    @jax.custom_vjp
    def clip_gradient(x, n):
        return x * n
    clip_gradient.defvjp(lambda x, n: (x * n, n), lambda n, g: (jnp.clip(g * n, -1.0, 1.0), None))

    def f(x, n):
        return jnp.sum(clip_gradient(x * 3.0, n) ** 2) + jnp.sum(x)
    x, n = np.linspace(-2, 2, 5).astype(np.float32), np.float32(0.5)
    want = jax.grad(f)(x, n)
    assert not np.allclose(want, jax.grad(lambda x, n: jnp.sum((x * 3.0 * n) ** 2) + jnp.sum(x))(x, n))
    imported = minixla.import_jaxpr(jax.make_jaxpr(f)(x, n))
    assert "custom_vjp_call" in str(imported)
    got = minixla.grad(lambda x, n: eval_jaxpr(imported.jaxpr, imported.consts, [x, n])[0])(x, n)
    np.testing.assert_array_equal(got, want)
    for backend in BACKENDS:
        g = minixla.grad(minixla.jit(f, frontend="jax", backend=backend))
        np.testing.assert_array_equal(g(x, n), want)
    # an integer operand (no cotangent, JAX's float0) and a value_and_grad
    def h(x, k):
        return jnp.sum(clip_gradient(x, k) ** 2)
    k = np.int32(4)
    v, g = minixla.value_and_grad(minixla.jit(h, frontend="jax"))(x, k)
    np.testing.assert_array_equal(g, jax.grad(h)(x, k))
    np.testing.assert_array_equal(v, jax.jit(h)(x, k))


@pytest.mark.parametrize("backend", BACKENDS)
def test_common_jnp_surface(backend):
    def f(x, i):
        return (jnp.argmax(x, axis=1), jnp.cumsum(x, axis=0), jnp.clip(x, 1, 4), x % 2.5, jnp.expm1(x),
                jnp.round(x / 3), x.astype(jnp.int8) >> 1, jnp.max(x), jnp.prod(x + 1),
                jax.nn.one_hot(jnp.array([0, 2]), 3), jnp.pad(x, 1), x[::-1, 1:], x.T.reshape(-1),
                jnp.dot(x, x.T), x[i], jax.lax.dynamic_slice(x, (i, 0), (1, 2)),
                jax.lax.dynamic_update_slice(x, x[:1, :2] * 10, (i, 1)),
                jnp.take(x, jnp.array([2, 0, 5]), axis=1), jnp.where(x > 2, x, jnp.nan).min(axis=0))
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 1.5
    assert_tree_close(minixla.jit(f, frontend="jax", backend=backend)(x, np.int32(1)),
                      jax.jit(f)(x, np.int32(1)), rtol=2e-7, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dot_general_of_mixed_dtypes(backend):
    # jax 0.10's jnp.matmul hands dot_general mixed dtypes (found by the front end's fuzzer):
    # JAX's CPU/GPU lowering converts both to the result dtype; bools multiply as XLA's predicates
    def f(a, i, p, q):
        return a @ i, i @ a, p @ p.T, p[0] @ a[0, :3], q @ a[:1, 0], q @ -a[:1, 0], q @ jnp.array([jnp.inf])
    a = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    i = np.arange(-6, 6, dtype=np.int32).reshape(4, 3)
    p = np.array([[True, False, True], [False, False, True]])
    q = np.array([False])
    assert_tree_close(minixla.jit(f, frontend="jax", backend=backend)(a, i, p, q), jax.jit(f)(a, i, p, q),
                      rtol=0, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bit_counting_and_mulhi(backend):
    # population_count, clz, mulhi, reduce_xor import as exact compositions of integer ops
    rng = np.random.default_rng(0)

    def ints(dt):
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, size=32, endpoint=True, dtype=dt)
        v[:5] = [0, 1, info.max, info.min, info.max - 1]
        return v

    def f(y, *xs):
        # (reduce_precision: XLA's rounding and flushing on the bits, NaN payloads kept)
        out = [lax.reduce_precision(y, e, m) for e, m in ((8, 7), (5, 10), (8, 0), (4, 3))]
        out.append(lax.reduce_xor((xs[0] > 0).reshape(4, 8), (1,)))
        for x in xs:
            out += [lax.population_count(x), lax.clz(x), lax.mulhi(x, x[::-1]),
                    lax.reduce_xor(x.reshape(4, 8), (0,)), lax.reduce_xor(x.reshape(2, 16), (0, 1))]
        return out
    y = rng.integers(0, 2 ** 32, size=256, dtype=np.uint64).astype(np.uint32).view(np.float32)
    y[:9] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 65504.0, 65520.0, 1.0 + 2 ** -8]
    args = [y] + [ints(d) for d in (np.int8, np.uint16, np.int32, np.uint32)]
    got, want = minixla.jit(f, frontend="jax", backend=backend)(*args), jax.jit(f)(*args)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(f"u{g.dtype.itemsize}"), w.view(f"u{w.dtype.itemsize}"))


def test_division_by_a_broadcast_divisor_is_xlas_reciprocal_product():
    # XLA rewrites div(x, broadcast(y)) into x * broadcast(1/y) (in jax.jit and in JAX eager,
    # whose jnp.true_divide is jitted): an imported `x / 3.0` or `x / column` must be that product
    # (before: ~1/3 of f16 and f32 values were an ulp off); bf16 takes a float32 reciprocal.
    r = np.random.default_rng(0)
    for dt in (np.float16, np.float32, jnp.bfloat16):
        x = (r.standard_normal((64, 64)) * 10).astype(dt)
        s = (r.uniform(0.5, 4, (64, 1))).astype(dt)
        for f, args in ((lambda a: a / 3.0, (x,)), (lambda a, b: a / b, (x, s))):
            want = np.asarray(jax.jit(f)(*args)).astype(np.float64)
            for backend in ("llvm", "jax"):
                got = np.asarray(minixla.jit(f, frontend="jax", backend=backend)(*args)).astype(np.float64)
                np.testing.assert_array_equal(got, want, err_msg=f"{np.dtype(dt).name} {backend}")


def test_imported_nextafter_with_a_rank0_operand_is_jaxs():
    """JAX's jaxprs hold ``nextafter a inf:f16[]`` (``jnp.spacing``, ``lax.nextafter(x, scalar)``):
    the rank-0 operand broadcasts (it raised a select_n ShapeError); bits equal JAX eager's."""
    x = np.array([1, -0.0, 65504, 6e-8, -6e-8, np.inf, np.nan], np.float16)

    def f(x):
        return jax.lax.nextafter(x, np.float16(np.inf)), jax.lax.nextafter(np.float16(0), x), jnp.spacing(x)
    with jax.disable_jit():
        want = f(x)
    for backend in ("llvm", "jax"):
        got = minixla.jit(f, frontend="jax", backend=backend)(x)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g).view(np.uint16), np.asarray(w).view(np.uint16))
