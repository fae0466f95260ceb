"""The rest of jax.nn (issue 14): the small activations, standardize, glu, softmax/log_softmax
``where=``, logsumexp ``b=``/``return_sign=``/``where=``, logmeanexp and dot_product_attention
(implementation="xla": scale, bias, mask, is_causal, sequence lengths, grouped heads) against
JAX eager; one program under jit on both backends, and its gradient."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.nn as mnn
from minixla.core import errors
from minixla.testing import check_against_jax

rng = np.random.default_rng(0)
X = np.array([-3, -1.5, -1, -0.5, -0.0, 0, 0.3, 1, 2.5, 7, np.inf, -np.inf, np.nan], np.float32)
A = rng.standard_normal((3, 4)).astype(np.float32)
W = A > -0.3
B, T, S, N, K, H = 2, 3, 4, 4, 2, 5
Qy = rng.standard_normal((B, T, N, H)).astype(np.float32)
Ky = rng.standard_normal((B, S, K, H)).astype(np.float32)
Vy = rng.standard_normal((B, S, K, H)).astype(np.float32)
BIAS = rng.standard_normal((1, N, T, S)).astype(np.float32)
MASK = rng.random((B, 1, T, S)) > 0.3

CASES = [(fn, (X,), {}) for fn in ("identity", "tanh", "hard_sigmoid", "hard_silu", "hard_swish", "celu",
                                   "squareplus", "sparse_plus", "sparse_sigmoid", "soft_sign", "mish", "log1mexp")] + [
    ("celu", (X, 0.5), {}), ("glu", (A,), {}), ("glu", (A[:2], 0), {}), ("standardize", (A,), {}),
    ("standardize", (A,), dict(axis=0, where=W, algorithm="stable")), ("softmax", (A,), dict(where=W)),
    ("log_softmax", (A,), dict(axis=0, where=W)), ("logsumexp", (A,), dict(axis=1, b=A)),
    ("logsumexp", (A,), dict(axis=1, b=A, return_sign=True)), ("logsumexp", (A,), dict(where=W, keepdims=True)),
    ("logmeanexp", (A,), dict(axis=0, where=W)),
    ("dot_product_attention", (Qy, Ky, Vy), {}), ("dot_product_attention", (Qy[0], Ky[0], Vy[0]), {}),
    ("dot_product_attention", (Qy, Ky, Vy, BIAS, MASK), dict(scale=0.3)),
    ("dot_product_attention", (Qy, Ky, Vy), dict(is_causal=True, query_seq_lengths=np.array([2, 3], np.int32),
                                                 key_value_seq_lengths=np.array([4, 1], np.int32))),
]


def _same(got, want):
    got = list(got) if isinstance(got, tuple) else [got]
    want = list(want) if isinstance(want, tuple) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6, equal_nan=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_eager_matches_jax():
    # every fourth case in CI (each op-by-op JAX reference compiles its ops), all with MINIXLA_DEEP_FUZZ=1
    for name, args, kwargs in CASES if os.environ.get("MINIXLA_DEEP_FUZZ") else CASES[::4]:
        with jax.disable_jit():
            want = getattr(jax.nn, name)(*args, **kwargs)
        try:
            _same(getattr(mnn, name)(*args, **kwargs), want)
        except AssertionError as e:
            raise AssertionError(f"{name} {sorted(kwargs)}: {e}") from None


def _program(nn, np_):
    def f(x, a, w, q, k, v, bias, mask):
        return (nn.mish(x), nn.squareplus(x), nn.glu(a), nn.standardize(a, where=w),
                nn.log_softmax(a, where=w), nn.logsumexp(a, axis=0, b=a),
                nn.dot_product_attention(q, k, v, bias, mask, is_causal=True))
    return f


def test_one_program_under_jit_and_grad():
    args = (X[:10], A, W, Qy, Ky, Vy, BIAS, MASK)
    check_against_jax(_program(mnn, None), _program(jax.nn, None), *args, rtol=2e-6, atol=2e-6)

    def loss(nn, np_):
        return lambda q, k, a: (np_.sum(nn.dot_product_attention(q, k, Vy, mask=MASK, is_causal=True) ** 2)
                                + np_.sum(nn.mish(a) * nn.celu(a)) + nn.logsumexp(a, b=np_.abs(a)))
    import minixla.numpy as mnp
    got = minixla.jit(minixla.grad(loss(mnn, mnp), argnums=(0, 1, 2)))(Qy, Ky, A)
    want = jax.grad(loss(jax.nn, jnp), argnums=(0, 1, 2))(Qy, Ky, A)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_errors_like_jax():
    with pytest.raises(ValueError, match="Unknown algorithm"):
        mnn.standardize(A, algorithm="exact")
    with pytest.raises(errors.ShapeError, match="divisible by 2"):
        mnn.glu(A[:3], axis=0)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        mnn.dot_product_attention(Qy[:, :, :3], Ky, Vy)
    with pytest.raises(ValueError, match="mask dtype should be bool"):
        mnn.dot_product_attention(Qy, Ky, Vy, mask=MASK.astype(np.float32))
    with pytest.raises(ValueError, match="value shape should be"):
        mnn.dot_product_attention(Qy, Ky, Vy[:, :2])
