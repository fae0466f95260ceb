# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tutorial 12 — jit in practice: caches, recompilation, the persistent cache, benchmarking
#
# The compiler of chapters 01-08 turns one function and one set of input shapes into machine
# code. Users live with the system *around* it: what `jit(f)(x)` does when it has seen `x`'s
# shape before, when it has not, what survives a restarted process, and how to time any of it
# honestly. This chapter walks through minixla's answers, which are JAX's:
#
# - the **in-memory cache** keyed by the arguments' pytree structure and avals (`jax/_src/pjit.py`),
#   with the diagnostics that say when and why it missed (`jax_log_compiles`, `jax_explain_cache_misses`);
# - the **persistent compilation cache** on disk (`jax/_src/compilation_cache.py`, `cache_key.py`);
# - **benchmarking pitfalls**: warm-up, compile time against run time, variance.

# %%
import logging
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, str(pathlib.Path.cwd().parent))  # the repository root, for tutorials.solutions

import minixla
import minixla.numpy as mnp

logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s", stream=sys.stdout, force=True)


def layer(x, w):
    return mnp.tanh(x @ w)


rng = np.random.default_rng(0)
w = rng.standard_normal((16, 8)).astype(np.float32)

# %% [markdown]
# ## 1. The in-memory cache: one compile per signature
#
# A jitted function keeps a table from *signature* to compiled executable. The signature is
# what the traced program depends on: the pytree structure of the arguments, each leaf's
# shape, dtype and weak type (the aval), the values of static arguments, and the configuration
# (`jax_enable_x64`). The values of arrays are not part of it — the program is the same for
# every value. `minixla_log_compiles` prints one line per compilation, with the time of each
# stage (trace, lowering, the HLO passes, code generation).

# %%
f = minixla.jit(layer)
with minixla.config.override(minixla_log_compiles=True):
    f(rng.standard_normal((4, 16)).astype(np.float32), w)   # compiles
    f(rng.standard_normal((4, 16)).astype(np.float32), w)   # new values, same signature: cached
    f(rng.standard_normal((9, 16)).astype(np.float32), w)   # a new shape: compiles again
print("signatures compiled:", f._cache_size())
assert f._cache_size() == 2

# %% [markdown]
# XLA's practical "rule #3" follows: **every new shape recompiles**. A function called on
# batches of varying size, or on sequences of every length, compiles once per size — and on a
# real model one compile costs seconds. `minixla_explain_cache_misses` says why a call missed:
# either the function was never compiled, or which part of the closest signature seen before
# differs, by the argument's pytree path.

# %%
def loss(params, x):
    return mnp.sum(mnp.tanh(x @ params["w"]) * params["scale"])


g = minixla.jit(loss, backend="jax")  # (the diagnostics are the same on both backends)
params = {"w": w, "scale": np.float32(2.0)}
with minixla.config.override(minixla_explain_cache_misses=True):
    g(params, np.ones((4, 16), np.float32))
    g({"w": w, "scale": 2.0}, np.ones((4, 16), np.float32))  # a Python float this time

# %% [markdown]
# The second call compiled again although every shape and dtype matched: `2.0` is a Python
# scalar, which JAX treats as **weakly typed** (it adopts the dtype of the array it meets), and
# a weak type is part of the aval. Passing `np.float32(2.0)` consistently keeps one signature.
#
# **Static arguments** (`static_argnums`) are Python values the trace depends on (a shape, a
# flag). They are part of the key *by value* — equal values share a compile — so they must be
# hashable, as in JAX:

# %%
reshape = minixla.jit(lambda x, shape: mnp.reshape(x, shape), backend="jax", static_argnums=1)
x6 = np.arange(6, dtype=np.float32)
reshape(x6, (2, 3))
reshape(x6, tuple([2, 3]))  # an equal tuple: no new compile
assert reshape._cache_size() == 1
try:
    reshape(x6, [2, 3])
except ValueError as e:
    print(str(e).splitlines()[0])

# %% [markdown]
# When one function keeps compiling, minixla warns once it has seen more than
# `minixla_recompile_warning_threshold` (default 8) signatures, naming what varies. The cache
# itself is a bounded LRU (`minixla_jit_cache_size` signatures per function), so a long-running
# process that meets many shapes does not grow without limit; `clear_cache()` empties it.

