"""Float sums on the LLVM backend accumulate in blocks combined pairwise (``reductions.py``),
so their error grows like ``log2(n)`` and a block size, not like ``n``: full, row and column
reductions (reduce kernels), sums inside fusions (``mean``) and row kernels (softmax,
layernorm), against float64 NumPy and JAX. Before, ``mean(full(2**24, 0.1f))`` was 0.10041.
Also: results do not depend on the thread count, and the blocked loops stay vectorized.
"""
from __future__ import annotations

import re

import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.backends.llvm import compile_module

EPS32 = float(np.finfo(np.float32).eps)
#: a few roundings: what a pairwise sum of float32 gives at every n tested (JAX is within it too)
BOUND = 8 * EPS32

rng = np.random.default_rng(11)


def rel_err(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))


@pytest.mark.parametrize("k", [10, 14, 17, 20, 24])
def test_full_sum_and_mean_of_a_constant(k):
    x = np.full(1 << k, 0.1, np.float32)
    exact = float(np.float32(0.1)) * x.size
    for ours, theirs, ref in ((mnp.sum, jnp.sum, exact), (mnp.mean, jnp.mean, exact / x.size)):
        out = minixla.jit(ours)(x)
        assert rel_err(out, ref) <= BOUND, (ours.__name__, rel_err(out, ref))
        assert rel_err(theirs(x), ref) <= BOUND


@pytest.mark.parametrize("k", [17, 20, 24])
def test_row_sums(k):
    for x in (np.full((4, (1 << k) // 4), 0.1, np.float32),
              rng.uniform(0, 1, (4, (1 << k) // 4)).astype(np.float32)):
        ref = x.astype(np.float64).sum(axis=1)
        assert rel_err(minixla.jit(lambda a: mnp.sum(a, axis=1))(x), ref) <= BOUND
        assert rel_err(jnp.sum(x, axis=1), ref) <= BOUND


@pytest.mark.parametrize("shape,axes", [((4096, 1024), (0,)), ((1 << 16, 16), (0,)), ((1 << 20, 4), (0,)),
                                        ((1 << 20, 1), (0,)), ((300, 70, 5), (0, 2)), ((7, 3000, 129), (1,)),
                                        ((3, 5000, 7), (0, 1)), ((2, 3), (0,))],
                         ids=["4096x1024", "65536x16", "2^20x4", "2^20x1", "mixed", "middle", "leading", "tiny"])
def test_column_and_mixed_sums(shape, axes):
    for x in (np.full(shape, 0.1, np.float32), rng.uniform(0, 1, shape).astype(np.float32)):
        ref = x.astype(np.float64).sum(axis=axes)
        out = minixla.jit(lambda a: mnp.sum(a, axis=axes))(x)
        assert rel_err(out, ref) <= BOUND, rel_err(out, ref)
        assert rel_err(jnp.sum(x, axis=axes), ref) <= BOUND


@pytest.mark.parametrize("k", [20, 24])
def test_variance(k):
    x = (rng.standard_normal(1 << k) + 1).astype(np.float32)
    ref = x.astype(np.float64).var()
    assert rel_err(minixla.jit(mnp.var)(x), ref) <= BOUND
    assert rel_err(jnp.var(x), ref) <= BOUND


def _softmax(np_):
    def f(a):
        e = np_.exp(a - np_.max(a, axis=-1, keepdims=True))
        return e / np_.sum(e, axis=-1, keepdims=True)
    return f


def _layernorm(np_):
    def f(a):
        m = np_.mean(a, axis=-1, keepdims=True)
        v = np_.mean((a - m) ** 2, axis=-1, keepdims=True)
        return (a - m) / np_.sqrt(v + 1e-5)
    return f


@pytest.mark.parametrize("cols", [8192, 1 << 20], ids=["row-kernel", "long-rows"])
def test_softmax_and_layernorm(cols):
    """8192 columns: one row kernel (fusion rule 8) summing 8 blocks; 2**20: past its budget,
    a reduce kernel per sum."""
    rows = 4
    x = rng.uniform(0, 0.1, (rows, cols)).astype(np.float32)
    x64 = x.astype(np.float64)
    exe = minixla.jit(_softmax(mnp)).lower(x).compile().executable
    assert ("rows" in [k["strategy"] for k in exe.kernels()]) == (cols == 8192)
    for f, bound in ((_softmax, BOUND), (_layernorm, BOUND)):
        ref = f(np)(x64)
        assert rel_err(minixla.jit(f(mnp))(x), ref) <= bound, (f.__name__, rel_err(minixla.jit(f(mnp))(x), ref))
        assert rel_err(f(jnp)(x), ref) <= bound
    y = (3.0 + 0.1 * rng.standard_normal((rows, cols))).astype(np.float32)  # the mean is 30 std away
    ref = _layernorm(np)(y.astype(np.float64))
    assert rel_err(minixla.jit(_layernorm(mnp))(y), ref) <= 2 * BOUND


def test_float16_sum_accumulates_in_float32_as_jax():
    h = np.full(1 << 16, 0.1, np.float16)
    out = minixla.jit(mnp.sum)(h)
    assert out.dtype == np.float16 and float(out) == float(jnp.sum(h))


def _compiled(f, x, num_threads):
    c = minixla.jit(f).lower(x).compile()
    return compile_module(c.hlo_module, c.buffer_assignment, num_threads=num_threads)


@pytest.mark.parametrize("case", ["full", "rows", "columns", "row-kernel"])
def test_blocked_sums_do_not_depend_on_thread_count(case, monkeypatch):
    from minixla.backends.llvm import executable
    monkeypatch.setattr(executable, "PARALLEL_MIN_NS", 0)  # split every kernel that has units
    f, shape = {"full": (lambda a: mnp.sum(a, axis=1) + mnp.sum(a), (6, 50000)),
                "rows": (lambda a: mnp.sum(a, axis=-1), (6, 5, 30001)),
                "columns": (lambda a: mnp.sum(a, axis=1), (6, 3000, 33)),
                "row-kernel": (_softmax(mnp), (6, 8000))}[case]
    x = rng.standard_normal(shape).astype(np.float32)
    one, three = _compiled(f, x, 1), _compiled(f, x, 3)
    assert any(k["parallel"] for k in three.kernels())
    np.testing.assert_array_equal(one(x)[0], three(x)[0])


@pytest.mark.parametrize("case", ["full", "rows", "columns", "row-kernel", "mean"])
def test_blocked_loops_are_vectorized(case):
    f, shape = {"full": (lambda np_, a: np_.sum(a), (1 << 16,)),
                "rows": (lambda np_, a: np_.sum(a, axis=-1), (8, 8192)),
                "columns": (lambda np_, a: np_.sum(a, axis=0), (4096, 256)),
                "row-kernel": (lambda np_, a: _softmax(np_)(a), (16, 8192)),
                "mean": (lambda np_, a: np_.mean(a), (1 << 16,))}[case]
    x = rng.standard_normal(shape).astype(np.float32)
    exe = minixla.jit(lambda a: f(mnp, a)).lower(x).compile().executable
    assert re.search(r"fadd reassoc <(8|16) x float>", exe.optimized_llvm_ir)
    np.testing.assert_allclose(exe(x)[0], f(jnp, x), rtol=2e-6, atol=1e-6 * np.sqrt(x.size))
