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
pointed at the same directory *while minixla compiles* (``jax_cache``): the ``jax`` backend's
programs are compiled by XLA, and tracing evaluates some ops eagerly through JAX (each an XLA
compile). JAX's settings are given back after each compile, so the user's own ``jax.jit``
programs are not written there. JAX's files have their own names (``jit_*-cache``); this
cache neither evicts nor clears them, and ``python -m minixla.cache`` lists and counts them
as JAX's.

``python -m minixla.cache [--dir DIR] list|stats|clear`` inspects a directory. ``stats`` in
this module counts this process's hits, misses and writes.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import threading
import time

from minixla.cache import store
from minixla.cache.key import (FORMAT_VERSION, cache_key, host_target, key_document, lowered_cache_key,
                               versions)
from minixla.cache.store import CompilationCacheWarning
from minixla.config import config

__all__ = ["cache_key", "lowered_cache_key", "key_document", "CompilationCacheWarning", "directory", "load",
           "save", "load_lowered", "save_lowered",
           "stats", "reset_stats", "jax_cache", "key_setup", "SERIALIZABLE_BACKENDS"]

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


def key_setup() -> float:
    """Do the once-per-process work every key needs and return its milliseconds (0.0 after the
    first call): asking LLVM for the host target (which imports llvmlite and the LLVM backend,
    also needed to load an entry) and the versions (the source fingerprint, read from its
    memo). ``Compiled.key_setup_ms`` reports it apart from the key itself."""
    global _key_setup_done
    if _key_setup_done:
        return 0.0
    t0 = time.perf_counter()
    host_target()
    versions()
    _key_setup_done = True
    return (time.perf_counter() - t0) * 1e3


_key_setup_done = False


def _timed_key(fn, timing, *args):
    if timing is not None:
        timing["key_setup_ms"] = timing.get("key_setup_ms", 0.0) + key_setup()
    t1 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        if timing is not None:
            timing["_t"] = time.perf_counter()
            timing["key_ms"] = timing.get("key_ms", 0.0) + (timing["_t"] - t1) * 1e3


def _timed_load(timing):
    if timing is not None and "_t" in timing:
        timing["load_ms"] = timing.get("load_ms", 0.0) + (time.perf_counter() - timing.pop("_t")) * 1e3


def _expect() -> dict:
    return {"format": FORMAT_VERSION, "versions": versions(), "target": host_target()}


def load(module, backend: str, donated=(), timing=None):
    """``(key, executable)`` for the optimized ``module``: the executable loaded from the cache,
    or None on a miss (then ``key`` is what ``save`` needs). ``(None, None)`` when the cache is
    off or the backend's executables are not stored here. ``timing`` (a dict) gets
    ``key_setup_ms``, ``key_ms`` and ``load_ms`` (reading and deserializing) added."""
    return _lookup(cache_key, "key", _load, module, backend, donated, timing)


def _lookup(key_fn, what, read, module, backend, donated, timing):
    """``(key_fn(...), read(directory, key))``, or ``(None, None)`` when the cache is off, the
    backend is not stored here or the key cannot be computed (a warning: never fail a compile
    over the cache); ``timing`` gets the key's and the read's ms."""
    d = directory()
    if d is None or backend not in SERIALIZABLE_BACKENDS:
        return None, None
    try:
        key = _timed_key(key_fn, timing, module, backend, donated)
    except Exception as e:
        _timed_load(timing)
        store.warn(f"cannot compute the {what}: {type(e).__name__}: {e}; compiling")
        return None, None
    try:
        return key, read(d, key)
    finally:
        _timed_load(timing)


def _load(d, key):
    found = store.read(d, key, _expect())
    if found is None:
        stats["misses"] += 1
        return None
    header, payload = found
    try:
        from minixla.backends.llvm.serialization import deserialize
        exe = deserialize(payload)
    except Exception as e:
        stats["load_failures"] += 1
        store.warn(f"cannot load entry {store.entry_path(d, key)}: {type(e).__name__}: {e}; "
                   "compiling (it will be rewritten)")
        return None
    stats["hits"] += 1
    stats["ms_saved"] += float(header.get("compile_ms", 0.0))
    return exe


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

def load_lowered(module, backend: str, donated=(), timing=None):
    """``(lowered key, hit)`` for the *lowered* ``module`` (before the passes): ``hit`` is
    ``(executable, pass_log, fusion_log, kernels_unfused)`` when an entry maps this program
    to a stored optimized one (``save_lowered``), so the passes need not run; else None (and
    the key is what ``save_lowered`` needs, or None when the cache is off). ``timing``: as
    ``load``'s."""
    return _lookup(lowered_cache_key, "lowered key", _load_lowered, module, backend, donated, timing)


