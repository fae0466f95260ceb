"""The process-wide kernel cache of the LLVM backend (``minixla/backends/llvm/kernel_cache.py``)
and the GEMM micro-kernel library (``gemm.micro_kernel``)."""
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla.backends.llvm import gemm as G
from minixla.backends.llvm import kernel_cache


def _compile(f, *args):
    return minixla.jit(f).lower(*args).compile()


def _symbols(compiled):
    return [k.symbol for k in compiled.executable._kernels]


def test_recompiling_the_same_program_reuses_its_machine_code():
    x = np.linspace(-3, 3, 96, dtype=np.float32).reshape(8, 12)
    kernel_cache.clear()
    first = _compile(lambda x: mnp.tanh(x) * 2.0 + mnp.sum(x, axis=-1, keepdims=True), x)
    assert kernel_cache.stats["kernel_misses"] >= 1 and kernel_cache.stats["kernel_hits"] == 0
    before = dict(kernel_cache.stats)
    again = _compile(lambda x: mnp.tanh(x) * 2.0 + mnp.sum(x, axis=-1, keepdims=True), x)  # a fresh function
    assert kernel_cache.stats["kernel_misses"] == before["kernel_misses"]
    assert kernel_cache.stats["program_hits"] == before["program_hits"] + 1
    assert _symbols(again) == _symbols(first)
    assert again.executable._jit is first.executable._jit
    np.testing.assert_array_equal(again(x), first(x))


def test_a_kernel_is_shared_between_programs():
    x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(4, 16)
    w = np.linspace(1, -1, 16 * 8, dtype=np.float32).reshape(16, 8)
    kernel_cache.clear()
    layer = _compile(lambda x, w: mnp.maximum(mnp.matmul(x, w), 0.0), x, w)
    hits = kernel_cache.stats["kernel_hits"]
    # the same layer followed by another one: the first layer's kernel comes from the cache
    two = _compile(lambda x, w: mnp.matmul(mnp.maximum(mnp.matmul(x, w), 0.0), w.T), x, w)
    assert kernel_cache.stats["kernel_hits"] >= hits + 1
    shared = set(_symbols(layer)) & set(_symbols(two))
    assert shared
    # the program's IR shows the shared kernel's body although it was compiled with ``layer``
    assert all(f'define void @"{s}"' in two.executable.llvm_ir for s in shared)
    assert all(f"@{s}(" in two.executable.optimized_llvm_ir for s in shared)
    assert two.executable.asm
    h = np.maximum(x @ w, 0.0)
    np.testing.assert_allclose(two(x, w), h @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(layer(x, w), h, rtol=1e-5, atol=1e-5)


def test_different_shapes_and_constants_do_not_collide():
    kernel_cache.clear()
    a, b = np.ones((4, 8), np.float32), np.ones((6, 4), np.float32)
    fa = _compile(lambda x: x * 2.0 + 1.0, a)
    fb = _compile(lambda x: x * 2.0 + 1.0, b)
    fc = _compile(lambda x: x * 3.0 + 1.0, a)
    assert len({*_symbols(fa), *_symbols(fb), *_symbols(fc)}) == 3
    np.testing.assert_array_equal(fa(a), a * 2 + 1)
    np.testing.assert_array_equal(fb(b), b * 2 + 1)
    np.testing.assert_array_equal(fc(a), a * 3 + 1)


def test_cached_code_outlives_clear_and_eviction(monkeypatch):
    x = np.arange(12, dtype=np.float32)
    kernel_cache.clear()
    f = _compile(lambda x: mnp.sqrt(x) + 1.0, x)
    monkeypatch.setattr(kernel_cache, "MAX_KERNELS", 1)
    g = _compile(lambda x: mnp.sqrt(x) + 2.0, x)   # evicts f's kernel
    h = _compile(lambda x: mnp.sqrt(x) + 1.0, x)   # compiled again
    kernel_cache.clear()
    np.testing.assert_array_equal(f(x), np.sqrt(x) + 1.0)
    np.testing.assert_array_equal(g(x), np.sqrt(x) + 2.0)
    np.testing.assert_array_equal(h(x), np.sqrt(x) + 1.0)


def test_gemm_micro_kernel_is_compiled_once_per_tile_shape():
    x, w = np.ones((5, 16), np.float32), np.ones((16, 72), np.float32)  # edge tiles: 1 row, 8 columns
    c = _compile(lambda a, b: mnp.matmul(a, b), x, w)
    np.testing.assert_array_equal(c(x, w), x @ w)
    names = {G.micro_kernel_name(np.float32, G.MR, G.NV, False),
             G.micro_kernel_name(np.float32, 1, G.NV, False)}
    assert names <= set(G._library)
    jits = {n: G._library[n] for n in names}
    c2 = _compile(lambda a, b: mnp.matmul(a, b) + 1.0, x, w)
    assert all(G._library[n] is jits[n] for n in names)
    np.testing.assert_array_equal(c2(x, w), x @ w + 1.0)
