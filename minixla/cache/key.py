"""The persistent cache's key (JAX's ``cache_key.get``): what determines an executable's code.

``cache_key(module, backend, donated)`` is the SHA-256 of a JSON document of

* ``hlo``: the SHA-256 of the optimized HloModule's text (instruction names come from the
  module's own counter, so they are the same in every process) and of every constant's bytes
  (the text elides large constants as ``{...}``);
* ``backend`` and the **donated** parameter numbers (they change the buffer assignment);
* ``target``: the host's LLVM triple, CPU name and CPU features (``-march=native`` code);
* ``versions``: minixla's version and a fingerprint of its source files (so an edited
  compiler never loads code an older one generated), the cache format and payload versions,
  llvmlite's and LLVM's, JAX's and Python's;
* ``options``, every setting that changes generated code: the thread pool's size
  (``minixla_num_threads``: which kernels are split over threads) and the denormal mode.

Built from text and bytes only -- no ``id()``, no per-process ``hash()`` -- so two processes
compute the same key for the same program.

``lowered_cache_key`` is the same document over the module *before* the passes (the cache's
first level: it maps the lowered program to the optimized program's entry).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform

import numpy as np

from minixla.cache import atomic

#: bumped whenever the entry file layout changes (``store.py``)
FORMAT_VERSION = 1


def _source_files() -> tuple[str, list[str]]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        paths += [os.path.join(dirpath, name) for name in sorted(f for f in filenames if f.endswith(".py"))]
    return root, paths


def _content_fingerprint(root, paths) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(os.path.relpath(path, root).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


#: the memo of ``source_fingerprint`` in the cache directory: ``minixla-sources-<stat sig>.txt``
SOURCES_MEMO = "minixla-sources-{}.txt"


@functools.cache
def source_fingerprint() -> str:
    """SHA-256 over minixla's Python sources (relative paths and contents).

    Reading and hashing the 1.5 MB of sources costs ~20 ms, at every process's first compile,
    so the result is kept in the cache directory under the files' *stat signature* (each one's
    path, size and modification time in ns): a warm process stats the files and reads the
    memo. That trusts size and mtime exactly as far as Python's own bytecode cache does (a
    ``.pyc`` is reused while its source's size and mtime are unchanged): a source changed
    without changing either would already run stale bytecode. The fingerprint itself stays
    one of contents, so two checkouts of the same sources share entries."""
    root, paths = _source_files()
    sig = hashlib.sha256()
    for path in paths:
        st = os.stat(path)
        sig.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    from minixla.config import config
    directory = config.read("minixla_compilation_cache_dir")
    memo = os.path.join(directory, SOURCES_MEMO.format(sig.hexdigest())) if directory else None
    if memo is not None:
        try:
            with open(memo) as f:
                text = f.read().strip()
            if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
                return text
        except OSError:
            pass
    fingerprint = _content_fingerprint(root, paths)
    if memo is not None:
        _unwritten_memo[:] = [memo, fingerprint]  # (written with the next entry: write_source_memo)
    return fingerprint


_unwritten_memo: list = []


def write_source_memo() -> None:
    """Write the source fingerprint's memo, if this process computed it (``cache.save`` calls
    this after writing an entry: no memo in a directory without entries). Never raises."""
    if not _unwritten_memo:
        return
    memo, fingerprint = _unwritten_memo
    try:  # (atomically, as the entries; a failure only costs the next process the hashing)
        atomic.write_atomically(memo, fingerprint.encode(), prefix=".minixla-sources-")
        _unwritten_memo.clear()
    except OSError:
        pass


@functools.cache
def versions() -> dict:
    import jax
    import llvmlite
    from llvmlite import binding as llvm

    from minixla.backends.llvm.serialization import PAYLOAD_VERSION
    try:
        from importlib.metadata import version
        minixla_version = version("minixla")
    except Exception:  # (not installed: a source checkout)
        minixla_version = "unknown"
    return {"minixla": minixla_version, "minixla_source": source_fingerprint(),
            "format": FORMAT_VERSION, "payload": PAYLOAD_VERSION, "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm.llvm_version_info)), "jax": jax.__version__,
            "python": platform.python_version()}


def host_target() -> dict:
    """The code's target: ``{"triple", "cpu", "features"}`` the code is generated for (the host's
    as LLVM sees it, or the ``minixla_llvm_cpu``/``minixla_llvm_features`` options')."""
    return _host_target()


@functools.cache
def _host_target() -> dict:
    from llvmlite import binding as llvm
    from minixla.backends.llvm.target import host_cpu
    cpu, features = host_cpu()  # (minixla_llvm_cpu / minixla_llvm_features, else the host's)
    return {"triple": llvm.get_process_triple(), "cpu": cpu, "features": features}


def code_options() -> dict:
    """The settings that change generated code (see the module docstring)."""
    from minixla.backends.llvm.executable import ARRAY_DATA_OFFSET
    from minixla.backends.llvm.kernels import FLUSH_DENORMALS
    from minixla.backends.llvm.runtime import thread_pool
    from minixla.config import config
    return {"threads": thread_pool().size, "flush_denormals": bool(FLUSH_DENORMALS),
            "array_data_offset": ARRAY_DATA_OFFSET, "fast_tanh": bool(config.minixla_fast_tanh)}


def hlo_fingerprint(module) -> str:
    """SHA-256 of the module's text and of the bytes of all its constants."""
    h = hashlib.sha256(module.to_string().encode())
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "constant":
                lit = np.ascontiguousarray(np.asarray(instr.literal, dtype=instr.shape.dtype))
                h.update(f"{comp.name}/{instr.name}:{lit.dtype.str}{lit.shape}".encode())
                h.update(lit.tobytes())
    return h.hexdigest()


def key_document(module, backend: str, donated=()) -> dict:
    """Everything the key is made of, as a JSON-able dict (``cache_key`` hashes it)."""
    return {"hlo": hlo_fingerprint(module), "backend": backend, "donated": sorted(int(d) for d in donated),
            "target": host_target(), "versions": versions(), "options": code_options()}


def cache_key(module, backend: str, donated=()) -> str:
    """The entry's key: 64 hex digits (see the module docstring)."""
    doc = key_document(module, backend, donated)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def lowered_cache_key(module, backend: str, donated=()) -> str:
    """The key of the *lowered* module (before any pass), the cache's first level: it names
    a small entry pointing at the optimized program's entry (``cache_key``), so that a warm
    process skips the pass pipeline as well as LLVM.

    Why the lowered program may stand for the optimized one: the passes (``jit.Lowered.compile``:
    the sharding remover, the simplification fixed point, fusion, the memory scheduler) are a
    function of the module alone -- they read no option, environment variable, host property
    or clock (``minixla/passes`` reads no config; fusion's and buffer assignment's choices
    depend on shapes, opcodes and the donated parameters), and they iterate in program order,
    never in the order of ``id()`` s or hashes, so their output is the same in every process
    (``tests/test_compilation_cache.py`` compares it). (One backend pass reads the target:
    ``while-loop-gemm-packing`` packs to the LLVM GEMM's panel width, a function of the CPU
    and features that this document's ``target`` names.) Everything else the optimized key holds
    -- backend, donation, target, versions (minixla's source fingerprint covers the passes'
    code), code options -- is in this document too, with ``"stage": "lowered"`` keeping the
    two kinds of key apart. Even if a pass were not deterministic, any module it produced from
    this one is a correct compilation of it: the entry is always a valid answer."""
    doc = dict(key_document(module, backend, donated), stage="lowered")
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
