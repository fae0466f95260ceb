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

The cache is a bounded LRU: at most ``MAX_KERNELS`` kernels and as many programs, and at most
``MAX_ENGINES`` distinct ``JitModule`` objects (each an MCJIT engine with its code, ~50 KiB and up)
kept alive by it -- entries leave least recently used first. An evicted kernel's code lives on
as long as an executable using it does, and is freed with the last of them (a dropped program
releases its engine once the cache lets go too); a later program defines it again (a module's
own definition wins over a registered symbol).
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


#: most JitModules (engines) the cache keeps alive
MAX_ENGINES = 128

# One LRU of ("kernel", symbol) -> CachedKernel and ("program", key) -> JitModule entries;
# _holds counts the entries of each JitModule (by id), to bound how many the cache keeps alive.
_entries: collections.OrderedDict = collections.OrderedDict()
_holds: dict[int, int] = {}
_counts = {"kernel": 0, "program": 0}
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


def _jit_of(value):
    return value.jit if isinstance(value, CachedKernel) else value


def _get(key):
    """The entry under ``key`` (moved to the most recent end), or None. Holds ``_lock``."""
    value = _entries.get(key)
    if value is not None:
        _entries.move_to_end(key)
    return value


def _put(key, value) -> None:
    """Enter ``value`` and evict the least recently used entries past the bounds. Holds ``_lock``."""
    _drop(key)
    _entries[key] = value
    _counts[key[0]] += 1
    _holds[id(_jit_of(value))] = _holds.get(id(_jit_of(value)), 0) + 1
    while (_counts["kernel"] > MAX_KERNELS or _counts["program"] > MAX_KERNELS
           or len(_holds) > MAX_ENGINES):
        _drop(next(iter(_entries)))


def _drop(key) -> None:
    value = _entries.pop(key, None)
    if value is None:
        return
    _counts[key[0]] -= 1
    jit = id(_jit_of(value))
    _holds[jit] -= 1
    if not _holds[jit]:
        del _holds[jit]


def lookup(symbol: str) -> CachedKernel | None:
    with _lock:
        entry = _get(("kernel", symbol))
        stats["kernel_hits" if entry is not None else "kernel_misses"] += 1
        return entry


def insert(symbol: str, llvm_ir: str, jit) -> None:
    """Enter a kernel compiled in ``jit`` and register its symbol for later modules."""
    address = jit.addresses.get(symbol)
    if address is None:  # (a cached program linking to a kernel evicted since: nothing new)
        return
    llvm.add_symbol(symbol, address)
    with _lock:
        _put(("kernel", symbol), CachedKernel(symbol, llvm_ir, jit, address))


def program(text, names, compile_fn):
    """The JitModule of a program's module ``text`` (``compile_fn()`` on a miss). The text
    names its kernels by their hashes, so it determines all of the program's code."""
    # (not the ``; ModuleID`` line: it names the HloModule, which differs between re-jits)
    key = ("program", _digest(text.split("\n", 1)[1] if text.startswith("; ModuleID") else text)
           + ":" + ",".join(names))
    with _lock:
        jit = _get(key)
        stats["program_hits" if jit is not None else "program_misses"] += 1
        if jit is not None:
            return jit
    jit = compile_fn()
    with _lock:
        _put(key, jit)
    return jit


def clear() -> None:
    """Forget every cached kernel and program (compiled code in use stays alive). The next
    compile of any program is cold: the benchmarks call this before timing a compile."""
    with _lock:
        _entries.clear()
        _holds.clear()
        _counts.update(kernel=0, program=0)
        for k in stats:
            stats[k] = 0


def size() -> int:
    """How many kernels the cache holds."""
    return _counts["kernel"]


def engines() -> int:
    """How many distinct JitModules (engines) the cache keeps alive."""
    return len(_holds)
