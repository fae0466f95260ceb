"""The sign of a zero convolution output, as XLA's: every convolution XLA keeps starts its sums
from +0.0 (a sum of -0.0 products is +0.0), and the ones its simplifier turns into a multiply
(a window of ones, one input and one output feature per group) keep a -0.0 product
(``passes/algebraic_simplifier.py``, rule A15). Found by the grad fuzzer (seed 10001: a
conv_transpose with lhs dilation gave -0.0 where XLA gives +0.0) after seed 9654 (a depthwise
1x1 conv gave +0.0 where XLA gives -0.0)."""
import jax
import numpy as np
import pytest

import minixla

P1 = [(0, 0)]
CASES = {  # name: lhs shape, rhs shape, conv keyword arguments
    "depthwise w1": ((1, 4, 5), (4, 1, 1), dict(window_strides=(1,), padding=P1, feature_group_count=4)),
    "depthwise w1 stride 2": ((1, 4, 5), (4, 1, 1), dict(window_strides=(2,), padding=P1, feature_group_count=4)),
    "depthwise w1 multiplier 2": ((1, 4, 5), (8, 1, 1), dict(window_strides=(1,), padding=P1, feature_group_count=4)),
    "2 features per group": ((1, 4, 5), (2, 2, 1), dict(window_strides=(1,), padding=P1, feature_group_count=2)),
    "depthwise w1 padded": ((1, 4, 5), (4, 1, 1), dict(window_strides=(1,), padding=[(1, 1)], feature_group_count=4)),
    "depthwise w1 lhs dilation": ((1, 4, 5), (4, 1, 1), dict(window_strides=(1,), padding=P1, lhs_dilation=(2,),
                                                              feature_group_count=4)),
    "depthwise 1x1 NHWC": ((2, 3, 3, 4), (1, 1, 1, 4), dict(window_strides=(1, 1), padding=P1 * 2, feature_group_count=4,
                                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    "1x1 one feature": ((2, 1, 3, 3), (1, 1, 1, 1), dict(window_strides=(1, 1), padding=P1 * 2)),
    "1x1 one input, 3 outputs": ((2, 1, 3, 3), (3, 1, 1, 1), dict(window_strides=(1, 1), padding=P1 * 2)),
    "2x2 two features": ((2, 2, 3, 3), (3, 2, 2, 2), dict(window_strides=(1, 1), padding=P1 * 2)),
    "2x2 padded": ((1, 1, 3, 3), (2, 1, 2, 2), dict(window_strides=(1, 1), padding=[(1, 1)] * 2)),
    "transposed (lhs dilation, padding)": ((1, 1, 3, 3), (2, 1, 2, 2), dict(window_strides=(1, 1), padding=[(1, 0), (0, 2)],
                                                                           lhs_dilation=(2, 2), rhs_dilation=(2, 2))),
}


@pytest.mark.parametrize("backend", ["llvm", "jax"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_signed_zeros_of_convolutions_match_xla(backend, dtype):
    rng = np.random.default_rng(0)
    for name, (xs, ws, kw) in CASES.items():
        for x, w in [(np.full(xs, -0.0), rng.uniform(0.5, 2.0, ws)),  # every product -0.0
                     (rng.choice([0.0, -0.0], xs), rng.choice([1.5, -0.75], ws))]:
            x, w = x.astype(dtype), w.astype(dtype)
            want = np.asarray(jax.jit(lambda a, b: jax.lax.conv_general_dilated(a, b, **kw))(x, w))
            got = np.asarray(minixla.jit(lambda a, b: minixla.lax.conv_general_dilated(a, b, **kw),
                                         backend=backend)(x, w))
            assert got.dtype == want.dtype, name
            np.testing.assert_array_equal(got, want, err_msg=name)
            assert (np.signbit(got) == np.signbit(want)).all(), name


def test_a_depthwise_1x1_conv_is_a_multiply():
    kw = CASES["depthwise 1x1 NHWC"][2]
    f = minixla.jit(lambda a, b: minixla.lax.conv_general_dilated(a, b, **kw))
    text = f.lower(np.ones((2, 3, 3, 4), np.float32), np.ones((1, 1, 1, 4), np.float32)).compile().as_text()
    assert "convolution" not in text and "multiply" in text
