"""``x.at[idx]`` updates with traced indices (before: UnsupportedError): the flat positions are
``x[idx]`` of an iota — the same index semantics as a gather — then one scatter, so negative,
out-of-range (dropped, or clamped with ``mode="clip"``), mixed slice/array and repeated indices
behave as in JAX, on both backends."""
import jax.numpy as jnp
import numpy as np
import pytest

import minixla

X = np.arange(12.0, dtype=np.float32).reshape(3, 4)
UPDATES = [
    ("set", lambda x, i: x.at[i].set(-1.0)),
    ("add-slice", lambda x, i: x.at[i, 1:3].add(10.0)),
    ("multiply-column", lambda x, i: x.at[:, i].multiply(2.0)),
    ("set-clip", lambda x, i: x.at[i].set(-1.0, mode="clip")),
    ("max-diagonal", lambda x, i: x.at[i, i].max(100.0)),
    ("get-fill", lambda x, i: x.at[i].get(mode="fill", fill_value=7.0)),
]


@pytest.mark.parametrize("backend", ["llvm", "jax"])
@pytest.mark.parametrize("name,f", UPDATES, ids=[u[0] for u in UPDATES])
def test_scalar_traced_index(name, f, backend):
    g = minixla.jit(f, backend=backend)
    for i in (1, -1, 3, -4, 5):  # in range, from the end, out of range both ways
        np.testing.assert_array_equal(g(X, np.int32(i)), f(jnp.asarray(X), jnp.int32(i)))


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_array_traced_indices(backend):
    idx = np.array([0, 2, 2, -1, 7], np.int32)  # a repeat, one from the end, one out of range
    for f in (lambda x, i: x.at[i].add(1.0), lambda x, i: x.at[1, i].set(5.0),
              lambda x, i: x.at[i % 3, :].min(0.0)):
        np.testing.assert_array_equal(minixla.jit(f, backend=backend)(X, idx), f(jnp.asarray(X), jnp.asarray(idx)))


def test_dtype_rules_hold_for_traced_indices():
    u8 = np.arange(6, dtype=np.uint8)
    f = lambda x, i: x.at[i].set(300)  # noqa: E731 (a Python int wraps into uint8, as in JAX)
    np.testing.assert_array_equal(minixla.jit(f)(u8, np.int32(2)), f(jnp.asarray(u8), jnp.int32(2)))
    with pytest.raises(TypeError, match="bool"):
        minixla.jit(lambda x, i: x.at[i].add(True))(np.zeros(3, bool), np.int32(0))
