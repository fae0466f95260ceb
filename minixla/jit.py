"""``minixla.jit`` and its stages (``jax/_src/pjit.py``, ``jax/_src/stages.py``).

The one place that wires the pipeline together::

    jit(f).lower(*args)      trace -> jaxpr -> HLO            Lowered.as_text(): HLO before passes
          .compile()         passes -> buffers -> backend     Compiled.as_text(): optimized HLO
    jit(f)(*args)            the same, cached on the arguments' pytree structure and avals

The cache key is the input pytree structure plus each leaf's (shape, dtype, weak_type), the
static arguments' values and ``jax_enable_x64``, as JAX keys its own cache; a new shape or
dtype traces and compiles again. The cache is a bounded LRU (``minixla_jit_cache_size``);
``minixla_log_compiles``, ``minixla_explain_cache_misses`` and the recompile warning report
what compiles and why (``jit_diagnostics.py``); with ``minixla_compilation_cache_dir`` set a
compile first looks the optimized program up on disk (``minixla/cache``). Options:
``minixla.config``.
"""
from __future__ import annotations

import collections
import functools
import itertools
import inspect
import gc
import logging
import os
import threading
import time

import numpy as np
from jax import Array as _JaxArray
from jax import tree_util

from minixla import cache as persistent_cache
from minixla.config import config
from minixla.core import errors
from minixla.core.avals import WeakArray, get_aval, weak_array
from minixla.core.tracing import Tracer, _trace_stack, flatten_fun, trace_to_jaxpr
from minixla.dump import Dumper
from minixla import jit_diagnostics as diagnostics
from minixla.hlo.lowering import lower_jaxpr
from minixla.hlo.verifier import HloVerifierError, verify
from minixla.passes.algebraic_simplifier import AlgebraicSimplifier
from minixla.passes.buffer_assignment import assign_buffers
from minixla.passes.constant_folding import ConstantFolding
from minixla.passes.conv_canonicalization import ConvCanonicalization
from minixla.passes.cse import CommonSubexpressionElimination
from minixla.passes.dce import DeadCodeElimination
from minixla.passes.fusion import FusionPass, count_kernels, NOT_KERNELS
from minixla.passes.dot_lhs_copy import DotLhsRowMajor
from minixla.passes.memory_scheduler import MemoryScheduler
from minixla.passes.transpose_folding import TransposeFolding
from minixla.passes.pipeline import FixedPoint, PassPipeline

BACKENDS = ("llvm", "jax")
#: who traces ``fun``: minixla's tracer (switching to JAX's when ``fun`` calls JAX: None, the
#: default), minixla's only ("minixla"), or JAX's (``jax.make_jaxpr``, then ``minixla.frontends``)
FRONTENDS = (None, "minixla", "jax")
logger = logging.getLogger(__name__)


def _backend_compile(backend, module, assignment):
    """``(executable, jax cache hit)``: the hit is None unless XLA's compile consulted JAX's
    persistent cache (the ``jax`` backend with a cache directory), else whether it served it."""
    if backend == "llvm":
        from minixla.backends.llvm import compile_module
        return compile_module(module, assignment), None
    if backend != "jax":
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    from minixla.backends.jax_xla import compile_module
    with persistent_cache.jax_cache() as scope:  # (JAX's own persistent cache, same directory)
        executable = compile_module(module, assignment)
    return executable, (scope.hits > 0 if scope.requests else None)


def loop_passes() -> list:
    """XLA's control-flow passes, in the simplification fixed point (``passes/while_loop_*.py``)."""
    from minixla.passes.conditional_simplifier import ConditionalSimplifier
    from minixla.passes.tuple_simplifier import TupleSimplifier
    from minixla.passes.while_loop_constant_sinking import WhileLoopConstantSinking
    from minixla.passes.while_loop_dot_hoisting import WhileLoopDotHoisting
    from minixla.passes.while_loop_invariant_code_motion import WhileLoopInvariantCodeMotion
    from minixla.passes.while_loop_simplifier import WhileLoopSimplifier
    return [TupleSimplifier(), ConditionalSimplifier(), WhileLoopConstantSinking(), WhileLoopSimplifier(),
            WhileLoopInvariantCodeMotion(), WhileLoopDotHoisting()]


def optimization_pipeline(after_pass=None) -> PassPipeline:
    """The passes ``compile()`` runs, in order (XLA's ``RunHloPasses``)::

        simplify, to a fixed point (<= 25 rounds): cse, constant-folding, algebraic-simplifier,
            tuple-simplifier, conditional-simplifier, while-loop-constant-sinking,
            while-loop-simplifier, while-loop-invariant-code-motion, while-loop-dot-hoisting, dce
        transpose-folding, conv-canonicalization, dce, dot-lhs-row-major
        fusion
        dce

    ``after_pass(name, module)`` is called after every pass (nested ones included): ``compile``
    uses it to verify (``MINIXLA_VERIFY=1``) and dump (``MINIXLA_DUMP``).
    """
    simplify = PassPipeline("simplify", [CommonSubexpressionElimination(), ConstantFolding(),
                                         AlgebraicSimplifier(), *loop_passes(), DeadCodeElimination()],
                            after_pass)

    def after_top_level_pass(name, module):
        # The fixed point's own passes were already reported one by one.
        if after_pass is not None and not name.split("/")[-1].startswith("fixed-point"):
            after_pass(name, module)
    return PassPipeline("optimize", [FixedPoint(simplify), TransposeFolding(), ConvCanonicalization(),
                                     DeadCodeElimination(), DotLhsRowMajor(),
                                     FusionPass(), DeadCodeElimination(), MemoryScheduler()], after_top_level_pass)


def backend_passes(backend) -> list:
    """The passes a backend adds right after the simplification fixed point (XLA's
    backend-specific pipeline): for LLVM, ``while-loop-gemm-packing`` with its GEMM's panel
    width (a loop-invariant rhs packed once before the loop)."""
    if backend != "llvm":
        return []
    from minixla.backends.llvm.gemm import panel_columns
    from minixla.passes.while_loop_gemm_packing import WhileLoopGemmPacking
    return [WhileLoopGemmPacking(panel_columns)]


