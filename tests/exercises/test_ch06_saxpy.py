"""Tutorial 06's exercise: the llvmlite ``saxpy`` loop computes NumPy's ``a * x + y`` in float32
for every length (vector body and remainder), and ``-O3`` vectorizes it."""
import ctypes
import re

import numpy as np
import pytest
from llvmlite import ir

from minixla.backends.llvm.target import JitModule
from _exercise import exercise_module

SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


@pytest.fixture(scope="module")
def saxpy():
    module = ir.Module(name="saxpy_exercise")
    fn = exercise_module("ch06_saxpy").emit_saxpy(module)
    assert fn.name == "saxpy"
    jit = JitModule(str(module), ["saxpy"])
    call = SIGNATURE(jit.addresses["saxpy"])

    def run(a, x, y):
        call(a, x.ctypes.data, y.ctypes.data, x.size)
    run.jit = jit  # keep the machine code alive
    return run


@pytest.mark.parametrize("n", [0, 1, 7, 8, 33, 1000, 4099])
def test_values(saxpy, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n + 4).astype(np.float32)  # the tail past n must not be touched
    want = y.copy()
    a = np.float32(1.7)
    want[:n] = a * x + y[:n]
    saxpy(a, x, y)
    np.testing.assert_array_equal(y, want)


def test_special_values(saxpy):
    x = np.array([np.nan, np.inf, -np.inf, 1.0, -0.0, 3e38, 1.0, 2.0], np.float32)
    y = np.array([1.0, 1.0, np.inf, np.nan, -0.0, 3e38, -1.0, -4.0], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.float32(2.0) * x + y
    saxpy(np.float32(2.0), x, y)
    np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))  # -0.0 and NaN included


def test_vectorized(saxpy):
    body = saxpy.jit.function_ir("saxpy")
    assert re.search(r"<\d+ x float>", body), body
