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

import contextlib
import functools
import os
import signal
import threading
import time

from llvmlite import binding as llvm

#: separates the modules bundled into one compile-worker request (never in IR text)
BUNDLE_SEPARATOR = "\0"


@contextlib.contextmanager
def interrupts_deferred():
    """Hold a Ctrl-C (SIGINT) until the block ends, then raise the KeyboardInterrupt.

    llvmlite hands a module over in two steps -- the C call (``link_in`` destroys the linked
    module, an engine takes ownership), then the Python bookkeeping -- and a KeyboardInterrupt
    between the two lets the module be freed twice: a segfault (found by a fresh-user test).
    Only the main thread receives KeyboardInterrupt, and only Python's default handler is
    replaced (a program's own handler is left alone)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    caught = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


def _hold_llvm_across_fork() -> None:
    """Fork only between two LLVM calls. llvmlite serializes LLVM behind one lock; a fork while
    another thread holds it (compiling) would leave the child's copy locked forever, and the
    child's first compile would hang. The forking thread takes the lock first (waiting for the
    call in flight) and both processes release it after."""
    lock = getattr(getattr(llvm.ffi, "lib", None), "_lock", None)
    if lock is None or not hasattr(os, "register_at_fork"):
        return

    def release():
        lock.__exit__(None, None, None)
    os.register_at_fork(before=lock.__enter__, after_in_parent=release, after_in_child=release)


_hold_llvm_across_fork()


@functools.cache
def _initialize():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return True


#: environment variables of the options ``minixla_llvm_cpu`` / ``minixla_llvm_features``
#: (read here, not through ``minixla.config``: the compile worker loads this file alone)
CPU_ENV, FEATURES_ENV = "MINIXLA_LLVM_CPU", "MINIXLA_LLVM_FEATURES"


@functools.cache
def host_cpu() -> tuple[str, str]:
    """``(cpu name, feature string)`` the generated code targets -- the one place that decides.

    Default: the host, as ``-march=native`` (``llvm.get_host_cpu_name()`` and every feature it
    reports, e.g. ``"rocketlake"``, ``"+avx512f,+avx2,..."``). ``MINIXLA_LLVM_CPU`` names another
    LLVM CPU (``haswell``: AVX2 and FMA, no AVX-512); its features are then the CPU's own, unless
    ``MINIXLA_LLVM_FEATURES`` (LLVM's ``"+avx2,-avx512f"`` form) is given too. Features given
    without a CPU are applied on top of the host's (``-avx512f`` turns AVX-512 off, and with
    it every feature that needs it). On a host with AVX-512 the default adds
    ``-prefer-256-bit``: loops are vectorized 512 bits wide (``+prefer-256-bit`` undoes it). Read once per process, at the first compile (the target
    machine, the kernel cache, the persistent cache's key and the compile workers must agree).
    Raises ``ValueError`` for a CPU name LLVM does not know (it would silently fall back to a
    generic x86-64, 4-wide SSE)."""
    _initialize()
    cpu = os.environ.get(CPU_ENV, "").strip()
    extra = ",".join(f.strip() for f in os.environ.get(FEATURES_ENV, "").split(",") if f.strip())
    if extra and any(f[0] not in "+-" for f in extra.split(",")):
        raise ValueError(f"{FEATURES_ENV}={extra!r}: each feature must start with + or - "
                         "(LLVM's form, e.g. '+avx2,-avx512f')")
    if not cpu:
        features = llvm.get_host_cpu_features()
        host = features.flatten()
        # LLVM's tuning for several Intel CPUs with AVX-512 (rocketlake, icelake-server,
        # skylake-avx512, ...) has the vectorizers prefer 256-bit vectors; measured on a
        # rocketlake host, 512-bit loops ran elementwise math 1.1-1.9x faster (in cache) and
        # never slower (docs/elementwise_math.md), as on Zen 4 where LLVM already picks 512.
        # (A user's ``+prefer-256-bit`` in MINIXLA_LLVM_FEATURES comes later and wins.)
        tuning = "-prefer-256-bit" if features.get("avx512f") else ""
        return llvm.get_host_cpu_name(), ",".join(f for f in (host, tuning, extra) if f)
    if cpu in ("host", "native"):
        cpu = llvm.get_host_cpu_name()
    _check_cpu_name(cpu)
    return cpu, extra


def _check_cpu_name(cpu: str) -> None:
    # LLVM prints "'x' is not a recognized processor for this target" to stderr and carries on
    # with a generic CPU; its known names are not exposed by llvmlite, so compile a probe and
    # ask whether the function's target-cpu survived. (Cheap: an empty module.)
    target = llvm.Target.from_default_triple()
    known = {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "generic"}
    if cpu in known or cpu == llvm.get_host_cpu_name() or not target.name.startswith("x86"):
        return
    import subprocess
    import sys
    probe = ("from llvmlite import binding as l; l.initialize_native_target(); "
             "l.initialize_native_asmprinter(); "
             f"l.Target.from_default_triple().create_target_machine(cpu={cpu!r})")
    err = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stderr
    if "not a recognized processor" in err:
        raise ValueError(f"{CPU_ENV}={cpu!r} is not a CPU LLVM knows (e.g. haswell, skylake-avx512, "
                         "znver4, x86-64-v3)")


def host_cpu_description() -> str:
    """One line naming the target: ``rocketlake (host)`` or ``haswell (host rocketlake)``, with
    the features set by ``MINIXLA_LLVM_FEATURES`` if any."""
    cpu, _ = host_cpu()
    host = llvm.get_host_cpu_name()
    extra = os.environ.get(FEATURES_ENV, "").strip()
    where = "host" if cpu == host and not os.environ.get(CPU_ENV, "").strip() else f"host {host}"
    return f"{cpu} ({where})" + (f" features {extra}" if extra else "")


def create_host_target_machine():
    """A fresh target machine for the CPU of ``host_cpu()`` (``-march=native -O3`` by default),
    usable by a JIT."""
    _initialize()
    cpu, features = host_cpu()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu, features=features, opt=3, jit=True)


@functools.cache
def vector_register_bytes() -> int:
    """The width of the target's vector registers: 64 (AVX-512), 32 (AVX2) or 16 (SSE, NEON).

    For a CPU name or feature string chosen by the options, asked of the code generator itself
    (a 512-bit add compiled for ``host_cpu()``: which registers does it use?)."""
    if not os.environ.get(CPU_ENV, "").strip() and not os.environ.get(FEATURES_ENV, "").strip():
        try:  # the host as it is: no compile needed (~13 ms)
            features = llvm.get_host_cpu_features()
        except RuntimeError:  # pragma: no cover - LLVM cannot tell on this host
            return 16
        return 64 if features.get("avx512f") else 32 if features.get("avx") else 16
    probe = ("define void @probe(ptr noalias %p) {\n"
             "  %v = load <16 x float>, ptr %p\n  %w = fadd <16 x float> %v, %v\n"
             "  store <16 x float> %w, ptr %p\n  ret void\n}\n")
    asm = host_target_machine().emit_assembly(parse(probe))
    if "zmm" in asm:
        return 64
    return 32 if "ymm" in asm else 16


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


def optimized_assembly(llvm_ir: str) -> str:
    """The host assembly for a module given as IR text before optimization."""
    mod = parse(llvm_ir)
    optimize(mod)
    return host_target_machine().emit_assembly(mod)


#: LLVM work done by this process: ``jit_modules`` counts the modules compiled to machine code
#: (programs and library routines); a program loaded from the persistent cache adds nothing.
compile_stats = {"jit_modules": 0, "loaded_modules": 0}


class LoadedObjects:
    """Machine code loaded from object files (the persistent compilation cache): one MCJIT
    engine holding them, with ``addresses`` of ``function_names``, like a ``JitModule`` but
    without running LLVM's optimizer or code generator. Calls between the objects and to
    symbols registered with ``llvm.add_symbol`` are resolved by the engine's linker."""

    llvm_ir = optimized_llvm_ir = asm = "; (loaded from the persistent compilation cache: no IR)"
    cached_kernels: dict = {}
    compile_ms = 0.0
    worker_modules = 0

    def __init__(self, object_code, function_names):
        _initialize()
        compile_stats["loaded_modules"] += 1
        self.object_code = list(object_code)
        with interrupts_deferred():
            self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), create_host_target_machine())
            for code in self.object_code:
                self._engine.add_object_file(llvm.ObjectFileRef.from_data(code))
            self._engine.finalize_object()
            self.addresses = {name: self._engine.get_function_address(name) for name in function_names}
        missing = [name for name, address in self.addresses.items() if not address]
        if missing:
            raise RuntimeError(f"loaded object code defines no function {missing[:3]}")

    def function_ir(self, name: str) -> str:
        return self.llvm_ir