def _gc_paused(fn):
    """Run ``fn`` with Python's cyclic garbage collector paused (reference counting still frees
    memory; collection resumes afterwards). With JAX imported the heap holds ~300k objects and
    every full collection scans them all; building a large jaxpr/HLO triggers collections in
    proportion to its size, which made trace, lowering and passes superlinear in program size."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()
    return wrapper


def verify_enabled() -> bool:
    """``MINIXLA_VERIFY=1``: run the HLO verifier after every pass that reports a change."""
    return os.environ.get("MINIXLA_VERIFY", "0") not in ("", "0", "false", "False")


class Lowered:
    """A traced and lowered function (``jax.stages.Lowered``): the HLO before any pass."""

    def __init__(self, closed_jaxpr, module, in_tree, out_tree, in_avals, backend):
        self.jaxpr = closed_jaxpr
        self.hlo_module = module
        self.in_tree, self.out_tree, self.in_avals = in_tree, out_tree, in_avals
        self.backend = backend
        self.trace_ms = 0.0  # tracing to a jaxpr
        self.lower_ms = 0.0  # jaxpr -> HLO
        self.donated: tuple = ()  # parameter numbers of donated arguments (``donate_argnums``)

    def as_text(self) -> str:
        """HLO text as lowered from the jaxpr, before optimization."""
        return self.hlo_module.to_string()

    @_gc_paused
    def compile(self) -> "Compiled":
        """Run the pass pipeline, assign buffers and generate code for the backend."""
        t0 = time.perf_counter()
        check = verify_enabled()
        dumper = Dumper(self.hlo_module.name)
        lkey = None
        timing: dict = {}  # the persistent cache's key_setup_ms, key_ms and load_ms
        if not dumper.enabled:  # (a dump wants the passes run; the verifier checks what runs)
            # The persistent cache's first level: this lowered program was compiled before, so
            # load its executable and skip the passes too (minixla.cache.load_lowered).
            lkey, hit = persistent_cache.load_lowered(self.hlo_module, self.backend, self.donated, timing)
            if hit is not None:
                executable, pass_log, fusion_log, kernels_unfused = hit
                ms = (time.perf_counter() - t0) * 1e3
                compiled = Compiled(self, executable.module, executable.assignment, executable, pass_log,
                                    fusion_log, kernels_unfused, 0.0, ms)
                compiled._cache_times(timing, codegen_ms=0.0)
                compiled.persistent_cache_hit = True
                return compiled
        module = self.hlo_module.clone()
        if self.backend == "llvm":
            # one device, no partitioner: the constraints go (XLA's ShardingRemover); the
            # parameters' and root's annotations stay in the text
            from minixla.passes.sharding_remover import ShardingRemover
            ShardingRemover().run(module)
            # XLA:CPU expands rng-bit-generator into integer HLO before code generation
            from minixla.passes.rng_bit_generator_expander import RngBitGeneratorExpander
            RngBitGeneratorExpander().run(module)
        kernels_unfused = count_kernels(module)
        if dumper.enabled:  # (printing costs ~1 ms per compile: only when dumping)
            dumper.write("jaxpr", str(self.jaxpr))
        dumper.hlo("before_optimizations", module)
        if check:
            _verify(module, "lowering")

        def after_pass(name, m):
            if check and _pass_changed(pipeline, name):
                _verify(m, name)
            dumper.after_pass(name, m)
        pipeline = optimization_pipeline(after_pass)
        pipeline.passes[1:1] = backend_passes(self.backend)
        if self.backend != "llvm":  # (the row-major copy is for minixla's GEMM; XLA lays out its own)
            pipeline.passes = [p for p in pipeline.passes if not isinstance(p, DotLhsRowMajor)]
        pipeline.run(module)
        if check and not (pipeline.log and pipeline.log[-1].changed):
            _verify(module, "the last pass (or one that reported no change)")
        fusion = next(p for p in pipeline.passes if isinstance(p, FusionPass))
        # The persistent cache (minixla.cache) is keyed on the optimized module: a hit brings
        # the executable's own (identical) module and buffer plan, and no buffer assignment,
        # kernel emission or LLVM runs.
        key, executable = persistent_cache.load(module, self.backend, self.donated, timing)
        if executable is not None:
            module, assignment = executable.module, executable.assignment
        else:
            assignment = assign_buffers(module, donated=self.donated, temps_in_outputs=True)
        passes_ms = ((time.perf_counter() - t0) * 1e3 - timing.get("key_setup_ms", 0.0)
                     - timing.get("key_ms", 0.0) - timing.get("load_ms", 0.0))
        if dumper.enabled:
            dumper.hlo("after_optimizations", module)
            dumper.write("pass_log", "\n".join(f"{e.name}\t{'changed' if e.changed else 'unchanged'}\t{e.ms:.3f} ms"
                                               for e in pipeline.log))
            dumper.write("fusion_log", "\n".join(str(d) for d in fusion.log))
            dumper.write("buffer_assignment", assignment.to_string())
        cache_hit = executable is not None
        jax_hit = None
        t_code = time.perf_counter()
        if not cache_hit:
            executable, jax_hit = _backend_compile(self.backend, module, assignment)
        dumper.backend(executable)
        codegen_ms = (time.perf_counter() - t_code) * 1e3
        compile_ms = (time.perf_counter() - t0) * 1e3
        if not cache_hit and key is not None:
            persistent_cache.save(key, module, self.backend, executable,
                                  compile_ms + self.trace_ms + self.lower_ms)
        if lkey is not None:
            persistent_cache.save_lowered(lkey, key, module, self.backend, pipeline.log, fusion.log,
                                          kernels_unfused)
        compiled = Compiled(self, module, assignment, executable, pipeline.log, fusion.log,
                            kernels_unfused, passes_ms, compile_ms)
        compiled._cache_times(timing, codegen_ms)
        compiled.persistent_cache_hit = cache_hit
        compiled.jax_cache_hit = jax_hit
        return compiled


def _pass_changed(pipeline, name: str) -> bool:
    """Whether the pass ``name`` that just ran reported a change: the entry its pipeline logged
    right before calling ``after_pass`` (True when not found). ``MINIXLA_VERIFY`` skips the
    verifier after a pass that changed nothing (two in three passes of a typical compile: the
    module is the one already verified), and verifies the result once more at the end."""
    stack = [pipeline]
    while stack:
        p = stack.pop()
        log = getattr(p, "log", None)
        if isinstance(p, PassPipeline) and log and log[-1].name == name:
            return log[-1].changed
        stack += [getattr(q, "pass_", q) for q in getattr(p, "passes", ())]
    return True


def _verify(module, after: str):
    try:
        verify(module)
    except HloVerifierError as e:
        raise HloVerifierError(f"HLO verification failed after '{after}': {e}") from None


class Compiled:
    """A compiled function (``jax.stages.Compiled``). Call it like the original function.

    Attributes:
      hlo_module: the optimized HloModule. buffer_assignment: its BufferAssignment.
      pass_log: list of PassLogEntry (pass name, changed, ms). fusion_log: FusionDecision list.
      kernels_unfused: kernel count before fusion. compile_ms: the whole ``compile()``, in ms:
      passes_ms (the pass pipeline and buffer assignment; 0.0 when the persistent cache's first
      level served the program), codegen_ms (the backend: kernel emission and LLVM, or XLA),
      and, with a persistent cache, key_ms (computing its keys), key_setup_ms (the first key of
      the process: asking LLVM for the host target, which imports the LLVM backend) and
      load_ms (reading and deserializing an entry). persistent_cache_hit: minixla's cache
      served the executable. jax_cache_hit: None, or (``backend="jax"`` with a cache
      directory) whether JAX's persistent cache served XLA's compile.
    """

    def __init__(self, lowered, module, assignment, executable, pass_log, fusion_log,
                 kernels_unfused, passes_ms, compile_ms):
        self.lowered = lowered
        self.hlo_module = module
        self.buffer_assignment = assignment
        self.executable = executable
        self.pass_log = pass_log
        self.fusion_log = fusion_log
        self.kernels_unfused = kernels_unfused
        self.passes_ms = passes_ms
        self.compile_ms = compile_ms
        self.in_avals = lowered.in_avals
        self.persistent_cache_hit = False
        self.jax_cache_hit = None
        self.codegen_ms = compile_ms - passes_ms
        self.key_ms = self.key_setup_ms = self.load_ms = 0.0
        out_tree = lowered.out_tree
        self._single_output = out_tree.num_leaves == 1 and out_tree.num_nodes == 1  # a bare array
        # run on arrays of the compiled avals (None: arguments need _check_args, e.g. donation)
        self._run_trusted = None if lowered.donated else getattr(executable, "call_trusted", None)
        # the outputs jax.jit returns weakly typed (``jit(lambda x: x * 2)(1.0)``): their out
        # avals are weak, and they come back as ``WeakArray`` s (see ``_mark_weak``)
        self._weak_outs = _weak_outputs(lowered.jaxpr)

    def _cache_times(self, timing: dict, codegen_ms: float) -> None:
        self.codegen_ms = codegen_ms
        self.key_ms = timing.get("key_ms", 0.0)
        self.key_setup_ms = timing.get("key_setup_ms", 0.0)
        self.load_ms = timing.get("load_ms", 0.0)

    def as_text(self) -> str:
        """HLO text after the optimization passes (fusions included)."""
        return self.hlo_module.to_string()

    def memory_analysis(self):
        """Byte counts of this program (``jax.stages.Compiled.memory_analysis()``): JAX's
        ``argument_size_in_bytes``, ``output_size_in_bytes``, ``alias_size_in_bytes``,
        ``temp_size_in_bytes``, plus ``temp_lower_bound_in_bytes``, ``peak_live_bytes`` and the
        per-step ``live_bytes``. See ``minixla.memory.MemoryAnalysis``. (For the jax backend this
        describes minixla's buffer plan, not the one XLA makes.)"""
        from minixla.memory import memory_analysis
        return memory_analysis(self.hlo_module, self.buffer_assignment)

    def graph(self, fused: bool = True):
        """The HLO dataflow graph as a picture (``minixla.hlo.graphviz.HloGraph``): fusions drawn
        as clusters; shows inline in a notebook. ``fused=False`` draws the HLO before the passes."""
        from minixla.hlo.graphviz import hlo_graph
        if fused:
            return hlo_graph(self.hlo_module, self.buffer_assignment)
        return hlo_graph(self.lowered.hlo_module)

    def kernels(self) -> list[dict]:
        """One entry per generated kernel: ``{"name", "kind", "opcodes"}``; ``kind`` is the fusion
        kind (kLoop/kInput/kOutput) or the opcode of an unfused instruction."""
        out = []
        for instr in self.hlo_module.entry.instructions:
            if instr.opcode in NOT_KERNELS:
                continue
            if instr.opcode == "fusion":
                ops = [i.opcode for i in instr.fused_computation.instructions if i.opcode != "parameter"]
                out.append({"name": instr.name, "kind": instr.attrs["kind"], "opcodes": ops})
            else:
                out.append({"name": instr.name, "kind": instr.opcode, "opcodes": [instr.opcode]})
        return out

    def _check_args(self, flat):
        if len(flat) != len(self.in_avals):
            raise TypeError(f"compiled function expects {len(self.in_avals)} array arguments, got {len(flat)}")
        arrays = []
        for i, (x, aval) in enumerate(zip(flat, self.in_avals)):
            # Fast path for the common case, a C-contiguous numpy array of the compiled type.
            if (type(x) is np.ndarray and x.dtype == aval.dtype and x.shape == aval.shape
                    and x.flags.c_contiguous):
                arrays.append(x)
                continue
            got = get_aval(x)
            if got.shape != aval.shape or got.dtype != aval.dtype:
                raise TypeError(f"argument {i}: compiled for {aval.str_short()}, called with {got.str_short()}")
            arrays.append(np.asarray(x, dtype=aval.dtype, order="C"))
        for i in self.lowered.donated:
            # A donated argument is overwritten: it must be a writable array of its own.
            a = arrays[i]
            if not a.flags.writeable or any(j != i and np.may_share_memory(a, b) for j, b in enumerate(arrays)):
                arrays[i] = a.copy()
        return arrays

    def call_flat(self, flat):
        """Run on the flat leaves ``flat`` (checked against the compiled avals); returns the flat
        outputs, weakly typed where JAX's are (``_mark_weak``)."""
        if getattr(self.executable, "takes_device_arrays", False) and not self.lowered.donated:
            # (a sharded jax-backend program: jax.Arrays stay on their devices)
            if len(flat) != len(self.in_avals):
                raise TypeError(f"compiled function expects {len(self.in_avals)} array arguments, got {len(flat)}")
            for i, (x, aval) in enumerate(zip(flat, self.in_avals)):
                got = get_aval(x)
                if got.shape != aval.shape or got.dtype != aval.dtype:
                    raise TypeError(f"argument {i}: compiled for {aval.str_short()}, called with {got.str_short()}")
            outs = self.executable(*flat)
        else:
            outs = self.executable(*self._check_args(flat))
        return _mark_weak(outs, self._weak_outs) if self._weak_outs else outs

    def _call_matching(self, flat):
        """``call_flat`` for leaves whose signature is known to match (``Jitted.__call__``
        found this executable under their avals): only conversions are left to do."""
        if self.lowered.donated:
            outs = self.executable(*self._check_args(flat))
        elif getattr(self.executable, "takes_device_arrays", False):  # (a sharded jax-backend program)
            outs = self.executable(*flat)
        else:
            arrays = [x if type(x) is np.ndarray and x.dtype == aval.dtype and x.flags.c_contiguous
                      else np.asarray(x, dtype=aval.dtype, order="C") for x, aval in zip(flat, self.in_avals)]
            run = getattr(self.executable, "call_trusted", None)
            outs = run(arrays) if run is not None else self.executable(*arrays)
        return _mark_weak(outs, self._weak_outs) if self._weak_outs else outs

    def __call__(self, *args, **kwargs):
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        if in_tree != self.lowered.in_tree:  # (JAX typed keys: compiled as minixla's, converted here)
            args, kwargs = _jax_keys_to_minixla(args, kwargs)
            flat, in_tree = tree_util.tree_flatten((args, kwargs))
        if in_tree != self.lowered.in_tree:
            raise TypeError(f"compiled for argument structure {self.lowered.in_tree}, got {in_tree}")
        outs = self.call_flat(flat)
        return tree_util.tree_unflatten(self.lowered.out_tree, outs)


class Jitted:
    """The object ``minixla.jit(f)`` returns: callable, with ``.lower(*args)`` like ``jax.jit``."""

    def __init__(self, fun, backend: str = "llvm", donate_argnums=(), static_argnums=(), static_argnames=(),
                 frontend=None, in_shardings=None, out_shardings=None):
        from minixla.sharding.api import UNSPECIFIED
        # (None given explicitly is JAX's "unconstrained", the same as not given)
        self.in_shardings = UNSPECIFIED if in_shardings is None else in_shardings
        self.out_shardings = UNSPECIFIED if out_shardings is None else out_shardings
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
        if frontend not in FRONTENDS:
            raise ValueError(f"unknown frontend {frontend!r}; choose one of {FRONTENDS}")
        # First, so that what ``fun.__dict__`` holds never overwrites the Jitted's own fields: a
        # ``custom_jvp`` (minixla's or JAX's) and ``jax.grad`` of one carry ``fun`` (the primal).
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.backend = backend
        self.frontend = frontend
        as_tuple = lambda x: (x,) if isinstance(x, (int, str)) else tuple(x)
        self.donate_argnums = as_tuple(donate_argnums)
        self.static_argnums = as_tuple(static_argnums)
        self.static_argnames = as_tuple(static_argnames)
        # As jax.jit: a static argument may be passed either way, so each of static_argnums and
        # static_argnames implies the other through the function's signature.
        try:
            params = [p for p in inspect.signature(fun).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):  # builtins without a signature
            params = []
        names = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        try:
            has_varargs = any(p.kind is p.VAR_POSITIONAL for p in inspect.signature(fun).parameters.values())
            known = True
        except (TypeError, ValueError):
            known = False
        bad = [i for i in self.static_argnums if not -len(params) <= i < len(params)]
        if known and not has_varargs and bad:
            # as jax.jit, at decoration time: a static argnum the function cannot receive
            raise errors.StaticArgumentError(
                f"Jitted function has static_argnums={self.static_argnums}, but only accepts "
                f"{len(params)} positional arguments.\n  at: {errors.user_source_line()}")
        self.static_argnames += tuple(params[i].name for i in self.static_argnums
                                      if -len(params) <= i < len(params) and params[i].name in names
                                      and params[i].name not in self.static_argnames)
        self.static_argnums += tuple(names.index(n) for n in self.static_argnames
                                     if n in names and names.index(n) not in self.static_argnums)
        self._has_static = bool(self.static_argnums or self.static_argnames)
        # Compiled signatures (bounded: minixla_jit_cache_size; the least recently used, by
        # each Compiled's ``_last_use`` stamp, is evicted first).
        self._cache: dict = {}
        self._compiling: dict = {}  # key -> lock held while that signature compiles
        self._compiling_lock = threading.Lock()
        # Descriptions of the signatures compiled so far (for the diagnostics; bounded).
        self._history: collections.OrderedDict = collections.OrderedDict()
        self._warned_recompiles = False

    def _split_static(self, args, kwargs):
        """Separate static arguments (compile-time Python values, part of the cache key) from
        the dynamic ones (traced). Returns ``(fun of the dynamic args, args, kwargs, static key)``."""
        if not self.static_argnums and not self.static_argnames:
            return self.fun, args, kwargs, ()
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n}
        static = tuple((i, args[i]) for i in sorted(static_pos))
        static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
        for where, value in static + static_kw:
            try:
                hash(value)
            except TypeError as e:  # (JAX's message)
                what = f"argument {where}" if isinstance(where, str) else f"positional argument {where}"
                raise ValueError(
                    "Non-hashable static arguments are not supported. An error occurred while trying "
                    f"to hash an object of type {type(value)}, {value!r} (static {what}). The error "
                    f"was:\n{type(e).__name__}: {e}\n  at: {errors.user_source_line()}") from None
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}

        def fun(*dargs, **dkwargs):
            it = iter(dargs)
            full = [dict(static)[i] if i in static_pos else next(it) for i in range(n)]
            return self.fun(*full, **dkwargs, **dict(static_kw))
        functools.update_wrapper(fun, self.fun)
        return fun, dyn_args, dyn_kwargs, (static, static_kw)

    def _dynamic_donations(self, args):
        """``donate_argnums`` renumbered among the dynamic (non-static) positional arguments."""
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n}
        out = []
        for i in self.donate_argnums:
            if not -n <= i < n:
                raise ValueError(f"donate_argnums={i} but the function was called with {n} positional arguments")
            if i % n in static_pos:
                raise ValueError(f"argument {i % n} cannot be both static and donated")
            out.append(i % n - sum(1 for s in static_pos if s < i % n))
        return tuple(out)

    @_gc_paused
    def lower(self, *args, **kwargs) -> Lowered:
        """Trace with the avals of ``args`` and lower to HLO (no optimization yet). A JAX typed
        key (``jax.random.key``) is passed as minixla's ``PRNGKeyArray`` of its data (a JAX
        front end sees a JAX typed key again)."""
        args, kwargs = _jax_keys_to_minixla(args, kwargs)
        fun, dyn_args, dyn_kwargs, _ = self._split_static(args, kwargs)
        if self.frontend != "minixla":
            fun = _keys_for_jax_tracer(fun)
        flat, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        try:
            in_avals = [get_aval(x) for x in flat]
        except errors.MinixlaError as e:
            self._argument_error(args, kwargs, e)
        flat_fun, out_store = flatten_fun(fun, in_tree)
        t0 = time.perf_counter()
        with persistent_cache.jax_cache():  # (tracing may compile eager ops with XLA)
            closed = self._trace(flat_fun, in_avals)
        t1 = time.perf_counter()
        name = f"jit_{getattr(self.fun, '__name__', 'fn')}".replace("<", "").replace(">", "")
        module = lower_jaxpr(closed, name=name)
        if self.in_shardings is not _NO_SHARDING or self.out_shardings is not _NO_SHARDING:
            self._annotate(module, args, dyn_args, dyn_kwargs, out_store[-1])
        lowered = Lowered(closed, module, in_tree, out_store[-1], in_avals, self.backend)
        lowered.donated = _donated_leaves(dyn_args, self._dynamic_donations(args))
        lowered.trace_ms = (t1 - t0) * 1e3
        lowered.lower_ms = (time.perf_counter() - t1) * 1e3
        return lowered

    def _annotate(self, module, args, dyn_args, dyn_kwargs, out_tree):
        """``in_shardings``/``out_shardings`` onto the lowered module (``minixla.sharding.api``),
        errors naming the argument and the user's line."""
        from minixla.sharding.api import ShardingError, annotate_module
        try:
            names = list(inspect.signature(self.fun).parameters)
        except (TypeError, ValueError):
            names = []
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n}
        names = [nm for i, nm in enumerate(names[:n]) if i not in static_pos] + names[n:]
        try:
            annotate_module(module, self.in_shardings, self.out_shardings, dyn_args, names, out_tree,
                            self.backend, bool(dyn_kwargs))
        except ShardingError as e:
            raise ShardingError(f"{e.args[0]}\n  at: {errors.user_source_line()}") from None

    def _trace(self, flat_fun, in_avals):
        """The jaxpr of ``flat_fun``, traced by the front end ``frontend=`` names. With the
        default (None) a function that calls JAX (``jnp.sin`` on a minixla tracer) is traced again
        by JAX and imported (``minixla.frontends.jax_importer``), and a log line says so."""
        if self.frontend == "jax":
            from minixla.frontends import jax_importer
            return jax_importer.trace_with_jax(flat_fun, in_avals)
        try:
            return trace_to_jaxpr(flat_fun, in_avals)
        except errors.JaxFunctionError as e:
            if self.frontend == "minixla":
                raise
            from minixla.frontends import jax_importer  # (only when needed: it imports jax.extend)
            name = getattr(self.fun, "__name__", "fn")
            where = [ln.strip()[4:] for ln in e.args[0].splitlines() if ln.strip().startswith("at: ")]
            try:
                closed = jax_importer.trace_with_jax(flat_fun, in_avals)
            except jax_importer.UnsupportedJaxPrimitiveError:
                raise
            except Exception:
                # JAX cannot trace it either (minixla code mixed in: a minixla.grad around jnp
                # calls): minixla's error is the one that says what to change
                raise e from None
            logger.warning("jit(%s) calls a JAX function on a traced value (at %s): traced again with "
                           "JAX's tracer and its jaxpr imported (minixla.jit(%s, frontend=\"jax\") does "
                           "this directly)", name, where[-1] if where else "?", name)
            self.frontend = "jax"
            return closed

    def __call__(self, *args, **kwargs):
        # The dispatch path (a cached call): flatten, key, look up, run. Every step here costs
        # on each call of a small jitted function, so the signature doubles as the argument
        # check (the executable found under it was compiled for exactly these avals).
        if self._has_static:
            fun, dyn_args, dyn_kwargs, static_key = self._split_static(args, kwargs)
        else:
            fun, dyn_args, dyn_kwargs, static_key = self.fun, args, kwargs, ()
        flat, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        if _trace_stack:
            return self._call_nested(fun, dyn_args, dyn_kwargs)  # (see _signature)
        try:
            key = (in_tree, tuple([(x.shape, x.dtype) if type(x) is np.ndarray else _signature(x)
                                   for x in flat]), static_key, _x64_enabled())
        except _Inline:
            return self._call_nested(fun, dyn_args, dyn_kwargs)
        except _JaxKey:  # (off the fast path: each such call converts its keys first)
            args, kwargs = _jax_keys_to_minixla(args, kwargs)
            return self(*args, **kwargs)
        except errors.MinixlaError as e:
            self._argument_error(args, kwargs, e)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._compile_once(key, args, kwargs)
        # (the LRU order: a stamp, not OrderedDict.move_to_end, which hashes the key again --
        # ~60 us for 100 leaves)
        compiled._last_use = next(_use_clock)
        if compiled._run_trusted is None:
            outs = compiled._call_matching(flat)
        else:  # (Compiled._call_matching, inlined)
            # (a numpy array keyed by its own dtype, e.g. int64 under x32, still converts)
            outs = compiled._run_trusted([x if type(x) is np.ndarray and x.dtype == aval.dtype
                                          and x.flags.c_contiguous
                                          else np.asarray(x, dtype=aval.dtype, order="C")
                                          for x, aval in zip(flat, compiled.in_avals)])
            if compiled._weak_outs:
                outs = _mark_weak(outs, compiled._weak_outs)
        if compiled._single_output:
            return outs[0]
        return tree_util.tree_unflatten(compiled.lowered.out_tree, outs)

    def _call_nested(self, fun, dyn_args, dyn_kwargs):
        """jit inside a traced or transformed function (make_jaxpr, jit, grad, vmap): one `jit`
        equation carrying its jaxpr, inlined when lowered (JAX's pjit equation); a JAX function is
        traced by JAX and its jaxpr interpreted on the outer trace's values. Its
        ``in_shardings``/``out_shardings`` constrain its arguments and results there, as in JAX."""
        if self.in_shardings is not _NO_SHARDING or self.out_shardings is not _NO_SHARDING:
            from minixla.sharding.api import constrain_call
            fun = constrain_call(fun, self.in_shardings, self.out_shardings)
        if self.frontend == "jax":
            from minixla.frontends.jax_importer import call_with_jax
            return call_with_jax(fun, dyn_args, dyn_kwargs)
        from minixla.interpreters.jit_call import call_jitted
        return call_jitted(getattr(self.fun, "__name__", "fn"), fun, dyn_args, dyn_kwargs)

    def clear_cache(self) -> None:
        """Forget every compiled signature of this function (``jax.jit(f).clear_cache()``);
        the next call traces and compiles again (the persistent cache may still serve it)."""
        with self._compiling_lock:
            self._cache.clear()
            self._history.clear()
            self._warned_recompiles = False

    def _cache_size(self) -> int:
        """How many compiled signatures the in-memory cache holds (``jax.jit(f)._cache_size()``)."""
        return len(self._cache)

    cache_size = _cache_size

    def _compile_once(self, key, args, kwargs) -> "Compiled":
        """Compile the signature ``key`` once however many threads call it first: the others
        wait for that compile (as jax.jit does) instead of compiling it again. (If it raises,
        each waiter tries, and raises, in turn.) Reentrant: a function that calls itself while
        being traced still recurses as it would without the lock."""
        with self._compiling_lock:
            lock = self._compiling.setdefault(key, threading.RLock())
        try:
            with lock:
                compiled = self._cache.get(key)
                if compiled is None:
                    compiled = self._compile_new(key, args, kwargs)
                return compiled
        finally:
            with self._compiling_lock:
                if key in self._cache:
                    self._compiling.pop(key, None)

    def _compile_new(self, key, args, kwargs) -> "Compiled":
        """Trace, lower and compile a signature not in the cache; enter it (evicting the least
        recently used past ``minixla_jit_cache_size``) and report it as configured."""
        log, explain = config.read("minixla_log_compiles"), config.read("minixla_explain_cache_misses")
        threshold = config.read("minixla_recompile_warning_threshold")
        desc = None
        if log or explain or threshold > 0:
            desc = diagnostics.describe_signature(self.fun, args, kwargs, self.static_argnums,
                                                  self.static_argnames, key[-1])
        if explain:
            diagnostics.explain_miss(self.fun, errors.user_source_line(), desc, list(self._history.values()))
        compiled = self.lower(*args, **kwargs).compile()
        if log:
            diagnostics.log_compile(self.fun, desc, compiled, persistent_cache.directory() is not None)
        with self._compiling_lock:
            self._cache[key] = compiled
            compiled._last_use = next(_use_clock)
            limit = config.read("minixla_jit_cache_size")
            while 0 <= limit < len(self._cache):  # (O(size) per eviction: only on a compile)
                oldest = min(self._cache, key=lambda k: self._cache[k]._last_use)
                del self._cache[oldest]
            if desc is not None:
                self._history[key] = desc
                while len(self._history) > _HISTORY:
                    self._history.popitem(last=False)
            distinct = len(self._history)
        if 0 < threshold < distinct and not self._warned_recompiles:
            self._warned_recompiles = True
            diagnostics.warn_recompiles(self.fun, list(self._history.values()), threshold)
        return compiled

    def _argument_error(self, args, kwargs, e):
        """Raise ``e`` (an argument that is not an array) naming the argument, as ``jax.jit``
        does ("at path self"), and the user's line."""
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n}
        try:
            names = list(inspect.signature(self.fun).parameters)
        except (TypeError, ValueError):
            names = []
        where = "an argument"
        leaves = [(names[i] if i < len(names) else f"args[{i}]", a) for i, a in enumerate(args)
                  if i not in static_pos]
        leaves += [(k, v) for k, v in kwargs.items() if k not in self.static_argnames]
        for name, value in leaves:
            for path, leaf in tree_util.tree_flatten_with_path(value)[0]:
                try:
                    get_aval(leaf)
                except errors.MinixlaError:
                    where = f"argument {name}{tree_util.keystr(path)}"
                    break
            else:
                continue
            break
        fname = getattr(self.fun, "__qualname__", getattr(self.fun, "__name__", "fn")).rsplit(".<locals>.", 1)[-1]
        hint = ("; mark it static (static_argnums / static_argnames) or make it a pytree of arrays"
                if isinstance(e, errors.DTypeError) and "valid minixla type" in e.args[0] else "")
        raise type(e)(f"jit({fname}): {where}: {e.args[0]}{hint}\n  at: {errors.user_source_line()}") from None

    def __get__(self, instance, owner=None):
        """A jitted function in a class body is a method, as with ``jax.jit``: ``obj.method``
        passes ``obj`` as the first argument. ``@functools.partial(jit, static_argnums=0)``
        makes ``self`` static (hashable; equal instances share compiled code); without it
        ``self`` must be a pytree of arrays."""
        if instance is None:
            return self
        return BoundJitted(self, instance)