def _load_lowered(d, lkey):
    found = store.read(d, lkey, _expect())
    if found is None:
        return None
    header, payload = found
    target = header.get("alias")
    entry = store.read(d, target, _expect()) if isinstance(target, str) else None
    if entry is None:  # (the optimized program's entry was evicted: compile; both are rewritten)
        return None
    try:
        from minixla.backends.llvm.serialization import deserialize
        pass_log, fusion_log, kernels_unfused = _unpickle(payload)
        exe = deserialize(entry[1])
    except Exception as e:
        stats["load_failures"] += 1
        store.warn(f"cannot load entry {store.entry_path(d, lkey)}: {type(e).__name__}: {e}; "
                   "compiling (it will be rewritten)")
        return None
    stats["hits"] += 1
    stats["lowered_hits"] += 1
    stats["ms_saved"] += float(entry[0].get("compile_ms", 0.0))
    return exe, pass_log, fusion_log, kernels_unfused


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


#: JAX's settings while minixla compiles: its persistent cache in minixla's directory
_JAX_OPTIONS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
                "jax_persistent_cache_min_entry_size_bytes")
_jax_lock = threading.Lock()
_jax_depth = 0  # how many minixla compiles (all threads) are inside ``jax_cache`` now
_jax_saved: dict = {}  # the user's JAX settings, given back when the last one leaves
_jax_events = threading.local()  # this thread's counts of JAX's compilation-cache events
_JAX_EVENTS = {"/jax/compilation_cache/compile_requests_use_cache": "requests",
               "/jax/compilation_cache/cache_hits": "hits"}


def _count_jax_event(event, **kwargs):
    name = _JAX_EVENTS.get(event)
    if name is not None:  # (JAX compiles in the calling thread: thread-local counts attribute it)
        setattr(_jax_events, name, getattr(_jax_events, name, 0) + 1)


class JaxCacheScope:
    """What JAX's persistent cache did during one ``jax_cache()`` block: ``requests`` (XLA
    compiles that consulted it) and ``hits`` (of those, served from the directory)."""

    def __init__(self):
        self.requests = self.hits = 0

    def _counts(self):
        return getattr(_jax_events, "requests", 0), getattr(_jax_events, "hits", 0)


@contextlib.contextmanager
def jax_cache():
    """Point JAX's persistent cache at this cache's directory for the block, and give JAX the
    user's own settings back after it: minixla's XLA compiles (the ``jax`` backend's programs,
    and the ops tracing evaluates eagerly through JAX, constants among them) are cached in
    minixla's directory, while the user's own ``jax.jit`` programs keep whatever
    ``jax_compilation_cache_dir`` the user set (none by default). Yields a ``JaxCacheScope``
    counting this thread's JAX cache requests and hits in the block (JAX's monitoring events).
    With the cache off it changes nothing. Reentrant and thread-safe (the settings are JAX's
    globals: another thread's ``jax.jit`` compiling during a minixla compile also sees them)."""
    global _jax_depth
    scope = JaxCacheScope()
    d = directory()
    if d is None:
        yield scope
        return
    with _jax_lock:
        if _jax_depth == 0 and not _point_jax_at(d):
            d = None
        else:
            _jax_depth += 1
    requests, hits = scope._counts()
    try:
        yield scope
    finally:
        now = scope._counts()
        scope.requests, scope.hits = now[0] - requests, now[1] - hits
        if d is not None:
            with _jax_lock:
                _jax_depth -= 1
                if _jax_depth == 0:
                    _restore_jax()


def _point_jax_at(d) -> bool:
    try:
        import jax
        from jax._src import compilation_cache as jcc
        from jax._src import monitoring
        if _count_jax_event not in monitoring._event_listeners:
            monitoring.register_event_listener(_count_jax_event)
        _jax_saved.clear()
        _jax_saved.update({name: getattr(jax.config, name) for name in _JAX_OPTIONS})
        jax.config.update("jax_compilation_cache_dir", d)
        jax.config.update("jax_persistent_cache_min_compile_time_secs",
                          float(config.read("minixla_persistent_cache_min_compile_time_secs")))
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        jcc.reset_cache()  # (JAX decides once whether it uses its cache: decide again)
        return True
    except Exception as e:
        store.warn(f"cannot point JAX's persistent cache at {d}: {e}")
        _restore_jax()
        return False


def _restore_jax() -> None:
    try:
        import jax
        from jax._src import compilation_cache as jcc
        for name, value in _jax_saved.items():
            jax.config.update(name, value)
        jcc.reset_cache()
    except Exception as e:
        store.warn(f"cannot give JAX its persistent-cache settings back: {e}")
