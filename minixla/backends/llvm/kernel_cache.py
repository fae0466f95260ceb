"""A process-wide cache of compiled kernels (XLA's compilation cache, per kernel).

A kernel's machine code is a function of its LLVM IR text alone (the target and the pass
pipeline are fixed for the process), so the cache key is a hash of that text, emitted with a
placeholder name: two kernels computing the same fused expression on the same shapes, with the
same thread split, have the same text whatever program they come from. ``compile_module``
therefore emits every kernel into a module of its own and names its function after the hash
(``minixla_k_<hash>``):

* a kernel seen before (the same layer in another program, a re-jit) is only *declared* in the
  program's module; its symbol is registered with LLVM (``llvm.add_symbol``), so the JIT links
  the program's calls to the machine code compiled the first time;
* the kernels not seen before are linked into the program's module and compiled with it, then
  entered in the cache.

A program whose kernels all hit still compiles its thunks and sequence functions (small); a
program whose whole module text was compiled before reuses that ``JitModule`` outright.

The cache keeps at most ``MAX_KERNELS`` entries (least recently used first out). An evicted
kernel's code lives on as long as an executable using it does; a later program defines it
again (a module's own definition wins over a registered symbol).
"""
from __future__ import annotations

import collections
import hashlib
import threading
from dataclasses import dataclass

from llvmlite import binding as llvm

#: placeholder name a kernel is emitted under (replaced by its symbol)
PLACEHOLDER = "minixla_kernel"
#: most kernels (and programs) kept
MAX_KERNELS = 2048


@dataclass
class CachedKernel:
    symbol: str          # minixla_k_<hash>
    llvm_ir: str         # the kernel's own module, as emitted (under ``symbol``)
    jit: object          # the JitModule holding its machine code
    address: int


_kernels: collections.OrderedDict = collections.OrderedDict()
_programs: collections.OrderedDict = collections.OrderedDict()
_lock = threading.Lock()
stats = {"kernel_hits": 0, "kernel_misses": 0, "program_hits": 0, "program_misses": 0}


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def symbol_for(kernel_text: str) -> tuple[str, str]:
    """(symbol, text renamed to it) for a kernel module emitted under ``PLACEHOLDER``."""
    symbol = f"minixla_k_{_digest(kernel_text)}"
    # (llvmlite quotes every global name: ``@"minixla_kernel"``, ``@"minixla_kernel.zeros"``)
    return symbol, kernel_text.replace(f'@"{PLACEHOLDER}"', f'@"{symbol}"').replace(
        f'@"{PLACEHOLDER}.', f'@"{symbol}.')


def lookup(symbol: str) -> CachedKernel | None:
    with _lock:
        entry = _kernels.get(symbol)
        if entry is not None:
            _kernels.move_to_end(symbol)
            stats["kernel_hits"] += 1
        else:
            stats["kernel_misses"] += 1
        return entry


def insert(symbol: str, llvm_ir: str, jit) -> None:
    """Enter a kernel compiled in ``jit`` and register its symbol for later modules."""
    address = jit.addresses.get(symbol)
    if address is None:  # (a cached program linking to a kernel evicted since: nothing new)
        return
    llvm.add_symbol(symbol, address)
    with _lock:
        _kernels[symbol] = CachedKernel(symbol, llvm_ir, jit, address)
        _kernels.move_to_end(symbol)
        while len(_kernels) > MAX_KERNELS:
            _kernels.popitem(last=False)


def program(text, names, compile_fn):
    """The JitModule of a program's module ``text`` (``compile_fn()`` on a miss). The text
    names its kernels by their hashes, so it determines all of the program's code."""
    # (not the ``; ModuleID`` line: it names the HloModule, which differs between re-jits)
    key = _digest(text.split("\n", 1)[1] if text.startswith("; ModuleID") else text) + ":" + ",".join(names)
    with _lock:
        jit = _programs.get(key)
        if jit is not None:
            _programs.move_to_end(key)
            stats["program_hits"] += 1
            return jit
        stats["program_misses"] += 1
    jit = compile_fn()
    with _lock:
        _programs[key] = jit
        while len(_programs) > MAX_KERNELS:
            _programs.popitem(last=False)
    return jit


def clear() -> None:
    """Forget every cached kernel and program (compiled code in use stays alive). The next
    compile of any program is cold: the benchmarks call this before timing a compile."""
    with _lock:
        _kernels.clear()
        _programs.clear()
        for k in stats:
            stats[k] = 0


def size() -> int:
    return len(_kernels)
