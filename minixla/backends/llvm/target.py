"""The host target, the optimizer and the JIT (XLA:CPU's ``SimpleOrcJIT`` + ``CompilerFunctor``).

Three facts shape this file (measured, see DESIGN.md):

* the target machine must be the *host* CPU with its features, or LLVM emits 4-wide SSE
  and the kernels run ~7x slower than with AVX-512;
* llvmlite >= 0.45 only has LLVM's new pass manager, and ``llvm.initialize()`` raises:
  we initialize the native target and asm printer ourselves;
* an MCJIT execution engine owns the machine code: the function pointers die with it,
  so a ``JitModule`` keeps its engine alive as long as someone holds the module.
"""
from __future__ import annotations

import functools
import time

from llvmlite import binding as llvm


@functools.cache
def _initialize():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return True


def create_host_target_machine():
    """A fresh target machine for this CPU (``-march=native -O3``), usable by a JIT."""
    _initialize()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
        opt=3, jit=True)


@functools.cache
def host_target_machine():
    """The shared target machine used to optimize modules and print assembly.

    (An execution engine takes ownership of the machine it is given, so each JIT gets
    its own from ``create_host_target_machine``.)
    """
    return create_host_target_machine()


def parse(llvm_ir: str):
    """Parse LLVM IR text into a verified ``ModuleRef`` bound to the host triple/layout."""
    _initialize()
    tm = host_target_machine()
    mod = llvm.parse_assembly(llvm_ir)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    return mod


def optimize(mod) -> None:
    """Run LLVM's ``-O3`` module pipeline (inlining, loop vectorizer, SLP, ...) in place.

    Loop *unrolling* is off: it roughly doubled code size and cost 15-30% of compile time
    (a 1024-long row reduction was unrolled completely) for no measured speed-up -- the loop
    vectorizer's interleaving already keeps 4 vector accumulators in flight, and the dot and
    convolution micro-kernels are register-tiled by hand (``gemm.py``).
    """
    tm = host_target_machine()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_interleaving = True
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)


def emit_assembly(llvm_ir: str) -> str:
    """The host assembly for a module given as (optimized) IR text."""
    return host_target_machine().emit_assembly(parse(llvm_ir))


def optimized_assembly(llvm_ir: str) -> str:
    """The host assembly for a module given as IR text before optimization."""
    mod = parse(llvm_ir)
    optimize(mod)
    return host_target_machine().emit_assembly(mod)


class JitModule:
    """An optimized, compiled LLVM module whose functions can be called through ctypes.

    ``link``: more IR texts (modules of their own) linked into the first one before
    optimization -- the executable compiles a program's thunks with the kernels it has not
    compiled before, each kernel being a module of its own (see ``kernel_cache.py``).

    Attributes:
      llvm_ir: the IR text we generated (before optimization), linked modules appended.
      optimized_llvm_ir: the IR text after ``-O3`` (printed on first access).
      compile_ms: wall time of parse + link + optimize + machine-code generation.
      asm: the host assembly (computed on first access: printing it costs as much as codegen).
    """

    def __init__(self, llvm_ir: str, function_names, link=()):
        t0 = time.perf_counter()
        self.llvm_ir = "\n".join([llvm_ir, *link])
        mod = parse(llvm_ir)
        for text in link:
            mod.link_in(parse(text))
        optimize(mod)
        # The engine owns the module (and its own target machine) from here on; the module
        # stays readable as long as the engine lives (we hold both).
        self._module = mod
        self._engine = llvm.create_mcjit_compiler(mod, create_host_target_machine())
        self._engine.finalize_object()
        self.addresses = {name: self._engine.get_function_address(name) for name in function_names}
        self.compile_ms = (time.perf_counter() - t0) * 1e3
        self._optimized = None
        self._asm = None

    @property
    def optimized_llvm_ir(self) -> str:
        if self._optimized is None:
            self._optimized = str(self._module)
        return self._optimized

    def function_ir(self, name: str) -> str:
        """The optimized IR of one function of the module (its ``define``)."""
        return str(self._module.get_function(name))

    @property
    def asm(self) -> str:
        if self._asm is None:
            self._asm = emit_assembly(self.optimized_llvm_ir)
        return self._asm
