"""The stages of a compile (``jax/_src/stages.py``): ``Lowered`` (a traced function's HLO before
any pass) and ``Compiled`` (the optimized module, its buffer assignment and the backend's
executable), and the pipeline ``Lowered.compile`` runs, XLA's ``RunHloPasses`` and
``RunBackend``::

    Lowered.compile()    optimization_pipeline()   DCE, CSE, folding, simplification, fusion, ...
                         backend_passes(backend)   the LLVM backend's layout passes
                         assign_buffers            live ranges, the arena (heap simulator)
                         _backend_compile          LLVM machine code, or XLA through JAX

``minixla.jit`` (``jit.py``) traces, caches and dispatches; this module turns one trace into an
executable. ``MINIXLA_VERIFY=1`` runs the HLO verifier after every pass that changes the module.
"""
from __future__ import annotations

import functools
import gc
import logging
import os
import time

import numpy as np
from jax import Array as _JaxArray
from jax import tree_util

from minixla import cache as persistent_cache
from minixla.core.avals import WeakArray, get_aval, weak_array
from minixla.dump import Dumper
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
logger = logging.getLogger("minixla.jit")


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
        if self.backend == "llvm":  # (XLA:CPU too: the barriers go once no pass moves code)
            from minixla.passes.optimization_barrier_expander import OptimizationBarrierExpander
            OptimizationBarrierExpander().run(module)
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


def _jax_keys_to_minixla(args, kwargs):
    """``(args, kwargs)`` with every JAX typed key (``jax.random.key``, a ``key<fry>`` jax.Array)
    replaced by the ``minixla.random.PRNGKeyArray`` of its data (``jax.random.key_data``),
    minixla's typed key: its pytree leaf is the ``uint32[..., 2]`` data, so it is traced,
    cached and passed like any array. Unchanged (the same objects) when there is none."""
    from minixla.random.keys import jax_keys_to_minixla
    return jax_keys_to_minixla((args, kwargs), "minixla.jit")
