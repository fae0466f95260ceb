"""The LLVM backend (XLA:CPU's counterpart): HLO -> LLVM IR -> host machine code via llvmlite.

Read in this order: ``ir_types`` (dtypes as LLVM types), ``loops`` (loops and indices),
``elemental`` (one element of any op), ``kernels`` (one function per fused kernel),
``target`` (optimize and JIT), ``executable`` (buffers and calls).
"""
from minixla.backends.llvm.elemental import emit_rules
from minixla.backends.llvm.executable import LlvmExecutable, compile_module

__all__ = ["LlvmExecutable", "compile_module", "emit_rules"]
