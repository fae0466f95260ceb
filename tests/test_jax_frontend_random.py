"""``jax.random`` inside a function imported by the JAX front end: JAX's typed keys and PRNG
primitives (``random_seed``/``wrap``/``unwrap``/``split``/``fold_in``/``bits``) imported onto
``minixla.random``'s threefry2x32, bit for bit against ``jax.jit`` on both backends -- raw
``PRNGKey`` and new-style ``key`` keys, keys moved by slices, indexing, ``where``, loops, scans,
``cond`` and ``vmap``. The samplers built on ``log``/``log1p`` differ on the LLVM backend where
minixla's own ``log1p`` (a few ulp from XLA's) does, as in ``tests/test_random.py``."""
import os

import numpy as np
import pytest
import jax
import jax.numpy as jnp
import jax.random as jr
from jax import lax

import minixla

#: the hand-off compiles the unrolled threefry rounds slowly (~8 s): with MINIXLA_DEEP_FUZZ=1 only
#: (tests/test_random.py runs minixla.random's threefry on it in CI)
BACKENDS = ("llvm", "jax") if os.environ.get("MINIXLA_DEEP_FUZZ") else ("llvm",)
KEY = jr.key(3)  # a typed key closed over: a constant of the jaxpr


def _bits(a):
    a = np.asarray(a)
    return a.view(np.dtype(f"i{a.dtype.itemsize}")) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else a


def _draws(seed, logits):
    """The samplers a training script uses (one program): new-style keys for all of them, a
    raw ``PRNGKey`` for a few (its jaxpr wraps and unwraps it)."""
    key = jr.key(seed)
    k1, k2, k3 = jr.split(key, 3)
    k4 = jr.fold_in(k1, 7)
    raw1, raw2 = jr.split(jr.PRNGKey(seed))
    exact = [jr.normal(k1, (3, 4)), jr.uniform(k2, (5,), minval=0.3, maxval=1.7),
             jr.uniform(k1, (6,), jnp.float16, -2., 3.), jr.bernoulli(k3, 0.3, (6,)),
             jr.categorical(k4, logits, shape=(4,)), jr.permutation(k2, 10), jr.randint(k3, (5,), -3, 9),
             jr.bits(k4, (3,), jnp.uint8), jr.truncated_normal(k1, -2., 1.5, (7,)),
             jax.vmap(lambda k: jr.uniform(k, (2,), minval=0.3))(jr.split(k4, 4)),  # batched keys
             jr.key_data(jr.split(key, (2, 2))),
             jr.normal(raw1, (3,)), jr.uniform(jr.fold_in(raw2, 3), (2,), minval=-1., maxval=2.), raw2]
    return exact, [jr.exponential(k3, (4,))]


def _keys_through_control_flow(x):
    def body(c, k):
        return c + jr.bits(k, (2,)), jr.bits(k)
    c, ys = lax.scan(body, jnp.zeros(2, jnp.uint32), jr.split(jr.key(1), 3))  # scan over keys

    def step(i, carry):
        k, acc = carry
        k, sub = jr.split(k)
        return k, acc + jr.uniform(sub, (3,))
    k, acc = lax.fori_loop(0, 3, step, (jr.key(2), jnp.zeros(3)))  # a key in the carry
    kk = lax.cond(x.sum() > 0, lambda: jr.fold_in(KEY, 3), lambda: KEY)
    ks = jr.split(KEY, 5)
    picked = ks[jnp.argmax(x)]  # a dynamic index into a key array
    chosen = jnp.where(x[0] > 0, ks[1], ks[2])
    folded = jax.vmap(lambda k, m: jr.bits(jr.fold_in(k, m), (2,)))(ks[:3], jnp.arange(3, dtype=jnp.uint32))
    grid = jnp.concatenate([ks[:2], ks[3:]]).reshape(2, 2)
    return (c, ys, acc, jr.key_data(k), jr.normal(kk, (2,)), jr.bits(picked, (2,)), jr.bits(chosen),
            folded, jr.key_data(grid.T), jax.vmap(jax.vmap(lambda k: jr.bits(k, (3,))))(grid),
            jr.key_data(jax.vmap(jr.key)(jnp.arange(3))))


def _program(seed, logits, x):
    return _draws(seed, logits), _keys_through_control_flow(x)


ARGS = (np.int32(7), np.log(np.arange(1, 6, dtype=np.float32)), np.array([1., -2., 3.], np.float32))


