"""Convolution canonicalization (``passes/conv_canonicalization.py``): a convolution whose input
or output features are not minor-most becomes transpose -> GEMM convolution -> transpose, with
JAX's values on both backends -- NCHW convolutions and the weight gradients reverse mode makes."""
from __future__ import annotations

import contextlib

import jax
import numpy as np
import pytest

import minixla
from minixla import lax

rng = np.random.default_rng(12)

LAYOUTS = [
    dict(x=(2, 3, 7, 6), w=(5, 3, 3, 3), dn=("NCHW", "OIHW", "NCHW"), strides=(1, 1), padding="SAME"),
    dict(x=(3, 6, 6, 2), w=(3, 3, 3, 4), dn=("CHWN", "HWIO", "NHWC"), strides=(2, 1), padding=[(1, 0), (2, 1)]),
    dict(x=(2, 5, 5, 3), w=(2, 2, 3, 4), dn=("NHWC", "HWIO", "NCHW"), strides=(1, 1), padding="VALID",
         rhs_dilation=(2, 1)),
    dict(x=(4, 9, 3), w=(3, 4, 7), dn=("CWN", "WIO", "NCW"), strides=(2,), padding="SAME"),
    dict(x=(1, 2, 6, 6), w=(6, 6, 2, 3), dn=("NCHW", "HWIO", "HWNC"), strides=(1, 1), padding="SAME"),
]


@contextlib.contextmanager
def _x64(on):
    prev = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", on)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", prev)


def _conv(L, case):
    return lambda x, w: L.conv_general_dilated(x, w, case["strides"], case["padding"],
                                               rhs_dilation=case.get("rhs_dilation"),
                                               dimension_numbers=case["dn"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", LAYOUTS, ids=[" ".join(c["dn"]) for c in LAYOUTS])
def test_layouts_become_gemms_with_jax_values(case, dtype):
    x = rng.standard_normal(case["x"]).astype(dtype)
    w = rng.standard_normal(case["w"]).astype(dtype)
    with _x64(dtype == np.float64):
        ref = np.asarray(_conv(jax.lax, case)(x, w))
        compiled = minixla.jit(_conv(lax, case)).lower(x, w).compile()
        strategies = {k["kind"]: k["strategy"] for k in compiled.executable.kernels()}
        assert strategies["convolution"] == "gemm", strategies
        tol = 1e-5 if dtype == np.float32 else 1e-12
        out = compiled(x, w)
        assert out.dtype == ref.dtype and out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
        np.testing.assert_allclose(minixla.jit(_conv(lax, case), backend="jax")(x, w), ref,
                                   rtol=tol, atol=tol)


def test_conv_weight_gradient_is_a_gemm():
    """Reverse mode of an NHWC convolution: the weight gradient reads the activations as
    ``f01b`` (the batch is the contracted feature); it is a GEMM after canonicalization."""
    x = rng.standard_normal((8, 6, 6, 4)).astype(np.float32)
    w = rng.standard_normal((3, 3, 4, 8)).astype(np.float32)
    dn = ("NHWC", "HWIO", "NHWC")

    def loss(L, N):
        return lambda w, x: N.sum(N.tanh(L.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn)))
    compiled = minixla.jit(minixla.grad(loss(lax, minixla.numpy))).lower(w, x).compile()
    assert all(k["strategy"] != "conv-rows" for k in compiled.executable.kernels())
    ref = jax.grad(loss(jax.lax, jax.numpy))(w, x)
    np.testing.assert_allclose(compiled(w, x), ref, rtol=1e-5, atol=1e-5)


def test_grouped_convolution_is_left_alone():
    """The GEMM has no feature groups: a grouped NCHW conv keeps its layout (the loop nest)."""
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    f = lambda L: lambda x, w: L.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=2)  # noqa: E731
    compiled = minixla.jit(f(lax)).lower(x, w).compile()
    assert [k["strategy"] for k in compiled.executable.kernels()] == ["conv-rows"]
    assert not any(i.opcode == "transpose" for i in compiled.hlo_module.entry.instructions)
    np.testing.assert_allclose(compiled(x, w), f(jax.lax)(x, w), rtol=1e-5, atol=1e-5)
