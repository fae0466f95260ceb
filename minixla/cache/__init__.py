"""The persistent compilation cache (JAX's ``jax/_src/compilation_cache.py``).

Turn it on with ``minixla.config.update("minixla_compilation_cache_dir", path)`` or
``MINIXLA_COMPILATION_CACHE_DIR=path``. Every compile then traces and lowers as usual and
looks the program up on disk (``store.py``) at two levels:

1. the *lowered* program's key (``key.lowered_cache_key``, before any pass) names a small
   entry pointing at the optimized program's entry: a hit loads that executable and the
   stored pass and fusion logs, and no pass runs (``load_lowered``);
2. otherwise the passes run and the *optimized* program's key (``key.cache_key``) is looked
   up: a hit loads the stored executable -- machine code and plan -- without buffer
   assignment, kernel emission or LLVM (``backends/llvm/serialization.py``); a miss compiles
   and, when the compile took at least ``minixla_persistent_cache_min_compile_time_secs``,
   writes the entry. Either way the first-level entry is then written (``save_lowered``).

Dumping (``MINIXLA_DUMP``) skips the first level: a dump wants the passes to run. The directory keeps at most ``minixla_compilation_cache_max_size`` bytes of
entries (least recently used evicted first).

Nothing here raises into the user's call: an entry that cannot be read or written (corrupted,
truncated, another version or CPU, an unwritable directory, a full disk) is a
``CompilationCacheWarning`` and a normal compile.

With a cache directory set, JAX's own persistent cache (``jax_compilation_cache_dir``) is
turned on in the same directory: the ``jax`` backend's programs are compiled by XLA, and
tracing evaluates some ops eagerly through JAX (each an XLA compile). JAX's files have their
own names; this cache neither lists nor evicts them. Turning the cache off gives JAX its
previous settings back (at the next trace).

``python -m minixla.cache [--dir DIR] list|stats|clear`` inspects a directory. ``stats`` in
this module counts this process's hits, misses and writes.
"""
from __future__ import annotations

import os
import pickle
import time

from minixla.cache import store
from minixla.cache.key import (FORMAT_VERSION, cache_key, host_target, key_document, lowered_cache_key,
                               versions)
from minixla.cache.store import CompilationCacheWarning
from minixla.config import config

__all__ = ["cache_key", "lowered_cache_key", "key_document", "CompilationCacheWarning", "directory", "load",
           "save", "load_lowered", "save_lowered",
           "stats", "reset_stats", "enable_jax_cache", "SERIALIZABLE_BACKENDS"]

#: backends whose executables this cache stores (the jax backend uses JAX's own cache)
SERIALIZABLE_BACKENDS = ("llvm",)

#: this process's counts: ``hits`` (of which ``lowered_hits`` skipped the passes too), ``misses``
#: (of the optimized program's key), ``writes`` (entries and first-level entries)
stats = {"hits": 0, "lowered_hits": 0, "misses": 0, "writes": 0, "skipped_fast": 0, "load_failures": 0,
         "ms_saved": 0.0}


def reset_stats() -> None:
    for k in stats:
        stats[k] = 0.0 if k == "ms_saved" else 0


def directory() -> str | None:
    """The cache directory in effect, or None (cache off)."""
    return config.read("minixla_compilation_cache_dir")


def _expect() -> dict:
    return {"format": FORMAT_VERSION, "versions": versions(), "target": host_target()}


def load(module, backend: str, donated=()):
    """``(key, executable)`` for the optimized ``module``: the executable loaded from the cache,
    or None on a miss (then ``key`` is what ``save`` needs). ``(None, None)`` when the cache is
    off or the backend's executables are not stored here."""
    d = directory()
    if d is None or backend not in SERIALIZABLE_BACKENDS:
        return None, None
    try:
        key = cache_key(module, backend, donated)
    except Exception as e:  # (never fail a compile over the cache)
        store.warn(f"cannot compute the key: {type(e).__name__}: {e}; compiling")
        return None, None
    found = store.read(d, key, _expect())
    if found is None:
        stats["misses"] += 1
        return key, None
    header, payload = found
    try:
        from minixla.backends.llvm.serialization import deserialize
        exe = deserialize(payload)
    except Exception as e:
        stats["load_failures"] += 1
        store.warn(f"cannot load entry {store.entry_path(d, key)}: {type(e).__name__}: {e}; "
                   "compiling (it will be rewritten)")
        return key, None
    stats["hits"] += 1
    stats["ms_saved"] += float(header.get("compile_ms", 0.0))
    return key, exe


