"""The LLVM backend's tiled transpose kernel (``kernels_transpose.py``): every permutation form
it takes, edge tiles, dtypes with and without a vector type, and the unit split over threads,
each bit-identical to JAX's transpose (a copy); and the forms it leaves to the loop kernel."""
from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.backends.llvm import compile_module
from minixla.backends.llvm.kernels_transpose import tile_size, transpose_groups

rng = np.random.default_rng(11)


def _array(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(-100 if dtype.kind == "i" else 0, 100, shape).astype(dtype)
    x = rng.standard_normal(shape).astype(np.float32).astype(dtype)
    if x.size > 2:  # signed zeros and a NaN travel bit for bit
        flat = x.reshape(-1)
        flat[0], flat[1] = -0.0, np.nan
    return x


def _run(perm, x, num_threads=None):
    c = minixla.jit(lambda a: mnp.transpose(a, perm)).lower(x).compile()
    exe = c.executable if num_threads is None else compile_module(c.hlo_module, c.buffer_assignment,
                                                                  num_threads=num_threads)
    return exe, exe(x)[0]


def _same_bits(out, ref):
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert out.tobytes() == ref.tobytes()


@pytest.mark.parametrize("shape,perm", [
    ((48, 64), (1, 0)),            # whole tiles
    ((37, 21), (1, 0)),            # edge tiles in both dims
    ((5, 3), (1, 0)),              # smaller than one tile
    ((3, 19, 33), (0, 2, 1)),      # a batch prefix
    ((6, 5, 40), (2, 0, 1)),       # groups of several dims
    ((17, 4, 9), (1, 2, 0)),
    ((2, 3, 18, 20), (0, 1, 3, 2)),
])
def test_transpose_kernel_forms_bit_identical(shape, perm):
    x = _array(shape, np.float32)
    exe, out = _run(perm, x)
    assert [k["strategy"] for k in exe.kernels()] == ["transpose"]
    _same_bits(out, np.asarray(jnp.transpose(jnp.asarray(x), perm)))


@pytest.mark.parametrize("dtype", [np.int16, np.float16, ml_dtypes.bfloat16, np.int8, np.bool_, np.uint32])
def test_transpose_kernel_dtypes(dtype):
    x = _array((35, 2 * tile_size(np.dtype(dtype).itemsize) + 3), dtype)
    exe, out = _run((1, 0), x)
    assert [k["strategy"] for k in exe.kernels()] == ["transpose"]
    _same_bits(out, np.asarray(jnp.transpose(jnp.asarray(x))))


def test_transpose_kernel_split_over_threads_is_the_same(monkeypatch):
    from minixla.backends.llvm import executable
    monkeypatch.setattr(executable, "PARALLEL_MIN_NS", 0)  # split every kernel that has units
    x = _array((4, 70, 300), np.float32)
    ref = np.asarray(jnp.transpose(jnp.asarray(x), (0, 2, 1)))
    for threads in (1, 3):
        exe, out = _run((0, 2, 1), x, num_threads=threads)
        _same_bits(out, ref)
    assert exe.kernels()[0]["units"] == 4 * -(-70 // 16) and exe.kernels()[0]["parallel"]


def test_other_permutations_keep_the_loop_kernel():
    x = _array((4, 5, 6), np.float32)
    for perm in ((2, 1, 0), (1, 0, 2)):  # no two swapped groups / the minor dim kept
        exe, out = _run(perm, x)
        assert exe.kernels()[0]["strategy"] == "loop"
        _same_bits(out, np.asarray(jnp.transpose(jnp.asarray(x), perm)))
    from minixla.hlo.ir import HloInstruction, Shape  # (a size-1 group: a reshape, not a transpose)
    op = HloInstruction("parameter", Shape(np.float32, (1, 5)), [], {"parameter_number": 0}, name="p")
    assert transpose_groups(HloInstruction("transpose", Shape(np.float32, (5, 1)), [op],
                                           {"dimensions": (1, 0)}, name="t")) is None
