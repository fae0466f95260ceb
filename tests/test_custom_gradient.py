"""``minixla.custom_gradient``, ``closure_convert`` and ``ensure_compile_time_eval`` (issue 14),
against ``jax``'s."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

import minixla as mx
import minixla.numpy as mnp


def _same(got, want):
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _scaled_sin(lib, np_):
    @lib.custom_gradient
    def f(x, y):
        def vjp(ct):
            return ct * np_.cos(x) * y * 10.0, ct * x
        return np_.sin(x) * y, vjp
    return f


def _clip_gradient(lib, np_):
    @lib.custom_gradient
    def f(x):
        return x, lambda g: np_.clip(g, -1.0, 1.0)
    return f


@pytest.mark.parametrize("backend", ("llvm", "jax"))
def test_custom_gradient(backend):
    x, y = np.float32(0.3), np.float32(2.0)
    loss = lambda lib, np_: lambda x, y: _scaled_sin(lib, np_)(x, y) ** 2
    _same(mx.jit(mx.grad(loss(mx, mnp), argnums=(0, 1)), backend=backend)(x, y),
          jax.grad(loss(jax, jnp), argnums=(0, 1))(x, y))
    v = np.linspace(-2, 2, 5).astype(np.float32)
    clip = lambda lib, np_: lambda v: (_clip_gradient(lib, np_)(v) * 5 * v).sum()
    _same(mx.jit(mx.grad(clip(mx, mnp)), backend=backend)(v), jax.grad(clip(jax, jnp))(v))
    per = lambda lib, np_: lib.vmap(lib.grad(lambda x: _scaled_sin(lib, np_)(x, 2.0)))
    _same(per(mx, mnp)(v), per(jax, jnp)(v))
    _same(_scaled_sin(mx, mnp)(x, y), _scaled_sin(jax, jnp)(x, y))


def test_closure_convert_under_grad():
    def loss(lib):
        def f(w):
            conv, consts = lib.closure_convert(lambda x: x * w + w * w, 1.0)
            return conv(3.0, *consts)
        return f
    _same(mx.grad(loss(mx))(np.float32(2.0)), jax.grad(loss(jax))(np.float32(2.0)))
    _same(mx.jit(loss(mx))(np.float32(2.0)), loss(jax)(np.float32(2.0)))


def test_ensure_compile_time_eval():
    def h(lib, np_):
        def f(x):
            with lib.ensure_compile_time_eval():
                a = np_.arange(4)
                n = int(a.sum())  # (computed now: Python can read it inside jit)
            return x * n, np_.arange(2)
        return f
    jaxpr = str(mx.make_jaxpr(h(mx, mnp))(np.float32(2)))
    assert "6.0" in jaxpr and jaxpr.count("iota") == 1
    _same(mx.jit(h(mx, mnp))(np.float32(2)), jax.jit(h(jax, jnp))(np.float32(2)))


_A0 = np.array([[4., 1, 0], [1, 3, 1], [0, 1, 2]], np.float32)
_B0 = np.array([1., 2, 3], np.float32)


def _linear_solve(lax_, np_, symmetric=False):
    def f(a, b):
        sol = lambda matvec, r: np_.linalg.solve(a, r)  # noqa: E731
        x = lax_.custom_linear_solve(lambda x: np_.dot(a, x), b, sol, None if symmetric else sol, symmetric=symmetric)
        return (x * np_.arange(1.0, 4.0)).sum()
    return f


def _sqrt_root(lax_):
    def f(a):
        def newton(g, x0):
            x = x0
            for _ in range(8):
                x = x - g(x) / (2 * x)
            return x
        return lax_.custom_root(lambda x: x ** 2 - a, 1.0, newton, lambda g, y: y / g(1.0))
    return f


@pytest.mark.parametrize("backend", ("llvm", "jax"))
def test_custom_linear_solve_and_custom_root(backend):
    from minixla import lax
    grads = lambda lib, lax_, np_: lib.grad(_linear_solve(lax_, np_), argnums=(0, 1))  # noqa: E731
    _same(mx.jit(grads(mx, lax, mnp), backend=backend)(_A0, _B0), grads(jax, jax.lax, jnp)(_A0, _B0))
    _same(mx.grad(_linear_solve(lax, mnp, True))(_A0, _B0), jax.grad(_linear_solve(jax.lax, jnp, True))(_A0, _B0))
    _same(mx.jvp(_linear_solve(lax, mnp), (_A0, _B0), (_A0 * 0.1, _B0))[1],
          jax.jvp(_linear_solve(jax.lax, jnp), (_A0, _B0), (_A0 * 0.1, _B0))[1])
    a = np.float32(2.0)
    _same(mx.jit(mx.value_and_grad(_sqrt_root(lax)), backend=backend)(a), jax.value_and_grad(_sqrt_root(jax.lax))(a))
    _same(mx.jvp(_sqrt_root(lax), (a,), (np.float32(1.0),)), jax.jvp(_sqrt_root(jax.lax), (a,), (np.float32(1.0),)))


@pytest.mark.parametrize("backend", ("llvm", "jax"))
def test_jax_custom_linear_solve_imports_with_its_transpose_solve(backend):
    import jax.scipy.sparse.linalg as jsl
    # jax.scipy's cg: a while loop inside custom_linear_solve; minixla's grad of the imported
    # program differentiates implicitly (the loop itself has no reverse mode)
    g = lambda a, b: (jsl.cg(lambda x: a @ x, b)[0] * jnp.arange(1., 4.)).sum()  # noqa: E731
    want = jax.grad(g, argnums=(0, 1))(_A0, _B0)
    got = mx.jit(mx.grad(mx.jit(g, frontend="jax", backend=backend), argnums=(0, 1)), backend=backend)(_A0, _B0)
    for x, y in zip(got, want):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)  # (CG's iterates: to rounding)


@pytest.mark.parametrize("backend", ("llvm", "jax"))
def test_debug_nans_names_the_primitive(backend):
    f = lambda np_: lambda x: np_.sqrt(x) + 1  # noqa: E731
    mf = mx.jit(f(mnp), backend=backend)
    with jax.debug_nans(True):
        with pytest.raises(FloatingPointError) as want:
            jax.jit(f(jnp))(np.float32(-1))
    with mx.debug_nans():
        np.testing.assert_array_equal(mf(np.float32(4)), np.float32(3))
        with pytest.raises(FloatingPointError) as got:
            mf(np.float32(-1))
    assert str(got.value) == str(want.value) == "invalid value (nan) encountered in sqrt"
    assert np.isnan(mf(np.float32(-1)))  # (off again outside the block)
    with mx.debug_infs(), pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in div"):
        mx.jit(lambda x: 1.0 / x + 1, backend=backend)(np.float32(0))


def test_debug_nans_config_option_as_jaxs():
    # JAX's global flag: config.update("jax_debug_nans", True); a debug_nans(False) block turns it off
    f = lambda np_: lambda x: np_.sqrt(x) + 1  # noqa: E731
    mf = mx.jit(f(mnp))
    jax.config.update("jax_debug_nans", True)
    try:
        with pytest.raises(FloatingPointError) as want:
            jax.jit(f(jnp))(np.float32(-1))
        with jax.debug_nans(False):
            assert np.isnan(jax.jit(f(jnp))(np.float32(-1)))
    finally:
        jax.config.update("jax_debug_nans", False)
    with mx.config.override(jax_debug_nans=True):
        assert mx.config.jax_debug_nans is True
        with pytest.raises(FloatingPointError) as got:
            mf(np.float32(-1))
        with mx.debug_nans(False):
            assert np.isnan(mf(np.float32(-1)))
    assert str(got.value) == str(want.value)
    assert np.isnan(mf(np.float32(-1))) and mx.config.jax_debug_nans is False