def save(key, module, backend: str, executable, compile_ms: float) -> bool:
    """Write ``executable`` under ``key`` if the compile (``compile_ms``) took long enough.
    Returns whether an entry was written; never raises."""
    d = directory()
    if d is None or key is None or backend not in SERIALIZABLE_BACKENDS:
        return False
    if compile_ms < 1e3 * config.read("minixla_persistent_cache_min_compile_time_secs"):
        stats["skipped_fast"] += 1
        return False
    try:
        from minixla.backends.llvm.serialization import serialize
        payload = serialize(executable)
    except Exception as e:
        store.warn(f"cannot serialize {module.name}: {type(e).__name__}: {e}; not cached")
        return False
    header = dict(_expect(), name=module.name, backend=backend, compile_ms=round(compile_ms, 3),
                  created=time.time())
    ok = store.write(d, key, header, payload, config.read("minixla_compilation_cache_max_size"))
    stats["writes"] += ok
    if ok:
        from minixla.cache.key import write_source_memo
        write_source_memo()
    return ok


# -- the first level: lowered program -> optimized program's entry --------------------------------

def load_lowered(module, backend: str, donated=()):
    """``(lowered key, hit)`` for the *lowered* ``module`` (before the passes): ``hit`` is
    ``(executable, pass_log, fusion_log, kernels_unfused)`` when an entry maps this program
    to a stored optimized one (``save_lowered``), so the passes need not run; else None (and
    the key is what ``save_lowered`` needs, or None when the cache is off)."""
    d = directory()
    if d is None or backend not in SERIALIZABLE_BACKENDS:
        return None, None
    try:
        lkey = lowered_cache_key(module, backend, donated)
    except Exception as e:  # (never fail a compile over the cache)
        store.warn(f"cannot compute the lowered key: {type(e).__name__}: {e}; compiling")
        return None, None
    found = store.read(d, lkey, _expect())
    if found is None:
        return lkey, None
    header, payload = found
    target = header.get("alias")
    entry = store.read(d, target, _expect()) if isinstance(target, str) else None
    if entry is None:  # (the optimized program's entry was evicted: compile; both are rewritten)
        return lkey, None
    try:
        from minixla.backends.llvm.serialization import deserialize
        pass_log, fusion_log, kernels_unfused = _unpickle(payload)
        exe = deserialize(entry[1])
    except Exception as e:
        stats["load_failures"] += 1
        store.warn(f"cannot load entry {store.entry_path(d, lkey)}: {type(e).__name__}: {e}; "
                   "compiling (it will be rewritten)")
        return lkey, None
    stats["hits"] += 1
    stats["lowered_hits"] += 1
    stats["ms_saved"] += float(entry[0].get("compile_ms", 0.0))
    return lkey, (exe, pass_log, fusion_log, kernels_unfused)


def save_lowered(lkey, key, module, backend: str, pass_log, fusion_log, kernels_unfused) -> bool:
    """Point the lowered program's key ``lkey`` at the optimized program's entry ``key``
    (written or found by this compile), with the pass and fusion logs the passes produced,
    so that ``Compiled.pass_log`` / ``fusion_log`` read the same on a hit. Never raises."""
    d = directory()
    if d is None or lkey is None or key is None or backend not in SERIALIZABLE_BACKENDS:
        return False
    if not os.path.isfile(store.entry_path(d, key)):  # (not written: below the minimum compile time)
        return False
    try:
        payload = pickle.dumps((list(pass_log), list(fusion_log), int(kernels_unfused)), protocol=5)
    except Exception as e:
        store.warn(f"cannot serialize the pass log of {module.name}: {type(e).__name__}: {e}; not cached")
        return False
    header = dict(_expect(), name=module.name, backend=backend, alias=key, compile_ms=0.0,
                  created=time.time())
    ok = store.write(d, lkey, header, payload, config.read("minixla_compilation_cache_max_size"), keep=(key,))
    stats["writes"] += ok
    return ok


def _unpickle(payload: bytes):
    pass_log, fusion_log, kernels_unfused = pickle.loads(payload)
    return pass_log, fusion_log, kernels_unfused


_jax_cache_dir = None  # the directory JAX's cache was pointed at by us, or None
_jax_saved: dict = {}  # JAX's own settings before that, restored when the cache is turned off

_JAX_OPTIONS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
                "jax_persistent_cache_min_entry_size_bytes")


def enable_jax_cache() -> None:
    """Point JAX's persistent cache at this cache's directory, or give JAX its own settings
    back when the cache is off. Called before tracing (minixla evaluates some ops, constants
    among them, eagerly through JAX, and each is an XLA compile) and before the ``jax``
    backend compiles; a no-op when nothing changed."""
    global _jax_cache_dir
    d = directory()
    if d == _jax_cache_dir:
        return
    try:
        import jax
        from jax._src import compilation_cache as jcc
        if _jax_cache_dir is None:
            _jax_saved.update({name: getattr(jax.config, name) for name in _JAX_OPTIONS})
        if d is None:
            for name, value in _jax_saved.items():
                jax.config.update(name, value)
        else:
            jax.config.update("jax_compilation_cache_dir", d)
            jax.config.update("jax_persistent_cache_min_compile_time_secs",
                              float(config.read("minixla_persistent_cache_min_compile_time_secs")))
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        jcc.reset_cache()  # (JAX decides once whether it uses its cache: decide again)
        _jax_cache_dir = d
    except Exception as e:
        store.warn(f"cannot point JAX's persistent cache at {d}: {e}")