class BoundJitted:
    """``obj.method`` for a ``jit``-decorated method: the ``Jitted`` with ``obj`` bound as the
    first argument of calls and of ``lower(...)`` (a bound method's ``__func__``/``__self__``)."""
    __slots__ = ("__func__", "__self__")

    def __init__(self, jitted: Jitted, instance):
        self.__func__, self.__self__ = jitted, instance

    def __call__(self, *args, **kwargs):
        return self.__func__(self.__self__, *args, **kwargs)

    def lower(self, *args, **kwargs) -> Lowered:
        """``Jitted.lower`` with ``self`` bound."""
        return self.__func__.lower(self.__self__, *args, **kwargs)

    def __getattr__(self, name):  # fun, backend, __name__, __wrapped__, ... of the Jitted
        if name in ("__func__", "__self__"):  # (not set yet: copy, pickle)
            raise AttributeError(name)
        return getattr(self.__func__, name)

    def __eq__(self, other):  # as bound methods: the same function bound to the same object
        return (isinstance(other, BoundJitted) and self.__func__ is other.__func__
                and self.__self__ is other.__self__)

    def __hash__(self):
        return hash((id(self.__func__), id(self.__self__)))

    def __repr__(self):
        return f"<bound jitted method {getattr(self.__func__, '__qualname__', '?')} of {self.__self__!r}>"