# %%
h = minixla.jit(lambda tokens: mnp.sum(tokens * tokens), backend="jax")
with minixla.config.override(minixla_recompile_warning_threshold=4):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 8):
            h(np.ones(n, np.float32))
print(caught[0].message)
assert h._cache_size() == 7
h.clear_cache()
assert h._cache_size() == 0

# %% [markdown]
# The usual cure is to **pad to a few bucket sizes** and pass the true length as data: the
# program then depends on the bucket, not on the length. That is this chapter's exercise
# (`tutorials/exercises/ch12_buckets.py`); with its reference solution, seven lengths compile
# two programs:

# %%
from tutorials.solutions.ch12_buckets import pad_to_bucket


def masked_sum_of_squares(tokens, n):
    valid = mnp.arange(tokens.shape[0]) < n
    return mnp.sum(mnp.where(valid, tokens * tokens, 0.0))


k = minixla.jit(masked_sum_of_squares, backend="jax")
for n in range(1, 8):
    tokens = np.arange(n, dtype=np.float32)
    padded, length = pad_to_bucket(tokens, buckets=(4, 8))
    assert k(padded, length) == np.sum(tokens * tokens)
print("lengths 1..7, signatures compiled:", k._cache_size())
assert k._cache_size() == 2

# %% [markdown]
# ## 2. The persistent compilation cache
#
# The in-memory cache dies with the process: a restarted script, a new server worker or a
# notebook kernel restart compiles everything again. With a cache directory set
# (`minixla.config.update("minixla_compilation_cache_dir", path)` or
# `MINIXLA_COMPILATION_CACHE_DIR`), each compile traces and lowers as before, then looks the
# program up on disk at two levels. The *lowered* program (the HLO before any pass) names a small
# entry that points at its optimized program's entry: a hit there skips the passes too.
# Otherwise the passes run and the *optimized program* is looked up. A hit loads the stored
# executable — the object code of every kernel and the plan around it (buffer assignment, arena
# size, the pointer table, the call sequence) — with no buffer assignment, kernel emission or
# LLVM. A miss compiles and writes the entry, and the first-level entry pointing at it. (The
# first level is sound because the passes are a function of the module alone: no option, no
# host property, no iteration in `id()` order — so one lowered program always optimizes to the
# same program.)
#
# The key must be the same in every process for the same program and different whenever the
# generated code could differ. It hashes the HLO text (optimized, or lowered for the first
# level) and its constants' bytes, the
# backend and donated arguments, the host target (LLVM's triple, CPU name and features: the code
# is `-march=native`), the versions (minixla and a fingerprint of its sources, the cache format,
# llvmlite/LLVM, JAX, Python) and the options that change code (the thread count) — never an
# `id()` or a per-process `hash()`.

# %%
from minixla.cache import key_document

cache_dir = tempfile.mkdtemp(prefix="minixla-cache-")
minixla.config.update("minixla_compilation_cache_dir", cache_dir)
minixla.config.update("minixla_persistent_cache_min_compile_time_secs", 0.0)
x = rng.standard_normal((4, 16)).astype(np.float32)
compiled = minixla.jit(layer).lower(x, w).compile()
print("hit:", compiled.persistent_cache_hit)
doc = key_document(compiled.hlo_module, "llvm")
print({k: (v if k != "versions" else sorted(v)) for k, v in doc.items() if k != "target"})
print("target:", doc["target"]["triple"], doc["target"]["cpu"], len(doc["target"]["features"].split(",")), "features")

# %% [markdown]
# A fresh process with the same directory finds the entry. Counting the modules LLVM compiles
# shows that it runs no LLVM at all, and the cache's counters that it found the lowered
# program, so it ran no pass either:

# %%
script = """
import numpy as np, minixla, minixla.numpy as mnp
from minixla.backends.llvm.target import compile_stats
rng = np.random.default_rng(0)
w = rng.standard_normal((16, 8)).astype(np.float32)
x = rng.standard_normal((4, 16)).astype(np.float32)
def layer(x, w):
    return mnp.tanh(x @ w)
c = minixla.jit(layer).lower(x, w).compile()
print("persistent cache hit:", c.persistent_cache_hit, "| LLVM modules compiled:", compile_stats["jit_modules"])
from minixla import cache
print("found at the first level (no pass ran):", cache.stats["lowered_hits"] == 1)
"""
env = dict(os.environ, MINIXLA_COMPILATION_CACHE_DIR=cache_dir, PYTHONPATH=str(pathlib.Path.cwd().parent))
out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
print(out)
assert "hit: True | LLVM modules compiled: 0" in out and "no pass ran): True" in out

