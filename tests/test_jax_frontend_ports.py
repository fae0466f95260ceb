"""Small real JAX programs a new user ported (a fresh-user session): each defect they hit, as a
regression test against JAX eager on both backends and through the JAX front end."""
import jax
import numpy as np
import pytest

import minixla
from minixla import lax

BACKENDS = ("llvm", "jax")


@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_with_dimensions_matches_jax(backend):
    # jax.vmap of a convolution binds reshape[dimensions=...]: the import raised UnsupportedError
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    want = jax.lax.reshape(x, (4, 6), dimensions=(2, 0, 1))
    np.testing.assert_array_equal(lax.reshape(x, (4, 6), dimensions=(2, 0, 1)), want)
    f = lambda x: lax.reshape(x, (4, 6), dimensions=(2, 0, 1))  # noqa: E731
    np.testing.assert_array_equal(minixla.jit(f, backend=backend)(x), want)
    g = lambda x: jax.lax.reshape(x, (4, 6), dimensions=(2, 0, 1))  # noqa: E731
    np.testing.assert_array_equal(minixla.jit(g, frontend="jax", backend=backend)(x), want)
    with pytest.raises(TypeError, match=r"reshape dimensions must be a permutation of operand dimensions, "
                                        r"got dimensions \(0, 0, 1\) for shape \(2, 3, 4\)"):
        lax.reshape(x, (24,), dimensions=(0, 0, 1))