@pytest.fixture(scope="module")
def reference():
    return jax.jit(_program)(*ARGS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jax_random_inside_is_bit_identical(backend, reference):
    (exact_w, trans_w), flow_w = reference
    (exact_g, trans_g), flow_g = minixla.jit(_program, frontend="jax", backend=backend)(*ARGS)
    for i, (g, w) in enumerate(zip(exact_g + list(flow_g), exact_w + list(flow_w))):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w), i
        np.testing.assert_array_equal(_bits(g), _bits(w), err_msg=str(i))
    for g, w in zip(trans_g, trans_w):
        ulp = np.abs(_bits(g).astype(np.int64) - _bits(w).astype(np.int64))
        assert ulp.max() <= (0 if backend == "jax" else 64), ulp


def test_typed_key_input_and_errors():
    # (a constant loop runs eagerly while tracing: an operand-less iota in its body is computed
    # there, not staged into the trace around the loop -- minixla's own tracer and the importer)
    loop = lambda x: x + lax.fori_loop(0, 3, lambda i, c: c + lax.iota(np.float32, 3), np.zeros(3, np.float32))  # noqa: E731
    import minixla.lax as mlax
    mloop = lambda x: x + mlax.fori_loop(0, 3, lambda i, c: c + mlax.iota(np.float32, 3), np.zeros(3, np.float32))  # noqa: E731
    np.testing.assert_array_equal(minixla.jit(mloop)(np.ones(3, np.float32)), [1., 4., 7.])
    np.testing.assert_array_equal(minixla.jit(loop, frontend="jax")(np.ones(3, np.float32)), [1., 4., 7.])
    # import_jaxpr takes a jaxpr whose input is a typed key: the key's uint32 data comes in
    closed = jax.make_jaxpr(lambda k: jr.normal(k, (3,)))(jr.key(0))
    imported = minixla.import_jaxpr(closed)
    assert [(a.shape, a.dtype) for a in imported.in_avals] == [((2,), np.dtype(np.uint32))]
    # another PRNG implementation is a clear error naming it
    with pytest.raises(NotImplementedError, match="philox4x32"):
        minixla.jit(lambda s: jr.bits(jr.key(s, impl="philox4x32"), (2,)), frontend="jax")(np.int32(0))


def _rbg_program(seed, data, key):
    """JAX programs that make rbg and unsafe_rbg keys: ``key(impl=)``, ``wrap_key_data(impl=)``,
    ``PRNGKey`` under ``jax_default_prng_impl="rbg"``, a typed rbg key argument and constant."""
    k = jr.key(seed, impl="rbg")
    a, b = jr.split(k)
    u = jr.wrap_key_data(data, impl="unsafe_rbg")
    us = jr.split(u, (2, 3))
    raw = jr.PRNGKey(seed)  # (uint32[4]: the default implementation is rbg here)
    ys = lax.scan(lambda c, k: (c, jr.bits(k, (2,), jnp.uint16)), 0, jr.split(key, 2))[1]  # keys scanned
    return (jr.uniform(a, (3,)), jr.key_data(jr.fold_in(b, 3)), jr.key_data(us),
            jr.bits(jr.fold_in(u, seed), (5,), jnp.uint8), jr.key_data(jax.vmap(jr.fold_in, (0, None))(us[0], 7)),
            raw, jr.key_data(jr.split(raw)), ys, jr.key_data(jr.fold_in(RBG_KEY, seed)))


RBG_KEY = jr.key(11, impl="unsafe_rbg")


def test_rbg_keys_made_inside_import_bit_identical():
    """rbg / unsafe_rbg keys created, split, folded and drawn from inside an imported program
    (``random_seed``/``random_wrap`` with ``impl=rbg``/``unsafe_rbg``, each primitive vmapped over
    the keys' dims as JAX lowers it) equal ``jax.jit``'s bits (both backends with MINIXLA_DEEP_FUZZ=1)."""
    args = (np.int32(3), np.array([1, 2, 3, 4], np.uint32), jr.key(5, impl="rbg"))
    jax.config.update("jax_default_prng_impl", "rbg")
    try:
        want = jax.jit(_rbg_program)(*args)
        for backend in BACKENDS:
            got = minixla.jit(_rbg_program, frontend="jax", backend=backend)(*args)
            for i, (g, w) in enumerate(zip(got, want)):
                assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w), i
                np.testing.assert_array_equal(g, w, err_msg=f"{backend} #{i}")
        # a typed rbg key in and out of import_jaxpr: uint32[4] data
        imported = minixla.import_jaxpr(jax.make_jaxpr(lambda k: jr.split(k))(args[2]))
        assert [(a.shape, a.dtype) for a in imported.in_avals] == [((4,), np.dtype(np.uint32))]
    finally:
        jax.config.update("jax_default_prng_impl", "threefry2x32")
