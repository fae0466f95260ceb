"""jax.lax names real programs use (issue 14): ``reduce_precision`` (bit-exact, XLA's rounding),
``mulhi``, ``reduce_xor``, the structural helpers and the convolution wrappers, on both backends
and through the JAX front end, against JAX eager; JAX's errors for bad input."""
import ml_dtypes
import numpy as np
import pytest
import jax
import jax.numpy as jnp

import minixla as mx
from minixla import lax

BACKENDS = ("llvm", "jax")

#: f32 bit patterns: zeros, infs, NaNs (with payloads), subnormals, the f16/bf16 edges, ties
_BITS = np.array([0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 1, 0x807fffff,
                  0x00800000, 0x3f800000, 0x3f808000, 0x3f818000, 0x3f7fffff, 0x477fe000, 0x477ff000, 0x47800000,
                  0x38800000, 0x387fffff, 0x33800000, 0x7f7fffff, 0x3f80ffff, 0x3fffffff, 0xc0490fdb], np.uint32)


def _same(got, want):
    gl, wl = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(gl) == len(wl)
    for g, w in zip(gl, wl):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if g.dtype.kind == "f" or g.dtype == ml_dtypes.bfloat16:
            np.testing.assert_array_equal(g.view(f"u{g.itemsize}"), w.view(f"u{w.itemsize}"))
        else:
            np.testing.assert_array_equal(g, w)


