"""jax's top-level host API in minixla: named_scope/named_call, disable_jit, block_until_ready,
device_get, devices, clear_caches, typeof, jacobian, float0, ShapeDtypeStruct -- against JAX."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp


def _scoped(np_, scope, call):
    def f(x):
        with scope("layer1"):
            y = np_.sin(x) * 2
        return call(lambda z: z + 1, name="head")(y)
    return f


def test_named_scope_and_named_call_name_the_hlo_instructions_as_jax():
    x = np.ones(3, np.float32)
    f = _scoped(mnp, minixla.named_scope, minixla.named_call)
    names = [i.metadata.get("op_name") for i in minixla.jit(f).lower(x).hlo_module.entry.instructions]
    assert "layer1/sin" in names and "layer1/mul" in names and "head/add" in names
    jax_text = jax.jit(_scoped(jnp, jax.named_scope, jax.named_call)).lower(x).as_text(debug_info=True)
    for name in ("layer1/sin", "layer1/mul", "head/add"):
        assert f"/{name}\"" in jax_text  # JAX's op_name ends the same way ("jit(f)/layer1/sin")
    np.testing.assert_array_equal(minixla.jit(f)(x), jax.jit(_scoped(jnp, jax.named_scope, jax.named_call))(x))
    with pytest.raises(TypeError, match="named_scope name argument must be a string"):
        with minixla.named_scope(1):
            pass


def test_disable_jit_runs_the_python_body_op_by_op():
    seen = []

    def f(x):
        seen.append(type(x))
        return x * 2 + 1
    g = minixla.jit(f)
    x = np.arange(3, dtype=np.float32)
    with minixla.disable_jit():
        out = g(x)
        with minixla.disable_jit(False):
            g(x)
    assert seen[0] is np.ndarray and seen[1] is not np.ndarray  # eager, then traced
    with jax.disable_jit():
        want = jax.jit(lambda v: v * 2 + 1)(x)
    np.testing.assert_array_equal(out, want)
    g(x)
    assert len(seen) == 2  # compiled once, then served from the cache


def test_block_until_ready_device_get_and_devices():
    x = np.ones(2, np.float32)
    for backend in ("llvm", "jax"):
        y = minixla.jit(lambda v: v * 3, backend=backend)(x)
        assert minixla.block_until_ready(y) is y
        got = minixla.device_get({"y": y, "n": 3})
        assert type(got["y"]) is np.ndarray and got["n"] == 3
        np.testing.assert_array_equal(got["y"], jax.device_get(jax.jit(lambda v: v * 3)(x)))
    assert minixla.devices() == jax.devices() and minixla.device_count() == jax.device_count()
    assert minixla.local_devices() == jax.local_devices() and minixla.local_device_count() == jax.local_device_count()
    assert minixla.default_backend() == jax.default_backend()
    assert (minixla.process_index(), minixla.process_count()) == (jax.process_index(), jax.process_count())


def test_clear_caches_forgets_every_compiled_program():
    traces = []
    f = minixla.jit(lambda v: traces.append(1) or v + 1)
    x = np.ones(2, np.float32)
    f(x)
    f(x)
    assert len(traces) == 1 and f._cache_size() == 1
    minixla.clear_caches()
    assert f._cache_size() == 0
    np.testing.assert_array_equal(f(x), x + 1)
    assert len(traces) == 2


def test_typeof_jacobian_float0_shape_dtype_struct():
    for v, jv in ((1.0, 1.0), (2, 2), (np.ones((2, 3), np.float16),) * 2, (mnp.asarray(1.0), jnp.asarray(1.0))):
        a, j = minixla.typeof(v), jax.typeof(jv)
        assert (a.shape, a.dtype, a.weak_type) == (j.shape, j.dtype, j.weak_type), v
    x = np.array([0.5, 1.5], np.float32)
    np.testing.assert_allclose(minixla.jacobian(lambda v: mnp.sin(v) * v)(x),
                               jax.jacobian(lambda v: jnp.sin(v) * v)(x), rtol=1e-6)
    assert minixla.float0 == jax.dtypes.float0
    assert minixla.eval_shape(mnp.sin, x) == minixla.ShapeDtypeStruct((2,), np.float32)
