"""Compile an HloModule to machine code and run it (XLA:CPU's ``CpuExecutable``).

``compile_module`` emits one kernel per entry instruction (in program order) into one LLVM
module, optimizes and JIT-compiles it once, and prepares everything a call needs: ctypes
function pointers, the fixed argument addresses, and one preallocated arena for the
temporaries. A call then only allocates the fresh outputs and runs the kernels in order.

Not emitted as kernels: ``parameter`` and ``constant`` (their buffers are the caller's arrays
and the literals), ``tuple`` (it owns no data) and ``reshape``/``bitcast`` (a row-major
reshape is a bitcast: it aliases its operand's buffer).
"""
from __future__ import annotations

import ctypes
import re
import time

import numpy as np
from llvmlite import ir

from minixla.backends.llvm.kernels import DENORMAL_ATTRIBUTE, FLUSH_DENORMALS, emit_kernel
from minixla.backends.llvm.target import JitModule
from minixla.core.errors import UnsupportedError

_NO_KERNEL = {"parameter", "constant", "tuple", "reshape", "bitcast"}
_ALIASES = {"reshape", "bitcast"}
_ARENA_ALIGN = 64


def _source(instr):
    """The instruction whose buffer ``instr`` uses (looks through reshapes/bitcasts)."""
    while instr.opcode in _ALIASES:
        instr = instr.operands[0]
    return instr


def _kernel_name(n: int, instr) -> str:
    return f"k{n}_" + re.sub(r"[^A-Za-z0-9_]", "_", instr.name or instr.opcode)


class LlvmExecutable:
    """A compiled HloModule. ``exe(*arrays)`` -> list of numpy outputs (one per root value).

    Not thread-safe: the temporaries live in one arena shared by all calls.
    """

    def __init__(self, module, assignment, kernels, jit: JitModule):
        self.module = module
        self.assignment = assignment
        self._kernels = kernels
        self._jit = jit
        entry = module.entry
        self._params = entry.parameters
        root = entry.root
        self._roots = list(root.operands) if root.opcode == "tuple" else [root]
        self._arena = self._aligned_arena(int(assignment.arena_size))
        arena_base = self._arena.ctypes.data
        self._literals = {}  # constant instr -> contiguous numpy array (kept alive here)
        self._keepalive = []  # fused array constants: their addresses are baked into the calls
        self._compile_ms = 0.0

        # Fresh outputs: one per output index that some buffer is assigned to.
        self._out_specs = {}
        for instr, sl in assignment.slices.items():
            if sl.kind == "output":
                r = self._roots[sl.index] if sl.index < len(self._roots) else None
                if r is None or _source(r) is not _source(instr):
                    raise ValueError(f"buffer assignment puts '{instr.name}' in output {sl.index}, "
                                     f"which is not that root value")
                self._out_specs[sl.index] = (r.shape.dims, r.shape.dtype)

        def address(instr):
            """('fixed', addr) | ('param', k) | ('output', k) for the buffer of ``instr``."""
            src = _source(instr)
            if src.opcode == "parameter":
                return ("param", src.parameter_number)
            if src.opcode == "constant":
                return ("fixed", self._literal(src).ctypes.data)
            sl = assignment.slices[src]
            if sl.kind == "output":
                return ("output", sl.index)
            if sl.kind == "temp":
                if sl.offset < 0 or sl.offset + src.shape.nbytes > assignment.arena_size:
                    raise ValueError(f"buffer of '{src.name}' lies outside the arena")
                return ("fixed", arena_base + sl.offset)
            raise ValueError(f"unexpected buffer kind '{sl.kind}' for '{src.name}'")

        self._address = address
        # Per kernel: ctypes function, argument template, and the per-call patches.
        self._calls = []
        for k in kernels:
            if k.instr.shape.size == 0:
                continue  # nothing to compute (and nothing may be touched)
            out = address(k.instr)
            if out[0] == "param":
                raise ValueError(f"kernel '{k.name}' would write into a parameter or constant")
            args = [out] + [address(i) for i in k.inputs]
            _check_no_alias(k, args, assignment)
            consts = [np.ascontiguousarray(c) for c in k.constants]
            self._keepalive.extend(consts)
            args += [("fixed", c.ctypes.data) for c in consts]
            template = [a[1] if a[0] == "fixed" else None for a in args]
            patches = [(n, a[0], a[1]) for n, a in enumerate(args) if a[0] != "fixed"]
            fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(args))(jit.addresses[k.name])
            self._calls.append((fn, template, patches))

        # How to produce each output: fresh array, or a copy from another buffer.
        self._results = []
        taken = set()
        for j, r in enumerate(self._roots):
            sl = assignment.slices.get(_source(r)) if _source(r).opcode not in ("parameter", "constant") else None
            if sl is not None and sl.kind == "output" and sl.index == j and j not in taken:
                taken.add(j)
                self._results.append(("fresh", j, r))
            else:
                self._results.append(("copy", address(r), r))

    @staticmethod
    def _aligned_arena(size: int) -> np.ndarray:
        raw = np.zeros(size + _ARENA_ALIGN, np.uint8)
        skip = (-raw.ctypes.data) % _ARENA_ALIGN
        return raw[skip:skip + size]

    def _literal(self, instr) -> np.ndarray:
        if instr not in self._literals:
            self._literals[instr] = np.ascontiguousarray(np.asarray(instr.literal, dtype=instr.shape.dtype))
        return self._literals[instr]

    def __call__(self, *arrays):
        if len(arrays) != len(self._params):
            raise TypeError(f"expected {len(self._params)} arguments, got {len(arrays)}")
        params = []
        for p, a in zip(self._params, arrays):
            a = np.asarray(a)
            if not a.flags.c_contiguous:  # (np.ascontiguousarray would turn a 0-d array into 1-d)
                a = a.copy(order="C")
            if a.dtype != p.shape.dtype or a.shape != p.shape.dims:
                raise TypeError(f"argument {p.parameter_number}: expected {p.shape.dtype}{list(p.shape.dims)}, "
                                f"got {a.dtype}{list(a.shape)}")
            params.append(a)
        outs = {j: np.empty(dims, dtype) for j, (dims, dtype) in self._out_specs.items()}
        addr = {"param": [a.ctypes.data for a in params],
                "output": {j: o.ctypes.data for j, o in outs.items()}}
        for fn, template, patches in self._calls:
            args = list(template)
            for n, kind, k in patches:
                args[n] = addr[kind][k]
            fn(*args)
        results = []
        for how, where, r in self._results:
            if how == "fresh":
                results.append(outs[where])
            else:
                results.append(self._copy_from(where, r, params, outs))
        return results

    def _copy_from(self, where, r, params, outs):
        kind, k = where
        dims, dtype = r.shape.dims, r.shape.dtype
        if kind == "param":
            return params[k].reshape(dims).copy()
        if kind == "output":
            return outs[k].reshape(dims).copy()
        # A fixed address: a constant literal or a temp in the arena.
        src = _source(r)
        if src.opcode == "constant":
            return self._literal(src).reshape(dims).copy()
        off = self.assignment.slices[src].offset
        return self._arena[off:off + r.shape.nbytes].view(dtype).reshape(dims).copy()

    # -- introspection ---------------------------------------------------------------------
    def kernels(self) -> list[dict]:
        return [{"name": k.name, "kind": k.kind, "opcodes": list(k.opcodes)} for k in self._kernels]

    @property
    def llvm_ir(self) -> str:
        return self._jit.llvm_ir

    @property
    def optimized_llvm_ir(self) -> str:
        return self._jit.optimized_llvm_ir

    @property
    def asm(self) -> str:
        return self._jit.asm

    @property
    def compile_ms(self) -> float:
        return self._compile_ms


