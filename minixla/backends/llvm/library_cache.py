"""The GEMM library's machine code, kept on disk across processes (XLA:CPU ships its GEMM
precompiled in jaxlib; minixla compiles its own, once per machine instead of once per process).

The library routines (``gemm.library_routine``: the register-tile micro-kernels and the dot
routine of ``dot_library.py``) are compiled with LLVM ``-O3`` by the first program of a process
that needs them: ~0.4-0.9 s on the 2-vCPU host, which made a process's *first* compile of a
program with dots 2-4x jax's. Their code depends on nothing but

* the routine's name (dtype, tile shape) and the Python code that emits its IR: the sources of
  the LLVM backend (``minixla/backends/llvm/*.py``: the emitters, the pass pipeline and target
  machine settings of ``target.py``) and the values of ``gemm``'s and ``dot_library``'s
  upper-case module constants (tile shape, K block, prefetch switches: a test or a user that
  sets one gets another key),
* LLVM's and llvmlite's versions,
* the target: triple, CPU name and features (``target.host_cpu()``: the host's, or the
  ``minixla_llvm_cpu``/``minixla_llvm_features`` options'),

so the SHA-256 of those is the routine's key (no IR is emitted to look a routine up: emitting
and printing the dot routine's IR alone takes ~60-250 ms of Python), and its object file is
stored under the key in a
per-user directory: ``<minixla_compilation_cache_dir>/minixla-gemm-library/`` when the
persistent compilation cache is on, else ``$XDG_CACHE_HOME/minixla/gemm-library/`` (default
``~/.cache/minixla/gemm-library/``). A later process loads the object file into an MCJIT engine
(``target.LoadedObjects``: no optimizer, no code generation, ~1 ms) instead of compiling; the
routine's IR text is emitted only if something asks for it (``llvm_ir``, ``asm``).

A file is::

    b"MXLALIB1"  sha256(body) (32 bytes)  body = u32 header length, header (JSON), object code

and is used only when the magic, the checksum, the key and the routine's name in the header all
match, and the loaded code defines the routine; anything else -- a truncated or garbled file,
another version's, an unreadable or unwritable directory, an object file LLVM refuses -- means
compiling as before (and rewriting the file), never a wrong result: a corrupted object file is
caught by the checksum before LLVM sees it. Writes go to a temporary file in the same directory
renamed into place (``os.replace``), so concurrent processes each see a whole file or none. The
directory keeps at most ``MAX_FILES`` files, least recently used (by mtime, refreshed on a hit)
deleted first. ``minixla.config.update("minixla_gemm_library_cache", False)`` (or
``MINIXLA_GEMM_LIBRARY_CACHE=0``) turns the cache off: every process compiles its library.

``stats`` counts this process's ``hits``, ``misses``, ``writes`` and ``failures`` (files found but
not usable).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
import time

from minixla.cache import atomic

MAGIC = b"MXLALIB1"
#: bumped whenever the file layout or what the key covers changes
FORMAT_VERSION = 1
#: most files kept in the directory (a few routines per target and minixla version)
MAX_FILES = 256
SUBDIR_OF_CACHE_DIR = "minixla-gemm-library"

stats = {"hits": 0, "misses": 0, "writes": 0, "failures": 0}


def enabled() -> bool:
    from minixla.config import config
    return bool(config.read("minixla_gemm_library_cache"))


def directory() -> str:
    """The directory the library's object files are kept in (see the module docstring)."""
    from minixla.config import config
    cache_dir = config.read("minixla_compilation_cache_dir")
    if cache_dir:
        return os.path.join(cache_dir, SUBDIR_OF_CACHE_DIR)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "minixla", "gemm-library")


@functools.cache
def _fixed_key_parts() -> dict:
    import llvmlite
    from llvmlite import binding as llvm

    from minixla.backends.llvm import target
    cpu, features = target.host_cpu()
    folder = os.path.dirname(os.path.abspath(target.__file__))
    sources = hashlib.sha256()
    for name in sorted(f for f in os.listdir(folder) if f.endswith(".py")):
        with open(os.path.join(folder, name), "rb") as f:
            sources.update(name.encode() + b"\0" + f.read() + b"\0")
    return {"format": FORMAT_VERSION, "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm.llvm_version_info)), "triple": llvm.get_process_triple(),
            "cpu": cpu, "features": features, "sources": sources.hexdigest()}


def _constants() -> dict:
    from minixla.backends.llvm import dot_library, gemm
    return {f"{m.__name__}.{k}": repr(v) for m in (gemm, dot_library) for k, v in sorted(vars(m).items())
            if k.isupper() and isinstance(v, (int, float, str, bool, type(None)))}


def routine_key(name: str) -> str:
    """The key (64 hex digits) of library routine ``name`` on this target (module docstring)."""
    doc = dict(_fixed_key_parts(), name=name, constants=_constants())
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def path_of(name: str, key: str, where: str | None = None) -> str:
    return os.path.join(where or directory(), f"{name}-{key[:40]}.o")