def test_reshape_of_keys_with_dimensions_keeps_the_key_words_last():
    # JAX eager cannot run this one (its lowering permutes the key data with the keys' rank),
    # so the reference is the transpose-then-reshape it means
    keys = jax.random.split(jax.random.key(0), 6).reshape(2, 3)
    got = minixla.jit(lambda k: jax.lax.reshape(k, (6,), dimensions=(1, 0)), frontend="jax")(keys)
    want = jax.random.key_data(keys.T.reshape(6))
    np.testing.assert_array_equal(minixla.random.key_data(got), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_grad_of_a_conv_with_pooling_through_the_jax_front_end(backend):
    def loss(k, x):
        y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.lax.reduce_window(jax.nn.relu(y), -np.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return (y ** 2).mean()
    per_example = lambda k, x: jax.vmap(jax.grad(loss), (None, 0))(k, x[:, None])  # noqa: E731
    rs = np.random.RandomState(3)
    k, x = rs.randn(3, 3, 2, 4).astype(np.float32), rs.randn(3, 4, 4, 2).astype(np.float32)
    got = minixla.jit(per_example, frontend="jax", backend=backend)(k, x)
    np.testing.assert_allclose(got, per_example(k, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_batch_group_count_matches_jax(backend):
    # jax.grad of a grouped convolution's kernel binds batch_group_count (UnsupportedError before)
    rs = np.random.RandomState(0)
    x, k = rs.randn(4, 2, 5).astype(np.float32), rs.randn(6, 2, 2).astype(np.float32)
    conv = lambda m: lambda x, k: m.conv_general_dilated(x, k, (1,), [(1, 0)], batch_group_count=2)  # noqa: E731
    want = conv(jax.lax)(x, k)
    np.testing.assert_allclose(minixla.jit(conv(lax), backend=backend)(x, k), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(minixla.jit(conv(jax.lax), frontend="jax", backend=backend)(x, k), want,
                               rtol=1e-6, atol=1e-6)
    xg, kg = rs.randn(2, 4, 5, 5).astype(np.float32), rs.randn(4, 2, 2, 2).astype(np.float32)
    grouped = lambda k: (jax.lax.conv_general_dilated(xg, k, (2, 1), [(1, 0), (0, 1)], rhs_dilation=(1, 2),  # noqa: E731
                                                      feature_group_count=2) ** 2).sum()
    np.testing.assert_allclose(minixla.jit(jax.grad(grouped), frontend="jax", backend=backend)(kg),
                               jax.grad(grouped)(kg), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw, message", [
    (dict(lhs=(3, 2, 3), rhs=(2, 2, 1)), "batch_group_count must divide lhs batch dimension size, but 2 does not divide 3"),
    (dict(lhs=(4, 2, 3), rhs=(3, 2, 1)), "must be a multiple of batch_group_count, but 3 is not a multiple of 2"),
    (dict(lhs=(4, 4, 3), rhs=(2, 2, 1), feature_group_count=2), "At most one of batch_group_count and feature_group_count"),
])
def test_conv_batch_group_count_errors_are_jaxs(kw, message):
    lhs, rhs = np.ones(kw.pop("lhs"), np.float32), np.ones(kw.pop("rhs"), np.float32)
    with pytest.raises(ValueError, match=message):
        jax.lax.conv_general_dilated(lhs, rhs, (1,), "VALID", batch_group_count=2, **kw)
    with pytest.raises(ValueError, match=message):
        lax.conv_general_dilated(lhs, rhs, (1,), "VALID", batch_group_count=2, **kw)


@pytest.mark.parametrize("backend", BACKENDS)
def test_digitize_through_the_jax_front_end_matches_jax(backend):
    # jnp.digitize binds two searchsorted loops and a select on `bins` being increasing: once
    # the select folds, the while-loop simplifier's rewrite of the first loop removed the second
    # as dead, and the pass then looked it up ("while... is not in list")
    v = np.array([0.5, -1.5, 0.2, np.nan, 1.0, -0.0], np.float32)
    f = lambda v: jax.numpy.digitize(v, jax.numpy.array([-1.0, 0.0, 1.0]))  # noqa: E731
    got = minixla.jit(f, frontend="jax", backend=backend)(v)
    want = f(v)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sampler", ["categorical", "bernoulli", "truncated_normal"])
def test_random_shape_that_does_not_broadcast_is_jaxs_value_error(sampler):
    # was NumPy's "shape mismatch: objects cannot be broadcast..." without the user's line
    logits = np.ones((4, 5), np.float32)
    calls = {"categorical": lambda r, k: r.categorical(k, logits, shape=(2, 3)),
             "bernoulli": lambda r, k: r.bernoulli(k, np.full(4, 0.5, np.float32), shape=(3,)),
             "truncated_normal": lambda r, k: r.truncated_normal(k, np.zeros(4, np.float32), 1.0, shape=(3,))}
    with pytest.raises(ValueError) as want:
        calls[sampler](jax.random, jax.random.key(0))
    with pytest.raises(ValueError) as got:
        calls[sampler](minixla.random, minixla.random.key(0))
    text = str(want.value).replace("np.int64(4)", "4")  # (JAX's categorical shows a NumPy int)
    assert str(got.value).splitlines()[0] == text
    assert "test_jax_frontend_ports.py" in str(got.value)


_WEAK_CASES = {  # (minixla's, JAX's): the gradient's weak type follows the computation, as JAX's
    "times_literal": (lambda a: a * 2, lambda a: a * 2),
    "sin": (lambda a: minixla.numpy.sin(a), lambda a: jax.numpy.sin(a)),
    "square": (lambda a: a * a, lambda a: a * a),
    "times_strong": (lambda a: a * np.float32(2), lambda a: a * np.float32(2)),
}


@pytest.mark.parametrize("case", sorted(_WEAK_CASES))
def test_grad_of_a_python_float_is_weakly_typed_as_in_jax(case):
    # the seed was a strong 1.0 and the transpose read a weak literal (`2` in `a * 2`) as a
    # strong one, so `grad(f)(1.0) + float16_array` was float32 where JAX's is float16
    mf, jf = _WEAK_CASES[case]
    h = np.ones(2, np.float16)
    for x in (1.0, np.float32(1.0)):
        want = jax.grad(jf)(x)
        got = minixla.grad(mf)(x)
        assert bool(getattr(got, "weak_type", False)) == want.weak_type, x
        np.testing.assert_array_equal(got, want)
        want_h = jax.jit(lambda h: jax.grad(jf)(x) + h)(h)
        for backend in BACKENDS:
            got_h = minixla.jit(lambda h: minixla.grad(mf)(x) + h, backend=backend)(h)
            assert got_h.dtype == want_h.dtype, (x, backend)
            np.testing.assert_array_equal(got_h, want_h)
    want_v = jax.vjp(jf, 1.0)[1](1.0)[0]
    got_v = minixla.vjp(mf, 1.0)[1](1.0)[0]
    assert bool(getattr(got_v, "weak_type", False)) == want_v.weak_type


@pytest.mark.parametrize("backend", BACKENDS)
def test_identity_and_zero_gradients_of_python_floats_are_weak_as_in_jax(backend):
    # grad(lambda a: a)(1.0) (the seed itself) and the zero gradient of an unused Python float
    # were strong: `+ float16_array` gave float32 under jit, float16 in JAX
    h = np.ones(2, np.float16)
    for mf, jf in (((lambda a, b: a), (lambda a, b: a)),):
        for argnums in (0, 1):
            want = jax.jit(lambda h: jax.grad(jf, argnums)(1.0, 2.0) + h)(h)
            got = minixla.jit(lambda h: minixla.grad(mf, argnums)(1.0, 2.0) + h, backend=backend)(h)
            assert got.dtype == want.dtype, argnums
            np.testing.assert_array_equal(got, want)
    got = minixla.grad(lambda a, b: a, argnums=(0, 1))(1.0, 2.0)
    want = jax.grad(lambda a, b: a, argnums=(0, 1))(1.0, 2.0)
    assert [bool(getattr(g, "weak_type", False)) for g in got] == [w.weak_type for w in want]
    strong = minixla.grad(lambda a, b: a, argnums=(0, 1))(np.float32(1.0), np.float32(2.0))
    assert not any(getattr(g, "weak_type", False) for g in strong)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrow_float_fma_is_xla_cpus_two_roundings(dtype):
    # XLA:CPU computes f16/bf16 ops in f32 rounding after each, so jax.random's jitted
    # `floats * span + minval` is round(round(a*b) + c); the LLVM backend's f32 fma rounded once
    # (jax.random.uniform(key, (6,), float16, -2., 3.) was an ulp off in 2 of 6 values)
    dt = jax.numpy.dtype(dtype)
    rs = np.random.RandomState(0)
    a, b, c = ((rs.rand(4096) * s + o).astype(dt) for s, o in ((3, -1), (3, 0), (1, -0.5)))
    want = np.asarray(jax.jit(lambda a, b, c: a * b + c)(a, b, c)).view(np.int16)
    for backend in BACKENDS:
        got = minixla.jit(lambda a, b, c: lax.fma(a, b, c), backend=backend)(a, b, c)
        np.testing.assert_array_equal(np.asarray(got).view(np.int16), want)
    keys = jax.random.split(jax.random.key(7), 3)[0]
    draw = lambda k: (jax.random.uniform(k, (64,), dt, -2., 3.),  # noqa: E731
                      jax.random.truncated_normal(k, -1., 2., (64,), dt))
    for g, w in zip(minixla.jit(draw, frontend="jax")(keys), draw(keys)):
        np.testing.assert_array_equal(np.asarray(g).view(np.int16), np.asarray(w).view(np.int16))