#: "in_shardings/out_shardings not given" (``minixla.sharding.api.UNSPECIFIED``)
from minixla.sharding.api import UNSPECIFIED as _NO_SHARDING  # noqa: E402

#: signature descriptions kept per function for the diagnostics
_HISTORY = 256
#: stamps the last use of a compiled signature (``next`` of an itertools.count is atomic)
_use_clock = itertools.count()


def _weak_outputs(closed_jaxpr) -> tuple:
    """Positions of the weakly typed outputs of ``closed_jaxpr`` (its out avals' ``weak_type``)."""
    out_avals = getattr(closed_jaxpr, "out_avals", None) or ()
    return tuple(i for i, aval in enumerate(out_avals) if getattr(aval, "weak_type", False))


def _mark_weak(outs, weak) -> list:
    """The flat outputs ``outs`` of an executable with those at positions ``weak`` weakly typed,
    as ``jax.jit`` returns them (``jax.jit(lambda: 1.0)().weak_type`` is True, so the result
    plus a float16 array is float16): a numpy array becomes a ``WeakArray`` view (no copy), a
    ``jax.Array`` a weakly typed ``jax.Array`` (``_weak_jax_array``)."""
    outs = list(outs)
    for i in weak:
        o = outs[i]
        if type(o) is np.ndarray:  # (the common case: a view, ~0.3 us)
            outs[i] = o.view(WeakArray)
        elif isinstance(o, _JaxArray):
            outs[i] = _weak_jax_array(o)
        elif not isinstance(o, WeakArray):
            outs[i] = weak_array(o)
    return outs


