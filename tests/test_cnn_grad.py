"""The digits CNN's loss gradient (examples/digits_cnn.py's model, minixla.nn's log_softmax and
one_hot) with minixla.value_and_grad, eagerly and as one jitted training step on both backends,
against jax.grad at the same parameters."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.nn as mnn
import minixla.numpy as mnp

from ad_cases import MODES, as_np, assert_tree_close, run

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from digits_cnn import cnn, init_params  # noqa: E402


def loss(np_, nn, lax, p, x, y):
    logits, _ = cnn(p, x, np=np_, lax=lax)
    return -np_.mean(np_.sum(nn.log_softmax(logits) * nn.one_hot(y, 10), axis=1))


#: the eager mode runs the CNN's backward pass op by op (~9x the CPU of a compiled step, the
#: suite's costliest test): with MINIXLA_DEEP_FUZZ=1 only; eager convolution gradients are checked
#: op by op in test_conv_grad.py
CNN_MODES = MODES if os.environ.get("MINIXLA_DEEP_FUZZ") else [m for m in MODES if m != "eager"]


@pytest.mark.parametrize("mode", CNN_MODES)
def test_cnn_value_and_grad_and_sgd_step_match_jax(mode):
    params = jax.tree.map(np.asarray, init_params(jax.random.PRNGKey(0)))
    r = np.random.default_rng(0)
    x = r.uniform(0, 1, (16, 8, 8, 1)).astype(np.float32)
    y = r.integers(0, 10, 16).astype(np.int32)
    want = as_np(jax.value_and_grad(lambda p: loss(jnp, jax.nn, jax.lax, p, x, y))(params))

    def step(p, x, y):
        v, g = minixla.value_and_grad(lambda p: loss(mnp, mnn, minixla.lax, p, x, y))(p)
        return v, g, jax.tree.map(lambda a, b: a - 0.1 * b, p, g)
    v, g, new = run(mode, step, params, x, y)
    assert_tree_close((v, g), want, rtol=1e-4, atol=1e-5)
    assert_tree_close(new, jax.tree.map(lambda a, b: a - 0.1 * b, params, want[1]), rtol=1e-4, atol=1e-5)
