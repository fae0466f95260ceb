"""Recompilation you can see: compile logs, cache-miss explanations, the recompile warning,
static arguments by value, ``clear_cache`` / ``_cache_size``, the bounded in-memory cache.

Programs are tiny; tests that compile many signatures use the jax backend (XLA compiles a
tiny program faster than LLVM) -- the diagnostics are the same for both backends.
"""
import logging
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.jit_diagnostics import RecompilationWarning


@pytest.fixture
def log(caplog):
    caplog.set_level(logging.WARNING, logger="minixla.jit")
    return caplog


def _messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "minixla.jit"]


def test_log_compiles_one_line_per_compile(log):
    def affine(x, p):
        return x @ p["w"] + p["b"]
    f = minixla.jit(affine)
    x, p = np.ones((2, 3), np.float32), {"w": np.ones((3, 4), np.float32), "b": np.zeros(4, np.float32)}
    with minixla.config.override(minixla_log_compiles=True):
        f(x, p)
        f(x, p)  # cached: no line
    (line,) = _messages(log)
    assert re.search(r"Compiled affine \(.*test_jit_diagnostics.py:\d+\) for \(x: f32\[2,3\], "
                     r"p\['b'\]: f32\[4\], p\['w'\]: f32\[3,4\]\): trace [\d.]+ ms, lower [\d.]+ ms, "
                     r"passes [\d.]+ ms, codegen [\d.]+ ms; persistent cache off$", line), line


def test_explain_cache_misses_by_pytree_path(log):
    def loss(x, p):
        return mnp.sum(x @ p["w"])
    f = minixla.jit(loss, backend="jax")
    with minixla.config.override(minixla_explain_cache_misses=True):
        f(np.ones((2, 32), np.float32), {"w": np.ones((32, 32), np.float32)})
        f(np.ones((2, 64), np.float32), {"w": np.ones((64, 32), np.float32)})
    first, second = _messages(log)
    assert "TRACING CACHE MISS" in first and "never seen function" in first and "loss defined at" in first
    assert "at p['w'], now f32[64,32] and before f32[32,32]" in second
    assert "at x, now f32[2,64] and before f32[2,32]" in second


def test_explain_weak_type_and_static_values(log):
    f = minixla.jit(lambda x, y, n: x * y + n, backend="jax", static_argnums=2)
    x = np.ones(3, np.float32)
    with minixla.config.override(minixla_explain_cache_misses=True):
        f(x, 2.0, 1)
        f(x, np.float32(2.0), 1)
        f(x, np.float32(2.0), 5)
    _, weak, static = _messages(log)
    assert "at y, now f32[] and before f32[]{weak_type=True} (only the weak type differs" in weak
    assert "static argument n: now 5 and before 1" in static


def test_recompile_warning_after_threshold_names_the_varying_argument():
    f = minixla.jit(lambda tokens, scale: tokens * scale, backend="jax")
    with minixla.config.override(minixla_recompile_warning_threshold=3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in (5, 6, 7, 8, 9):
                f(np.ones(n, np.float32), np.float32(2))
    (w,) = [c for c in caught if issubclass(c.category, RecompilationWarning)]  # warned once
    msg = str(w.message)
    assert "compiled for 4 distinct input signatures" in msg
    assert "tokens (f32[5], f32[6], f32[7], f32[8])" in msg and "scale" not in msg.split("vary")[0].split("tokens")[0]
    assert "pad inputs to a few bucket sizes" in msg


def test_static_arguments_compare_by_value_and_unhashable_is_jax_error():
    f = minixla.jit(lambda x, shape: mnp.reshape(x, shape), backend="jax", static_argnums=1)
    x = np.arange(6, dtype=np.float32)
    f(x, (2, 3))
    f(x, tuple([2, 3]))  # equal, not identical: the same entry
    assert f._cache_size() == 1
    with pytest.raises(ValueError, match=r"(?s)Non-hashable static arguments are not supported.*<class 'list'>, "
                                         r"\[2, 3\].*TypeError: unhashable type: 'list'"):
        f(x, [2, 3])
    with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
        jax.jit(lambda x, shape: jnp.reshape(x, shape), static_argnums=1)(x, [2, 3])


def test_clear_cache_and_bounded_lru(log):
    f = minixla.jit(lambda x: x + 1, backend="jax")
    with minixla.config.override(minixla_jit_cache_size=2, minixla_explain_cache_misses=True):
        for n in (1, 2, 3):
            f(np.ones(n, np.float32))
        assert f._cache_size() == 2
        f(np.ones(3, np.float32))  # still cached
        assert len(_messages(log)) == 3
        f(np.ones(1, np.float32))  # the least recently used one was evicted: compiles again
        assert "has left the in-memory cache" in _messages(log)[-1]
        f.clear_cache()
        assert f._cache_size() == 0
        f(np.ones(3, np.float32))
        assert "never seen function" in _messages(log)[-1]


def test_x64_mode_is_part_of_the_key(log):
    """Regression: a program traced without x64 was reused after enabling it (f64 input
    compiled as f32); JAX keys its cache on the config too, and the miss says so."""
    f = minixla.jit(lambda x: x * 2, backend="jax")
    x = np.ones(3, np.float64)
    assert f(x).dtype == jnp.asarray(x).dtype == np.float32
    prev = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        with minixla.config.override(minixla_explain_cache_misses=True):
            assert f(x).dtype == (jax.numpy.asarray(x) * 2).dtype == np.float64
    finally:
        jax.config.update("jax_enable_x64", prev)
    assert "config jax_enable_x64: now True and before False" in _messages(log)[-1]


def test_cached_call_checks_nothing_twice_but_still_converts():
    """The dispatch fast path: non-contiguous arrays and Python scalars still work."""
    f = minixla.jit(lambda x, s: x * s)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(f(x, 2.0), x * 2)
    np.testing.assert_array_equal(f(x.T.copy().T, 2.0), x * 2)  # (F-ordered: copied to C order)
    np.testing.assert_array_equal(f(x[:, ::-1].T.T, 3.0), x[:, ::-1] * 3)