class JitModule:
    """An optimized, compiled LLVM module whose functions can be called through ctypes.

    ``link``: more IR texts (modules of their own) linked into the first one before
    optimization -- the executable compiles a program's thunks with the kernels it has not
    compiled before, each kernel being a module of its own (see ``kernel_cache.py``).
    ``objects``: ``(IR text, Future of its object code)`` pairs of modules the compile workers
    are compiling meanwhile (``compile_server.py``); one whose future fails is compiled here.
    Every module ends as an object file loaded into one MCJIT engine, which resolves the calls
    between them (and to symbols registered with ``llvm.add_symbol``).

    Attributes:
      llvm_ir: the IR text we generated (before optimization), linked modules appended.
      optimized_llvm_ir: the IR text after ``-O3`` (printed on first access; the worker's
        modules are optimized again here for it, with the same passes).
      compile_ms: wall time of parse + link + optimize + machine-code generation, including
        the wait for the workers.
      worker_modules: how many of ``objects`` the workers compiled.
      asm: the host assembly (computed on first access: printing it costs as much as codegen).

    ``optimize``: run ``-O3`` on our own module; by default only when ``link`` is given (a
    module of thunks needs none). A module holding compute code of its own -- the GEMM
    library routines -- must pass True: unoptimized, every accumulator lives on the stack.
    """

    def __init__(self, llvm_ir: str, function_names, link=(), objects=(), optimize=None):
        t0 = time.perf_counter()
        # (a worker request may bundle several modules, NUL-separated: see compile_worker.py)
        self._remote_texts = [text.split(BUNDLE_SEPARATOR) for text, _ in objects]
        self.llvm_ir = "\n".join([llvm_ir, *link, *(t for texts in self._remote_texts for t in texts)])
        self._link = list(link)
        # Our own module becomes an object file first, so that its codegen overlaps the
        # worker's; the engine (an MCJIT over an empty module) then loads every object and
        # resolves the calls between them. It keeps the code alive: we hold it. (LLVM work
        # holds a Ctrl-C until it is done; the wait for the worker stays interruptible.)
        with interrupts_deferred():
            # A module with no kernel linked in holds only thunks and sequence functions (loads
            # and calls): instruction selection is all it needs. Not running the optimizer
            # here also matters for memory: every run of llvmlite's pass pipeline leaks ~80 KiB
            # in LLVM (llvmlite 0.50 allocates the pass builder's instrumentation callbacks
            # and never frees them), so with a compile worker the parent never runs it.
            compile_stats["jit_modules"] += 1
            optimize = bool(link) if optimize is None else optimize
            mod = self._optimized_module(llvm_ir, link) if optimize else parse(llvm_ir)
            self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), create_host_target_machine())
            main_code = host_target_machine().emit_object(mod)
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(main_code))
        # Every object file loaded, kept for the persistent compilation cache (minixla.cache).
        self.object_code = [main_code]
        self.worker_modules = 0
        for text, future in objects:
            try:
                code = future.result()
                self.worker_modules += 1
            except Exception:  # a worker failed or exited: compile it here (and report it here)
                with interrupts_deferred():
                    first, *rest = text.split(BUNDLE_SEPARATOR)
                    code = host_target_machine().emit_object(self._optimized_module(first, rest))
            with interrupts_deferred():
                self._engine.add_object_file(llvm.ObjectFileRef.from_data(code))
            self.object_code.append(code)
        with interrupts_deferred():
            self._engine.finalize_object()
            self.addresses = {name: self._engine.get_function_address(name) for name in function_names}
        self.compile_ms = (time.perf_counter() - t0) * 1e3
        self._main = llvm_ir
        #: whether LLVM's -O3 ran on our module (``optimize``)
        self.optimized = optimize
        self._dump = None
        self._asm = None

    @staticmethod
    def _optimized_module(text: str, link=()):
        with interrupts_deferred():
            mod = parse(text)
            for other in link:
                mod.link_in(parse(other))
            optimize(mod)
        return mod

    def _dumped(self):
        """(modules, their IR text, {function: its IR}) after ``-O3``, optimized again for a
        dump -- code generation rewrites a module's IR in place, and the worker's modules never
        were here -- from the same text with the same passes; texts taken before any codegen."""
        if self._dump is None:
            modules = [self._optimized_module(self._main, self._link),
                       *(self._optimized_module(texts[0], texts[1:]) for texts in self._remote_texts)]
            functions = {f.name: str(f) for m in modules for f in m.functions if not f.is_declaration}
            self._dump = (modules, "\n".join(str(m) for m in modules), functions)
        return self._dump

    @property
    def optimized_llvm_ir(self) -> str:
        return self._dumped()[1]

    def function_ir(self, name: str) -> str:
        """The optimized IR of one function of the module (its ``define``)."""
        functions = self._dumped()[2]
        if name not in functions:
            raise KeyError(f"no function {name!r} is defined in this JitModule")
        return functions[name]

    @property
    def asm(self) -> str:
        if self._asm is None:
            machine = host_target_machine()
            self._asm = "\n".join(machine.emit_assembly(m) for m in self._dumped()[0])
        return self._asm
