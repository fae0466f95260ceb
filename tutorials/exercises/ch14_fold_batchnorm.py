"""Tutorial 14's exercise: fold an inference batch norm into the convolution before it.

At inference a batch norm after a convolution is a fixed per-channel affine map::

    z = conv(x, w) + b                                   # w: HWIO [kh, kw, C_in, C_out], b: [C_out]
    y = gamma * (z - mean) / sqrt(var + eps) + beta      # gamma, beta, mean, var: [C_out]

so it can be folded into the convolution's weights and bias, leaving one Conv+Bias (+ReLU)
kernel and no batch-norm work at run time (TensorFlow's and TFLite's "fold batch norms";
XLA's ``BatchNormExpander`` expands the op, the folding is the inference compiler's job).

Write ``fold_batchnorm(w, b, gamma, beta, mean, var, eps) -> (w2, b2)`` with NumPy (float32
arrays in, float32 arrays of the same shapes out) such that ``conv(x, w2) + b2 == y`` up to
rounding, for every ``x``.

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch14_fold_batchnorm.py``.
"""
import numpy as np  # noqa: F401 (for your code)


def fold_batchnorm(w, b, gamma, beta, mean, var, eps=1e-5):
    raise NotImplementedError("tutorial 14 exercise: write fold_batchnorm")
