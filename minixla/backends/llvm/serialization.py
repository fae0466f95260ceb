"""Serialize an ``LlvmExecutable`` to bytes and load it back without LLVM (XLA's
``Executable::Serialize`` / ``DeserializeExecutable``, for the persistent compilation cache).

What an executable needs, and so what is stored:

* **machine code**: the object files its engine loaded (the program's thunks and sequence
  functions with the kernels compiled in-process, and each compile worker's object file); the
  kernels this program found in the in-process kernel cache (their code lives in another
  program's engine) are compiled again on their own, at store time; and the library routines
  (GEMM micro-kernels, the dot routine) its kernels call, from the process's library.
* **the plan**: the optimized HloModule, its buffer assignment (arena size and offsets, argument
  and result slices), the kernels' argument lists and fused array constants, the table slots and
  the execution steps -- pickled as one object graph (they point at each other).

Loading parses nothing with LLVM: the object files go into a fresh MCJIT engine (its runtime
linker resolves the calls between them), library routines not yet in this process are
registered with ``llvm.add_symbol`` first, and the executable is rebuilt around the same plan.
The payload is only meaningful on the same host target and versions: ``minixla.cache`` keys
and checks entries on those.
"""
from __future__ import annotations

import pickle
import re
import sys

from llvmlite import binding as llvm

from minixla.backends.llvm import gemm
from minixla.backends.llvm.runtime import thread_pool
from minixla.backends.llvm.target import JitModule, LoadedObjects, host_target_machine, interrupts_deferred

#: bumped whenever what ``serialize`` writes changes meaning
PAYLOAD_VERSION = 1


def _library_used(texts) -> list[str]:
    """Library routines (``gemm._library``) named in ``texts``, closed over the routines' own calls."""
    found, todo = [], list(texts)
    while todo:
        text = todo.pop()
        for name, jit in list(gemm._library.items()):
            if name not in found and re.search(rf'@"?{re.escape(name)}"?\b', text):
                found.append(name)
                todo.append(jit.llvm_ir)
    return found


def serialize(exe) -> bytes:
    """The bytes of ``exe`` (an ``LlvmExecutable`` from ``compile_module``) for ``deserialize``.
    Raises ValueError for an executable that cannot be stored (e.g. its code was loaded from
    a cache that did not keep its object files)."""
    jit = exe._jit
    objects = getattr(jit, "object_code", None)
    if objects is None:
        raise ValueError("executable keeps no object code")
    objects = list(objects)
    cached = getattr(jit, "cached_kernels", {}) or {}
    for kernel in cached.values():  # compiled with another program: compile its own module now
        objects.append(host_target_machine().emit_object(JitModule._optimized_module(kernel.llvm_ir)))
    library = _library_used([jit.llvm_ir] + [k.llvm_ir for k in cached.values()])
    lib_code = []
    for name in library:
        code = getattr(gemm._library[name], "object_code", None)
        if code is None:
            raise ValueError(f"library routine {name} keeps no object code")
        lib_code.append((name, list(code)))
    names = sorted({name for _, name, _ in exe._named_steps} | set(exe._thunk_names))
    plan = (exe.module, exe.assignment, exe._kernels, exe._plan, exe._named_steps, exe._thunk_names)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))  # (pickle recurses along operand chains)
    try:
        return pickle.dumps({"version": PAYLOAD_VERSION, "threads": exe._pool.size, "names": names,
                             "objects": objects, "library": lib_code, "plan": plan}, protocol=5)
    finally:
        sys.setrecursionlimit(limit)


def deserialize(data: bytes):
    """The ``LlvmExecutable`` stored by ``serialize``. Raises ValueError when the payload does
    not fit this process (version, thread count), RuntimeError when its code cannot be loaded."""
    from minixla.backends.llvm.executable import build_executable
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        payload = pickle.loads(data)
    finally:
        sys.setrecursionlimit(limit)
    if not isinstance(payload, dict) or payload.get("version") != PAYLOAD_VERSION:
        raise ValueError("payload of another format version")
    pool = thread_pool()
    if payload["threads"] != pool.size:
        raise ValueError(f"compiled for {payload['threads']} threads, the pool has {pool.size}")
    with gemm._library_lock:
        for name, code in payload["library"]:
            if name not in gemm._library:
                routine = LoadedObjects(code, [name])
                with interrupts_deferred():
                    llvm.add_symbol(name, routine.addresses[name])
                gemm._library[name] = routine
    jit = LoadedObjects(payload["objects"], payload["names"])
    module, assignment, kernels, plan, steps, thunks = payload["plan"]
    return build_executable(module, assignment, kernels, jit, plan, steps, thunks, pool)