def _weak_jax_array(x):
    """``x`` (a ``jax.Array``) weakly typed, on the same devices and sharding: JAX's own
    ``convert_element_type(..., weak_type=True)``, the operation ``jax.jit`` ends a weakly typed
    output with (an internal name: without it, ``x`` is returned strongly typed)."""
    if x.weak_type:
        return x
    try:
        from jax._src.lax.lax import _convert_element_type
    except ImportError:  # pragma: no cover - another JAX layout
        return x
    return _convert_element_type(x, x.dtype, weak_type=True)


class _Inline(Exception):
    """A tracer among the arguments: the call is inlined into the trace it belongs to."""


def _signature(x):
    """The cache-key part of one argument: its aval, or just (shape, dtype) for a numpy array
    (a cheap, equivalent key: numpy arrays are never weakly typed; a float64 array that JAX
    would narrow to float32 merely gets its own cache entry). A tracer raises ``_Inline``: jit
    inside a traced or transformed function (make_jaxpr, jit, grad, vmap) is inlined, so the
    outer trace sees its primitives (and closed-over outer tracers stay legal)."""
    if type(x) is np.ndarray:
        return (x.shape, x.dtype)
    if isinstance(x, Tracer):
        raise _Inline
    if isinstance(x, _JaxArray) and not getattr(x, "weak_type", False):
        # (the key of a numpy array of its aval: a jax.Array result fed back -- a training
        # step's parameters -- finds the executable its numpy first call compiled)
        try:
            return (tuple(x.shape), np.dtype(x.dtype))
        except TypeError:  # (an extended dtype: a JAX typed key, jax.random.key)
            raise _JaxKey from None
    return get_aval(x)


