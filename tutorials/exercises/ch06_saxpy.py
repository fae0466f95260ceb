"""Tutorial 06's exercise: emit a loop kernel with llvmlite, ``y[i] = a * x[i] + y[i]`` (saxpy).

Write ``emit_saxpy(module: llvmlite.ir.Module) -> llvmlite.ir.Function``: add to ``module`` a
function named ``saxpy`` with the C signature
``void saxpy(float a, const float *x, float *y, int64_t n)`` that, for ``i`` in ``0 .. n-1``,
stores ``a * x[i] + y[i]`` into ``y[i]`` (one ``fmul`` then one ``fadd``: no fused multiply-add,
so the result is the one NumPy's ``a * x + y`` gives in float32). Return the function.

What you need:

- ``ir.FunctionType(ir.VoidType(), [ir.FloatType(), ir.PointerType(), ir.PointerType(),
  ir.IntType(64)])`` (llvmlite >= 0.45 has opaque pointers: ``ir.PointerType()``);
  ``ir.Function(module, fnty, name="saxpy")``; ``fn.args``;
- an ``ir.IRBuilder`` positioned at the end of an entry block (``fn.append_basic_block()``);
- ``minixla.backends.llvm.loops.for_loop(builder, 0, n)``: a context manager yielding the
  induction variable (an ``i64``), with the builder inside the loop body;
- ``builder.gep(ptr, [i], inbounds=True, source_etype=ir.FloatType())``, ``builder.load(ptr,
  typ=ir.FloatType())``, ``builder.fmul``, ``builder.fadd``, ``builder.store(value, ptr)``, and
  ``builder.ret_void()`` after the loop.

Marking ``x`` and ``y`` ``noalias`` (``fn.args[1].add_attribute("noalias")``) tells LLVM the
arrays do not overlap, so ``-O3`` can vectorize the loop without a run-time overlap check.

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch06_saxpy.py``.
"""
from llvmlite import ir  # noqa: F401 (for your code)

from minixla.backends.llvm.loops import for_loop  # noqa: F401 (for your code)


def emit_saxpy(module):
    raise NotImplementedError("tutorial 06 exercise: write emit_saxpy")