def encode(name: str, key: str, object_code: bytes) -> bytes:
    header = json.dumps({"name": name, "key": key}, sort_keys=True).encode()
    body = struct.pack("<I", len(header)) + header + bytes(object_code)
    return MAGIC + hashlib.sha256(body).digest() + body


def decode(data: bytes, name: str, key: str) -> bytes:
    """The object code of a file's bytes; ValueError unless everything checks (module docstring)."""
    if data[:len(MAGIC)] != MAGIC or len(data) < len(MAGIC) + 36:
        raise ValueError("not a library file")
    digest, body = data[len(MAGIC):len(MAGIC) + 32], data[len(MAGIC) + 32:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch (truncated or corrupted)")
    (n,) = struct.unpack("<I", body[:4])
    header = json.loads(body[4:4 + n])
    if header.get("name") != name or header.get("key") != key:
        raise ValueError("another routine's or target's file")
    code = body[4 + n:]
    if not code:
        raise ValueError("no object code")
    return code


class LoadedRoutine:
    """A library routine whose machine code was loaded from the cache: the attributes the
    rest of minixla reads of a routine's ``JitModule`` (``addresses``, ``object_code``,
    ``llvm_ir``, ``optimized``, ``compile_ms``), and its optimized IR and assembly, made on
    first access by emitting and optimizing its IR again with the same passes (as ``JitModule``
    does for a dump: the same text and passes give the same code)."""

    optimized = True
    compile_ms = 0.0
    worker_modules = 0
    cached_kernels: dict = {}

    def __init__(self, name: str, emit_text, object_code: bytes):
        from minixla.backends.llvm.target import LoadedObjects
        t0 = time.perf_counter()
        self._objects = LoadedObjects([object_code], [name])
        self.addresses = self._objects.addresses
        self.object_code = self._objects.object_code
        self._emit_text, self._text = emit_text, None
        self.load_ms = (time.perf_counter() - t0) * 1e3
        self._dump = None

    @property
    def llvm_ir(self) -> str:
        """The routine's IR text, emitted on first access (the code was compiled from it)."""
        if self._text is None:
            self._text = self._emit_text()
        return self._text

    def _dumped(self):
        if self._dump is None:
            from minixla.backends.llvm.target import JitModule, host_target_machine
            mod = JitModule._optimized_module(self.llvm_ir)
            self._dump = (str(mod), {f.name: str(f) for f in mod.functions if not f.is_declaration},
                          host_target_machine().emit_assembly(mod))
        return self._dump

    @property
    def optimized_llvm_ir(self) -> str:
        return self._dumped()[0]

    def function_ir(self, name: str) -> str:
        functions = self._dumped()[1]
        if name not in functions:
            raise KeyError(f"no function {name!r} is defined in this routine")
        return functions[name]

    @property
    def asm(self) -> str:
        return self._dumped()[2]


def load(name: str, key: str, emit_text, where: str | None = None):
    """The routine ``name`` stored under ``key`` (``routine_key``), or None (no file, or one that
    does not check: then ``stats["failures"]`` counts it); ``emit_text()`` gives its IR text if
    asked for. Never raises."""
    try:
        path = path_of(name, key, where)
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        routine = LoadedRoutine(name, emit_text, decode(data, name, key))
    except Exception:  # (any check, or LLVM refusing the object: compile instead)
        stats["failures"] += 1
        return None
    try:
        os.utime(path)  # (least recently used eviction)
    except OSError:
        pass
    return routine


def save(name: str, key: str, object_code: bytes, where: str | None = None) -> bool:
    """Write the routine's file under ``key`` (atomically); False if it could not be written.
    Never raises."""
    try:
        folder = where or directory()
        os.makedirs(folder, exist_ok=True)
        atomic.write_atomically(path_of(name, key, folder), encode(name, key, object_code),
                                prefix=f".{name}-")
        stats["writes"] += 1
        _evict(folder)
        return True
    except Exception:
        return False


def _evict(folder: str) -> None:
    try:
        files = [e for e in os.scandir(folder) if e.name.endswith(".o") and e.is_file(follow_symlinks=False)]
        if len(files) <= MAX_FILES:
            return
        files.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime)
        for e in files[:len(files) - MAX_FILES]:
            try:
                os.unlink(e.path)
            except OSError:
                pass
    except OSError:
        pass


def compile_routine(name: str, emit_text):
    """The machine code of library routine ``name`` (``emit_text()``: its module's IR text):
    loaded from the cache when a file checks, else compiled at ``-O3`` (``target.JitModule``)
    and stored."""
    from minixla.backends.llvm.target import JitModule
    key = None
    if enabled():
        try:
            key = routine_key(name)
        except Exception:  # (a source file unreadable: no cache)
            key = None
    if key is not None:
        routine = load(name, key, emit_text)
        if routine is not None:
            stats["hits"] += 1
            return routine
        stats["misses"] += 1
    # (optimize=True: a module without linked kernels is not optimized by default, and an
    # unoptimized micro-kernel keeps its accumulators on the stack -- 3x slower)
    jit = JitModule(emit_text(), [name], optimize=True)
    if key is not None:
        save(name, key, jit.object_code[0])
    return jit