class _JaxKey(Exception):
    """A JAX typed key among the arguments: passed as minixla's ``PRNGKeyArray`` of its data."""


def _jax_keys_to_minixla(args, kwargs):
    """``(args, kwargs)`` with every JAX typed key (``jax.random.key``, a ``key<fry>`` jax.Array)
    replaced by the ``minixla.random.PRNGKeyArray`` of its data (``jax.random.key_data``),
    minixla's typed key: its pytree leaf is the ``uint32[..., 2]`` data, so it is traced,
    cached and passed like any array. Unchanged (the same objects) when there is none."""
    from minixla.random.keys import jax_keys_to_minixla
    return jax_keys_to_minixla((args, kwargs), "minixla.jit")


def _keys_for_jax_tracer(fun):
    """``fun`` taking JAX typed keys where it is given minixla ``PRNGKeyArray`` s around JAX's
    tracers (JAX's front end traces it: ``frontend="jax"``, or the switch to JAX's tracer), so
    a JAX program given ``jax.random.key(..)`` sees one (``jax.random.wrap_key_data``; the
    importer maps the typed key back, ``frontends/jax_random.py``)."""
    from minixla.random.keys import PRNGKeyArray
    is_key = lambda x: isinstance(x, PRNGKeyArray)  # noqa: E731

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        import jax

        def rewrap(x):
            if is_key(x) and isinstance(x._base, jax.core.Tracer):
                return jax.random.wrap_key_data(x._base, impl=x._impl)
            return x
        def unwrap(x):  # (a typed key JAX returns: minixla's typed key of its data, as the importer's)
            if (isinstance(x, jax.core.Tracer) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
                    and str(jax.random.key_impl(x)) in ("threefry2x32", "rbg", "unsafe_rbg")):
                return PRNGKeyArray.tree_unflatten(str(jax.random.key_impl(x)), [jax.random.key_data(x)])
            return x
        args, kwargs = tree_util.tree_map(rewrap, (args, kwargs), is_leaf=is_key)
        return tree_util.tree_map(unwrap, fun(*args, **kwargs))
    return wrapped