# %% [markdown]
# (The function must be the same program: the HLO names its module after the function,
# `jit_layer`.) `python -m minixla.cache list` shows the entries.
#
# A cache on disk meets a hostile world: a process killed while writing, a full disk, two
# minixla versions sharing a directory, a file copied from another machine. Entries are written
# to a temporary file and renamed into place (`os.replace`, atomic), carry a checksum, and are
# checked against the versions and the CPU on every read; any problem is a
# `CompilationCacheWarning` and a normal compile, never an exception or a wrong result. The
# directory is capped (`minixla_compilation_cache_max_size`, least recently used entries go first).

# %%
print(subprocess.run([sys.executable, "-m", "minixla.cache", "--dir", cache_dir, "list"], env=env,
                     capture_output=True, text=True, check=True).stdout)
entry = next(p for p in os.listdir(cache_dir) if p.endswith(".mxc"))
with open(os.path.join(cache_dir, entry), "r+b") as fh:  # damage it
    fh.seek(200)
    fh.write(b"\xff" * 16)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    again = minixla.jit(layer).lower(x, w).compile()
print(caught[0].message)
np.testing.assert_allclose(again(x, w), np.tanh(x @ w), rtol=1e-5, atol=1e-6)
minixla.config.update("minixla_compilation_cache_dir", None)

# %% [markdown]
# ## 3. Benchmarking pitfalls
#
# **The first call includes the compile.** Timing `f(x)` once measures tracing, passes and
# LLVM, not the program. Separate them with the staged API — `lower(...).compile()` is the
# compile, the compiled object's calls are the run — or call once to warm up before timing.

# %%
big = rng.standard_normal((256, 256)).astype(np.float32)
fresh = minixla.jit(lambda a: mnp.tanh(a @ a) + 1.0)
t0 = time.perf_counter()
fresh(big)
first_ms = (time.perf_counter() - t0) * 1e3
t0 = time.perf_counter()
fresh(big)
second_ms = (time.perf_counter() - t0) * 1e3
print(f"first call {first_ms:.1f} ms (compile included), second call {second_ms:.3f} ms")

# %% [markdown]
# **One sample is not a measurement.** Run times vary from call to call (other processes,
# frequency scaling, caches, a thread pool waking up). Take many samples, each long enough to
# dwarf the timer's resolution, and report the median with the spread; compare two programs by
# *interleaving* their samples so that background load hits both alike (what `python -m
# benchmarks` does). For JAX, remember that dispatch is asynchronous: time
# `f(x).block_until_ready()`, or you time the dispatch only.

# %%
def samples(fn, calls=20, repeat=9):
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e3)
    return out


ms = samples(lambda: fresh(big))
q = statistics.quantiles(ms, n=4)
print(f"median {statistics.median(ms):.3f} ms, quartiles {q[0]:.3f}-{q[2]:.3f} ms, min {min(ms):.3f} ms")

# %% [markdown]
# **What a cached call costs.** Dispatch — flattening the arguments, computing the signature,
# finding the executable, passing pointers — is paid on every call and dominates small
# programs. minixla's cached call computes the signature once and lets it double as the
# argument check, and its generated code reads each array's data pointer from the array object,
# so a call writes one address per argument (`python -m benchmarks.dispatch` compares it with
# `jax.jit` and shows a profile). For a cold start — the time from process start to the first
# result — see `python -m benchmarks.cold_start`: with a warm persistent cache, imports dominate.
#
# ## Exercise
#
# Write `pad_to_bucket(x, buckets)` in `tutorials/exercises/ch12_buckets.py`: pad `x` along
# axis 0 with zeros to the smallest bucket that holds it and return the padded array with the
# true length, so that a jitted function compiles once per bucket. Check it with
# `MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch12_buckets.py`.
