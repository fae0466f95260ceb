"""``minixla.jit`` and its stages (``jax/_src/pjit.py``, ``jax/_src/stages.py``).

The one place that wires the pipeline together::

    jit(f).lower(*args)      trace -> jaxpr -> HLO            Lowered.as_text(): HLO before passes
          .compile()         passes -> buffers -> backend     Compiled.as_text(): optimized HLO
    jit(f)(*args)            the same, cached on the arguments' pytree structure and avals

The cache key is the input pytree structure plus each leaf's (shape, dtype, weak_type), as
JAX keys its own cache; a new shape or dtype traces and compiles again.
"""
from __future__ import annotations

import copy
import functools
import time

import numpy as np
from jax import tree_util

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.tracing import Tracer, flatten_fun, trace_to_jaxpr
from minixla.hlo.lowering import lower_jaxpr
from minixla.passes.buffer_assignment import assign_buffers
from minixla.passes.dce import DeadCodeElimination
from minixla.passes.fusion import FusionPass, count_kernels, NOT_KERNELS
from minixla.passes.pipeline import PassPipeline

BACKENDS = ("llvm", "jax")


def _backend_compile(backend, module, assignment):
    if backend == "llvm":
        from minixla.backends.llvm import compile_module
    elif backend == "jax":
        from minixla.backends.jax_xla import compile_module
    else:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    return compile_module(module, assignment)


def optimization_pipeline() -> PassPipeline:
    """The passes ``compile()`` runs, in order."""
    return PassPipeline("optimize", [DeadCodeElimination(), FusionPass(), DeadCodeElimination()])


class Lowered:
    """A traced and lowered function (``jax.stages.Lowered``): the HLO before any pass."""

    def __init__(self, closed_jaxpr, module, in_tree, out_tree, in_avals, backend):
        self.jaxpr = closed_jaxpr
        self.hlo_module = module
        self.in_tree, self.out_tree, self.in_avals = in_tree, out_tree, in_avals
        self.backend = backend
        self.trace_ms = 0.0

    def as_text(self) -> str:
        """HLO text as lowered from the jaxpr, before optimization."""
        return self.hlo_module.to_string()

    def compile(self) -> "Compiled":
        """Run the pass pipeline, assign buffers and generate code for the backend."""
        t0 = time.perf_counter()
        module = copy.deepcopy(self.hlo_module)
        kernels_unfused = count_kernels(module)
        pipeline = optimization_pipeline()
        pipeline.run(module)
        fusion = next(p for p in pipeline.passes if isinstance(p, FusionPass))
        assignment = assign_buffers(module)
        passes_ms = (time.perf_counter() - t0) * 1e3
        executable = _backend_compile(self.backend, module, assignment)
        compile_ms = (time.perf_counter() - t0) * 1e3
        return Compiled(self, module, assignment, executable, pipeline.log, fusion.log,
                        kernels_unfused, passes_ms, compile_ms)


class Compiled:
    """A compiled function (``jax.stages.Compiled``). Call it like the original function.

    Attributes:
      hlo_module: the optimized HloModule. buffer_assignment: its BufferAssignment.
      pass_log: list of PassLogEntry (pass name, changed, ms). fusion_log: FusionDecision list.
      kernels_unfused: kernel count before fusion. compile_ms: passes + codegen, in ms.
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

    def as_text(self) -> str:
        """HLO text after the optimization passes (fusions included)."""
        return self.hlo_module.to_string()

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
            got = get_aval(x)
            if got.shape != aval.shape or got.dtype != aval.dtype:
                raise TypeError(f"argument {i}: compiled for {aval.str_short()}, called with {got.str_short()}")
            arrays.append(np.asarray(x, dtype=aval.dtype, order="C"))
        return arrays

    def call_flat(self, flat):
        return self.executable(*self._check_args(flat))

    def __call__(self, *args, **kwargs):
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        if in_tree != self.lowered.in_tree:
            raise TypeError(f"compiled for argument structure {self.lowered.in_tree}, got {in_tree}")
        outs = self.call_flat(flat)
        return tree_util.tree_unflatten(self.lowered.out_tree, outs)


class Jitted:
    """The object ``minixla.jit(f)`` returns: callable, with ``.lower(*args)`` like ``jax.jit``."""

    def __init__(self, fun, backend: str = "llvm"):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
        self.fun = fun
        self.backend = backend
        self._cache: dict = {}
        functools.update_wrapper(self, fun)

    def lower(self, *args, **kwargs) -> Lowered:
        """Trace with the avals of ``args`` and lower to HLO (no optimization yet)."""
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        in_avals = [get_aval(x) for x in flat]
        flat_fun, out_store = flatten_fun(self.fun, in_tree)
        t0 = time.perf_counter()
        closed = trace_to_jaxpr(flat_fun, in_avals)
        name = f"jit_{getattr(self.fun, '__name__', 'fn')}".replace("<", "").replace(">", "")
        module = lower_jaxpr(closed, name=name)
        lowered = Lowered(closed, module, in_tree, out_store[0], in_avals, self.backend)
        lowered.trace_ms = (time.perf_counter() - t0) * 1e3
        return lowered

    def __call__(self, *args, **kwargs):
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        if any(isinstance(x, Tracer) for x in flat):
            return self.fun(*args, **kwargs)  # jit inside a traced function: inline it
        key = (in_tree, tuple(get_aval(x) for x in flat))
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._cache[key] = self.lower(*args, **kwargs).compile()
        return tree_util.tree_unflatten(compiled.lowered.out_tree, compiled.call_flat(flat))


def jit(fun=None, *, backend: str = "llvm"):
    """Compile ``fun`` with minixla (``jax.jit``'s counterpart).

    Args:
      fun: a function of arrays (numpy arrays, Python scalars or pytrees of them) returning
        arrays or a pytree of arrays. It must be traceable: no Python control flow on values.
      backend: ``"llvm"`` (minixla's own code generator, default) or ``"jax"`` (hand the
        optimized HLO to XLA through ``jax.jit``; runs on CPU, GPU or TPU).
    Returns:
      A ``Jitted`` callable returning numpy arrays; ``.lower(*args)`` gives the staged API.
    Raises:
      ShapeError, DTypeError, TracerBoolConversionError (while tracing), UnsupportedError.
    """
    if fun is None:
        return functools.partial(jit, backend=backend)
    return Jitted(fun, backend)