try:  # (the flag's holder: reading it costs ~50 ns, ``jax.config.jax_enable_x64`` ~1 us)
    from jax._src.config import enable_x64 as _x64_flag

    def _x64_enabled() -> bool:
        return _x64_flag.value
except ImportError:  # pragma: no cover - another JAX layout
    import jax as _jax

    def _x64_enabled() -> bool:
        return bool(_jax.config.jax_enable_x64)


def _donated_leaves(args, donate_argnums) -> tuple:
    """Flat parameter numbers of the leaves of the positional arguments in ``donate_argnums``."""
    starts, n = [], 0
    for a in args:
        starts.append(n)
        n += len(tree_util.tree_leaves(a))
    donated = []
    for i in donate_argnums:
        if not -len(args) <= i < len(args):
            raise ValueError(f"donate_argnums={i} but the function was called with {len(args)} positional arguments")
        i %= len(args)
        donated.extend(range(starts[i], starts[i] + len(tree_util.tree_leaves(args[i]))))
    return tuple(donated)


def jit(fun=None, *, backend: str = "llvm", donate_argnums=(), static_argnums=(), static_argnames=(),
        frontend=None, in_shardings=None, out_shardings=None, mesh=None, spmd_partitioner=None):
    """Compile ``fun`` with minixla (``jax.jit``'s counterpart).

    Args:
      fun: a function of arrays (numpy arrays, Python scalars or pytrees of them) returning
        arrays or a pytree of arrays. It must be traceable: no Python control flow on values.
      backend: ``"llvm"`` (minixla's own code generator, default) or ``"jax"`` (hand the
        optimized HLO to XLA through ``jax.jit``; runs on CPU, GPU or TPU).
      donate_argnums: positional arguments (int or tuple) whose arrays the program may
        overwrite, as in ``jax.jit``: an output or temporary can then be computed in place of
        them, and an output may be returned in the donated array's memory. Do not use a donated
        argument after the call (the llvm backend writes into numpy arrays you donate; the
        jax backend ignores donation).
      static_argnums, static_argnames: positional indices / keyword names of arguments that
        are compile-time Python values (e.g. a shape, a flag), as in ``jax.jit``: they must be
        hashable, are passed to ``fun`` unchanged, and each new value compiles again. A
        ``Compiled`` from ``.lower(...).compile()`` is then called with the other arguments only.
      frontend: who traces ``fun`` into a jaxpr (XLA's front ends): ``"jax"`` -- ``jax.make_jaxpr``,
        for a function written with ``jax.numpy``/``jax.lax``/``jax.nn`` (``jax.grad``/``jax.vmap``
        inside too), whose jaxpr ``minixla.import_jaxpr`` imports; ``"minixla"`` -- minixla's tracer
        only; ``None`` (default) -- minixla's tracer, switching to ``"jax"`` (with a warning on the
        ``minixla.jit`` logger) when ``fun`` calls a JAX function on a traced value.
      in_shardings, out_shardings: how arguments and results are laid out over a mesh of
        devices, as ``jax.jit``'s: a ``jax.sharding.NamedSharding(mesh, PartitionSpec(...))``
        (or a bare ``PartitionSpec`` under ``jax.set_mesh(mesh)``) for every array, ``None``
        (unconstrained), or a tree prefix of the positional arguments tuple / of the output.
        Each becomes an ``HloSharding`` on the entry parameter / root (``sharding={devices=
        [2,1]0,1}`` in the HLO text). With ``backend="jax"`` the optimized HLO runs on the mesh's
        devices under ``jax.jit(in_shardings=..., out_shardings=...)`` (XLA's SPMD partitioner
        splits it) and returns ``jax.Array`` s carrying the output shardings; the ``llvm``
        backend runs one device and keeps the annotations in the HLO. Errors
        (``ShardingError``, a ValueError, naming the argument's pytree path and the mesh axis):
        a spec longer than the rank, an unknown mesh axis, a dimension its mesh axes do not
        divide, a mesh naming a device twice or an ``AbstractMesh`` to run on, a tree that does
        not match the arguments, keyword arguments with ``in_shardings``; at a call, a committed
        ``jax.Array`` laid out otherwise than its ``in_shardings`` (as ``jax.jit``).
      mesh, spmd_partitioner: with ``spmd_partitioner="minixla"``,
        ``fun`` is partitioned for ``mesh`` (a ``jax.sharding.Mesh`` or ``{axis: size}``) by
        minixla's own SPMD partitioner (``minixla.sharding.partition``): ``in_shardings`` are
        ``PartitionSpec``/``NamedSharding`` (one for all arguments, or one per positional
        argument), ``out_shardings`` likewise for the outputs (``None``: propagated). The
        per-device program runs on the mesh's virtual LLVM devices (``backend="llvm"``: one
        thread and arena each, in this process), under ``jax.shard_map`` on JAX's devices
        (``"jax"``) or in the HLO evaluator (``"evaluator"``) (``minixla.sharding.spmd_jit``);
        ``.lower(*args).as_text()`` is its HLO.
    Returns:
      A ``Jitted`` callable returning numpy arrays (``jax.Array`` s for a sharded ``jax``-backend
      program), a weakly typed one (``minixla.core.avals.WeakArray``) wherever ``jax.jit``'s
      result has ``weak_type=True``; ``.lower(*args)`` gives the staged API. In a
      class body it is a method, as with ``jax.jit``: ``@functools.partial(jit, static_argnums=0)``
      makes ``self`` static. ``jit.optimization_pipeline()`` is the pass pipeline ``compile()`` runs.
    Raises:
      ShapeError, DTypeError, TracerBoolConversionError, JaxFunctionError (while tracing; each
      names the op, its operands and the line), UnsupportedError (complex dtypes, among others;
      ``UnsupportedJaxPrimitiveError`` for a JAX primitive the JAX front end cannot import).
    """
    if fun is None:
        return functools.partial(jit, backend=backend, donate_argnums=donate_argnums,
                                 static_argnums=static_argnums, static_argnames=static_argnames,
                                 frontend=frontend, in_shardings=in_shardings,
                                 out_shardings=out_shardings, mesh=mesh, spmd_partitioner=spmd_partitioner)
    if spmd_partitioner == "minixla":
        from minixla.sharding.spmd_jit import SpmdJitted
        if static_argnums or static_argnames or donate_argnums:
            raise errors.UnsupportedError(
                "jit(spmd_partitioner='minixla') takes no static_argnums, static_argnames or "
                "donate_argnums yet: close over static values (functools.partial)")
        if mesh is None:
            from minixla.sharding import ShardingError
            raise ShardingError("jit(spmd_partitioner='minixla') needs mesh= (a jax.sharding.Mesh "
                                "or an {axis: size} dict)")
        return SpmdJitted(fun, mesh, in_shardings, out_shardings, backend=backend)
    if spmd_partitioner is not None:
        raise errors.UnsupportedError(
            f"jit: spmd_partitioner must be None (XLA's, on backend='jax') or 'minixla', "
            f"got {spmd_partitioner!r}")
    return Jitted(fun, backend, donate_argnums, static_argnums, static_argnames, frontend,
                  in_shardings, out_shardings)


# The README's ``minixla.jit.optimization_pipeline()``: ``minixla.jit`` is this function (it
# shadows the module of the same name), so the pass list is reachable from it too.
jit.optimization_pipeline = optimization_pipeline
