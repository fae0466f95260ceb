"""Tutorial 04's exercise: ``bytes_moved`` counts each kernel's distinct operands and result."""
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.memory import kernel_traffic
from _exercise import exercise_module


def softmax(x):
    e = mnp.exp(x - mnp.max(x, axis=1, keepdims=True))
    return e / mnp.sum(e, axis=1, keepdims=True)


def block(x, w, b):
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return mnp.maximum(y + b, 0.0)


CASES = {
    "softmax": (softmax, [(64, 128)]),
    "softmax_long_rows": (softmax, [(4, 16384)]),
    "mlp": (lambda x, w, b: mnp.tanh(x @ w + b).reshape(-1), [(16, 8), (8, 4), (4,)]),
    "conv_block": (block, [(2, 6, 6, 3), (3, 3, 3, 4), (4,)]),
    "square": (lambda x: x * x, [(5, 7)]),
}


def test_pinned_by_hand():
    """x * y + x on f32[8]: unfused, multiply moves 3 arrays and add 3 (x is read by both);
    fused, one kLoop kernel reads x and y once and writes the result: 3 arrays of 32 bytes."""
    bytes_moved = exercise_module("ch04_bytes_moved").bytes_moved
    lowered = minixla.jit(lambda x, y: x * y + x).lower(np.ones(8, np.float32), np.ones(8, np.float32))
    assert bytes_moved(lowered.hlo_module) == 6 * 32
    assert bytes_moved(lowered.compile().hlo_module) == 3 * 32


def test_an_operand_read_twice_counts_once():
    bytes_moved = exercise_module("ch04_bytes_moved").bytes_moved
    lowered = minixla.jit(lambda x: x * x).lower(np.ones((5, 7), np.float32))
    assert bytes_moved(lowered.hlo_module) == 2 * 5 * 7 * 4


@pytest.mark.parametrize("name", CASES)
def test_matches_kernel_traffic(name, rng):
    bytes_moved = exercise_module("ch04_bytes_moved").bytes_moved
    fn, shapes = CASES[name]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    lowered = minixla.jit(fn).lower(*args)
    compiled = lowered.compile()
    assert bytes_moved(lowered.hlo_module) == kernel_traffic(lowered.hlo_module)
    assert bytes_moved(compiled.hlo_module) == kernel_traffic(compiled.hlo_module)
