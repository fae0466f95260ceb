"""``Compiled.memory_analysis()`` against JAX's, and the kernel-traffic figures."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.memory import kernel_traffic

f32 = np.float32
ROWS, COLS = 512, 1024


def softmax(x, np=mnp, lax=lax):
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def layernorm(x, g, b, np=mnp, lax=lax):
    mean = np.mean(x, axis=1, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=1, keepdims=True)
    return d / np.sqrt(var + 1e-5) * g + b


def mlp(x, w1, b1, w2, b2, np=mnp, lax=lax):
    h = np.maximum(x @ w1 + b1, 0.0)
    return np.maximum(h @ w2 + b2, 0.0)


def conv_bias_relu(x, w, b, np=mnp, lax=lax):
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return np.maximum(y + b, 0.0)


def _args(shapes):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(f32) for s in shapes]


CASES = {
    # name: (function, argument shapes, the "small row vector" allowance in bytes)
    "softmax": (softmax, [(ROWS, COLS)], ROWS * 4),
    "layernorm": (layernorm, [(ROWS, COLS), (COLS,), (COLS,)], ROWS * 4),
    "mlp": (mlp, [(64, 256), (256, 512), (512,), (512, 128), (128,)], 64 * 4),
    "conv_bias_relu": (conv_bias_relu, [(4, 16, 16, 8), (3, 3, 8, 16), (16,)], 4 * 4),
}


@pytest.mark.parametrize("name", list(CASES))
def test_temp_bytes_at_most_xla_plus_a_row_vector(name):
    fn, shapes, row = CASES[name]
    args = _args(shapes)
    ours = minixla.jit(fn, backend="jax").lower(*args).compile().memory_analysis()
    xla = jax.jit(lambda *a: fn(*a, np=jnp, lax=jax.lax)).lower(*args).compile().memory_analysis()
    assert ours.temp_size_in_bytes <= xla.temp_size_in_bytes + row, (ours, xla)
    assert ours.argument_size_in_bytes == xla.argument_size_in_bytes
    assert ours.output_size_in_bytes == xla.output_size_in_bytes
    assert ours.alias_size_in_bytes == xla.alias_size_in_bytes == 0


def test_fields_bounds_and_curve():
    args = _args([(8, 16), (16, 32), (32,), (32, 4), (4,)])
    compiled = minixla.jit(mlp).lower(*args).compile()
    ma = compiled.memory_analysis()
    arg_bytes = sum(a.nbytes for a in args)
    assert ma.argument_size_in_bytes == arg_bytes and ma.output_size_in_bytes == 8 * 4 * 4
    assert ma.temp_size_in_bytes == ma.temp_lower_bound_in_bytes == 8 * 32 * 4   # the hidden layer
    assert ma.peak_live_bytes == max(ma.live_bytes) >= arg_bytes + ma.temp_lower_bound_in_bytes
    assert ma.peak_memory_in_bytes == arg_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
    assert len(ma.live_bytes) == len(compiled.hlo_module.entry.instructions)
    assert "temporaries (arena)" in str(ma)


def test_lower_bound_never_exceeds_the_arena():
    def f(x):
        a = mnp.exp(x) @ x
        b = mnp.tanh(x) @ x
        return (a @ b) @ (a - b)
    x = _args([(16, 16)])[0]
    ma = minixla.jit(f, backend="jax").lower(x).compile().memory_analysis()
    assert 0 < ma.temp_lower_bound_in_bytes <= ma.temp_size_in_bytes <= ma.intermediate_size_in_bytes


def test_fusion_reduces_kernel_traffic():
    x = _args([(64, 128)])[0]
    lowered = minixla.jit(softmax, backend="jax").lower(x)
    compiled = lowered.compile()
    before, after = kernel_traffic(lowered.hlo_module), kernel_traffic(compiled.hlo_module)
    # after: one row fusion (fusion rule 8) reads x once and writes the output
    n = x.nbytes
    assert after == n + n
    assert before > 2 * after
