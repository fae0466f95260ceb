"""Tutorial 01's exercise: ``eval_jaxpr`` gives the values JAX eager computes."""
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from _exercise import exercise_module

CASES = {
    "mlp": (lambda np_, w, b, x: np_.maximum(x @ w + b, 0.0),
            [(3, 4), (4,), (8, 3)]),
    "softmax": (lambda np_, x: np_.exp(x - np_.max(x, axis=1, keepdims=True))
                / np_.sum(np_.exp(x - np_.max(x, axis=1, keepdims=True)), axis=1, keepdims=True),
                [(4, 5)]),
    "two_outputs": (lambda np_, x, y: (np_.tanh(x) * y, np_.sum(x * 2.0)), [(6,), (6,)]),
    "where": (lambda np_, x: np_.where(x > 0, x, 0.5 * x), [(7,)]),
    "constant_array": (lambda np_, x: x + np_.asarray(np.arange(3, dtype=np.float32)), [(2, 3)]),
}


@pytest.mark.parametrize("name", CASES)
def test_eval_jaxpr_matches_jax(name, rng):
    fn, shapes = CASES[name]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    closed = minixla.make_jaxpr(lambda *a: fn(mnp, *a))(*args)
    got = exercise_module("ch01_eval_jaxpr").eval_jaxpr(closed, *args)
    want = fn(jnp, *args)
    want = list(want) if isinstance(want, tuple) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.asarray(g).shape == w.shape and np.asarray(g).dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)