def _check_no_alias(kernel, args, assignment):
    """Kernel pointers are ``noalias``: the output may not share bytes with an input."""
    out_kind, out_where = args[0]
    if out_kind == "output":
        clash = any(a == args[0] for a in args[1:])
    else:
        lo, hi = out_where, out_where + kernel.instr.shape.nbytes
        clash = False
        for (kind, where), inp in zip(args[1:], kernel.inputs):
            if kind == "fixed" and where < hi and lo < where + inp.shape.nbytes:
                clash = True
    if clash:
        raise ValueError(f"buffer assignment gives kernel '{kernel.name}' an output buffer that "
                         "overlaps one of its inputs (kernels assume noalias)")


def compile_module(module, assignment) -> LlvmExecutable:
    """Compile ``module`` (an optimized HloModule) with buffer ``assignment`` for the host CPU.

    Raises ``UnsupportedError`` naming the opcode/dtype for anything the backend cannot emit.
    """

    t0 = time.perf_counter()
    llvm_module = ir.Module(name=module.name)
    kernels = []
    for instr in module.entry.instructions:
        if instr.opcode in _NO_KERNEL:
            continue
        if instr.opcode == "get-tuple-element":
            raise UnsupportedError("the LLVM backend does not support 'get-tuple-element'")
        kernels.append(emit_kernel(llvm_module, instr, _kernel_name(len(kernels), instr)))
    text = str(llvm_module)
    if FLUSH_DENORMALS:  # llvmlite cannot add string attributes: put it on each ``define`` line
        text = text.replace(") nounwind\n{", f") nounwind {DENORMAL_ATTRIBUTE}\n{{")
    jit = JitModule(text, [k.name for k in kernels])
    exe = LlvmExecutable(module, assignment, kernels, jit)
    exe._compile_ms = (time.perf_counter() - t0) * 1e3
    return exe
