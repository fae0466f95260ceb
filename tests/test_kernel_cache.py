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


def test_a_dropped_program_frees_its_engine():
    # The kernel cache keeps a bounded number of engines; once it lets go, the last executable
    # using an engine frees it with its machine code.
    import gc
    import weakref
    f = minixla.jit(lambda x: x * 1234.5 + 1)
    f(np.ones(8, np.float32))
    engine = weakref.ref(next(iter(f._cache.values())).executable._jit)
    kernel_cache.clear()
    assert engine() is not None  # still in use by f
    del f
    gc.collect()
    assert engine() is None


def test_kernel_cache_keeps_at_most_max_engines(monkeypatch):
    monkeypatch.setattr(kernel_cache, "MAX_ENGINES", 3)
    kernel_cache.clear()
    for i in range(6):
        minixla.jit(lambda x: x * float(i) - 7.0)(np.ones(4, np.float32))
        assert kernel_cache.engines() <= 3
    hits = kernel_cache.stats["kernel_hits"]
    minixla.jit(lambda x: x * 5.0 - 7.0)(np.ones(4, np.float32))  # the last one: still cached
    assert kernel_cache.stats["kernel_hits"] == hits + 1
    kernel_cache.clear()


_DROPPED_PROGRAMS = r"""
import gc, json, sys
import numpy as np
import minixla
from minixla.backends.llvm import compile_server, kernel_cache
# Smaller bounds than the defaults, so that a short run reaches the steady state: the kernel
# cache full, the compile workers replaced a few times.
kernel_cache.MAX_ENGINES = 16
compile_server.RECYCLE_AFTER = 60

def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

x = np.ones(8, np.float32)
rss = []
for i in range(int(sys.argv[1])):
    f = minixla.jit(lambda x: x * float(i) + 1)  # a new constant: a new kernel every time
    assert f(x)[0] == i + 1
    del f
    if i + 1 in (100, int(sys.argv[1])):
        gc.collect()
        rss.append(rss_mib())
print(json.dumps({"rss": rss, "engines": kernel_cache.engines()}))
"""


def test_memory_of_dropped_programs_is_released():
    # Regression: 6,000 dropped programs grew the process by 620 MiB (jax.jit: 22): the kernel
    # cache kept every engine alive, and every LLVM optimizer run in the parent leaked ~80 KiB
    # (llvmlite). Measured: +137 KiB per program before, flat after (+0.6 MiB over 1,800 programs
    # at the default bounds). 250 programs past the first 100 must add less than 6 MiB (the old
    # code: +55 MiB over 400).
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, MINIXLA_COMPILE_WORKERS="2")
    r = subprocess.run([sys.executable, "-c", _DROPPED_PROGRAMS, "350"], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    first, last = out["rss"]
    assert out["engines"] <= 16
    assert last - first < 6, f"RSS grew {last - first:.1f} MiB over 250 dropped programs"