_WIDTHS = [(8, 7), (5, 10), (4, 3), (8, 0), (1, 0), (8, 23)]  # (bf16, f16, fp8 e4m3, ...)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduce_precision_bits(backend):
    x = _BITS.view(np.float32)
    want = [jax.lax.reduce_precision(x, e, m) for e, m in _WIDTHS]
    _same(mx.jit(lambda x: [lax.reduce_precision(x, e, m) for e, m in _WIDTHS], backend=backend)(x), want)
    if backend == "llvm":
        _same([lax.reduce_precision(x, e, m) for e, m in _WIDTHS], want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduce_precision_narrow_types_transforms_and_frontend(backend):
    h = np.array([1.0, 65504, 6e-5, 3e-8, -0.0, np.inf, np.nan, 1.0625], np.float32)
    for d in (np.float16, ml_dtypes.bfloat16):
        _same(mx.jit(lambda x: lax.reduce_precision(x, 4, 3), backend=backend)(h.astype(d)),
              jax.lax.reduce_precision(h.astype(d), 4, 3))
    x = np.array([1.0, 1.3, -2.7, 1e-3], np.float32)
    f = lambda lib: lambda x: jnp.sum(lib.reduce_precision(x * 3.0, 5, 2) ** 2) if lib is jax.lax else \
        mx.numpy.sum(lib.reduce_precision(x * 3.0, 5, 2) ** 2)
    _same(mx.jit(mx.grad(f(lax)), backend=backend)(x), jax.grad(f(jax.lax))(x))  # (linear, as JAX)
    _same(mx.jit(mx.vmap(lambda x: lax.reduce_precision(x, 5, 2)), backend=backend)(x[:, None]),
          jax.vmap(lambda x: jax.lax.reduce_precision(x, 5, 2))(x[:, None]))
    _same(mx.jit(lambda: lax.reduce_precision(1.5, 5, 2), backend=backend)(), jax.lax.reduce_precision(1.5, 5, 2))
    g = lambda x: jax.lax.reduce_precision(x, 5, 10)
    _same(mx.jit(g, backend=backend, frontend="jax")(_BITS.view(np.float32)), g(_BITS.view(np.float32)))


def test_reduce_precision_errors():
    with pytest.raises(TypeError, match="reduce_precision does not accept dtype int32"):
        lax.reduce_precision(np.arange(3, dtype=np.int32), 5, 2)
    with pytest.raises(ValueError, match="exponent_bits must be positive; got 0"):
        lax.reduce_precision(np.ones(2, np.float32), 0, 2)
    with pytest.raises(ValueError, match="mantissa_bits must be non-negative; got -1"):
        lax.reduce_precision(np.ones(2, np.float32), 5, -1)
    with pytest.raises(TypeError):
        lax.reduce_precision(np.ones(2, np.float32), 5.0, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mulhi_and_reduce_xor(backend):
    a = np.array([-7, 2**31 - 1, -2**31, 12345678, 0], np.int32)
    b = np.array([3, 2**31 - 1, -2**31, -98765432, -1], np.int32)
    for x, y in ((a, b), (a.view(np.uint32), b.view(np.uint32)), (a.astype(np.int8), b.astype(np.int8)),
                 (a.astype(np.uint16), b.astype(np.uint16))):
        _same(mx.jit(lax.mulhi, backend=backend)(x, y), jax.lax.mulhi(x, y))
    _same(mx.jit(lambda x: lax.mulhi(x, 3), backend=backend)(a), jax.lax.mulhi(a, 3))
    m = (np.arange(35).reshape(5, 7) * 2654435761 % 1000).astype(np.int32)
    for axes in ((0,), (1,), (0, 1), ()):
        _same(mx.jit(lambda x: lax.reduce_xor(x, axes), backend=backend)(m), jax.lax.reduce_xor(m, axes))
    _same(mx.jit(lambda x: lax.reduce_xor(x, (1,)), backend=backend)(m > 500), jax.lax.reduce_xor(m > 500, (1,)))
    _same(lax.reduce_xor(np.zeros((0, 3), np.uint8), (0,)), jax.lax.reduce_xor(np.zeros((0, 3), np.uint8), (0,)))


def test_mulhi_reduce_xor_errors():
    i = np.arange(3, dtype=np.int32)
    with pytest.raises(TypeError, match="mulhi does not accept dtype float32 at position 1"):
        lax.mulhi(i, i.astype(np.float32))
    with pytest.raises(TypeError, match="requires arguments to have the same dtypes, got int32, uint32"):
        lax.mulhi(i, i.astype(np.uint32))
    with pytest.raises(ValueError, match=r"incompatible shapes for broadcasting: \(3,\), \(4,\)"):
        lax.mulhi(i, np.arange(4, dtype=np.int32))
    with pytest.raises(TypeError, match="logical reduction requires operand dtype bool or int, got float32"):
        lax.reduce_xor(i.astype(np.float32), (0,))
    with pytest.raises(ValueError):
        lax.reduce_xor(i, (1,))


_X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
_STRUCTURAL = {
    "split": lambda L: lambda x: L.split(x, (1, 0, 3), axis=-1),
    "stack": lambda L: lambda x: L.stack([x, x + 1], axis=-1),
    "unstack": lambda L: lambda x: L.unstack(x, 1),
    "tile": lambda L: lambda x: L.tile(x, (2, 1, 3)),
    "index_take": lambda L: lambda x: L.index_take(x, (np.array([0, -1, 3]), np.array([5, 1, -2])), (0, 2)),
    "empty": lambda L: lambda x: L.empty((2, 3), np.int16),
    "scatter_sub": lambda L: lambda x: L.scatter_sub(
        x, np.array([[0], [1], [0]]), np.full((3, 3, 4), 2.5, np.float32),
        jax.lax.ScatterDimensionNumbers((1, 2), (0,), (0,))),
    "scatter_sub_uint8": lambda L: lambda x: L.scatter_sub(
        x.astype(np.uint8)[0], np.array([[0], [2]]), np.full((2, 4), 7, np.uint8),
        jax.lax.ScatterDimensionNumbers((1,), (0,), (0,))),
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_structural_helpers(backend):
    for name, f in _STRUCTURAL.items():
        _same(mx.jit(f(lax), backend=backend)(_X), f(jax.lax)(_X))
    g = lambda x: (jax.lax.split(x, (1, 3), axis=2), jnp.stack([x, x]), jnp.unstack(x), jnp.tile(x, (2, 1, 1, 2)))
    _same(mx.jit(g, backend=backend, frontend="jax")(_X), g(_X))
    split_loss = lambda L, s: lambda x: s(v.sum() * (i + 1) for i, v in enumerate(L.split(x, (1, 3), 2)))
    _same(mx.grad(split_loss(lax, sum))(_X), jax.grad(split_loss(jax.lax, sum))(_X))
    assert lax.dtype(1.0) == jax.lax.dtype(1.0) and lax.dtype(np.int64(1)) == jax.lax.dtype(np.int64(1))
    assert lax.dtype(np.float16) == np.float16 and lax.broadcast_shapes((2, 1), (3,)) == (2, 3)


def test_structural_errors():
    with pytest.raises(ValueError, match=r"Sum of sizes 3 must be equal to dimension 2 of the operand shape \[2, 3, 4\]"):
        lax.split(_X, (1, 2), axis=2)
    with pytest.raises(ValueError, match="Sizes passed to split must be nonnegative"):
        lax.split(_X, (4, -1), axis=1)
    with pytest.raises(ValueError, match="All input arrays must have the same shape"):
        lax.stack([_X, _X[:1]])
    with pytest.raises(ValueError, match="different numbers of dimensions"):
        lax.stack([_X, _X[0]])
    with pytest.raises(TypeError, match=r"reps length must be equal to the ndim of x, got len\(reps\)=1"):
        lax.tile(_X, (2,))
    with pytest.raises(ValueError, match="axis 3 is out of bounds for array of dimension 3"):
        lax.unstack(_X, 3)
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: shapes=\[\(2, 1\), \(3, 4\)\]"):
        lax.broadcast_shapes((2, 1), (3, 4))
    with pytest.raises(TypeError, match=r"Cannot determine dtype of \[1, 2\]"):
        lax.dtype([1, 2])


@pytest.mark.parametrize("ops", [[np.float32(2), 1], [np.float32(2), np.float32(2), np.int32(1)],
                                 [np.float32(2), np.float16(1)]])
def test_stack_dtype_mismatch_error_is_jaxs(ops):
    # lax.stack does not promote: JAX's TypeError text listing every operand's dtype (a weak
    # Python float joins f32 as JAX; a Python int does not)
    with pytest.raises(TypeError) as ref:
        jax.lax.stack(ops)
    for f in (lax.stack, mx.jit(lax.stack)):
        with pytest.raises(TypeError) as got:
            f(ops)
        assert str(ref.value) in str(got.value).splitlines()[0]  # minixla prefixes "stack: "
    _same(mx.jit(lax.stack)([np.float32(2), 1.0]), jax.lax.stack([np.float32(2), 1.0]))


_IMG = np.random.default_rng(0).normal(size=(2, 3, 6, 5)).astype(np.float32)
_K = np.random.default_rng(1).normal(size=(4, 3, 3, 2)).astype(np.float32)
_NHWC = np.transpose(_IMG, (0, 2, 3, 1))
_CONVS = [
    lambda L: L.conv(_IMG, _K, (1, 2), "SAME"),
    lambda L: L.conv_with_general_padding(_IMG, _K, (2, 1), ((1, 0), (2, 1)), (1, 2), (2, 1)),
    lambda L: L.conv_general_dilated_patches(_IMG, (2, 3), (1, 1), "VALID"),
    lambda L: L.conv_general_dilated_patches(_NHWC, (3, 2), (2, 1), "SAME", dimension_numbers=("NHWC", "OIHW", "NHWC")),
    lambda L: L.conv_general_dilated_patches(_NHWC, (3, 2), (1, 1), [(1, 1), (0, 2)], rhs_dilation=(1, 2),
                                             dimension_numbers=("NHWC", "HWIO", "NCHW")),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_wrappers_and_patches(backend):
    for f in _CONVS:
        got, want = mx.jit(lambda: f(lax), backend=backend)(), f(jax.lax)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # (sums: to rounding, as the conv tests)
    # the patches are the input's values themselves (a one-hot kernel): exact
    _same(mx.jit(lambda: _CONVS[2](lax), backend=backend)(), _CONVS[2](jax.lax))
