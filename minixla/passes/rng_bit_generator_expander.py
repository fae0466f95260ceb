"""RNG bit generator expander (XLA's ``xla/service/rng_bit_generator_expander.cc``).

Rule: each ``rng-bit-generator`` instruction is replaced by the integer HLO of its algorithm
(Philox4x32-10 for ``rng_default`` and ``rng_philox``, Threefry2x32-20 for ``rng_three_fry``):
the expansion in ``minixla.lax.rng`` is traced for the instruction's key and bits types and
inlined into its computation, and the instruction's result (``result_index``) is replaced by
the matching output; the other output is left for DCE. XLA:CPU runs this before code
generation (``RNG_DEFAULT`` is Philox there), so the LLVM backend needs no kernel of its own
and the expansion fuses like any elementwise code. The JAX hand-off does not run it: XLA
expands the instruction itself.
"""
from __future__ import annotations

import functools

import numpy as np

from minixla.passes.pipeline import HloPass

#: the opcodes this pass removes before the LLVM backend generates code
EXPANDED_OPCODES = frozenset({"rng-bit-generator"})


@functools.lru_cache(maxsize=64)
def _expansion(key_dims, key_dtype, bits_dims, bits_dtype, algorithm):
    from minixla.core.avals import ShapedArray
    from minixla.core.tracing import trace_to_jaxpr
    from minixla.lax import rng
    alg = {"rng_default": 0, "rng_three_fry": 1, "rng_philox": 2}[algorithm]
    return trace_to_jaxpr(lambda k: rng.expand_rng_bit_generator(k, shape=bits_dims, dtype=bits_dtype, algorithm=alg),
                          [ShapedArray(key_dims, key_dtype)])


class RngBitGeneratorExpander(HloPass):
    name = "rng-bit-generator-expander"

    def run(self, module) -> bool:
        from minixla.hlo.lowering import LoweringContext, inline_jaxpr
        changed = False
        for comp in module.computations:
            rngs = [i for i in comp.instructions if i.opcode == "rng-bit-generator"]
            if not rngs:
                continue
            mapping = {}
            for instr in rngs:
                key = instr.operands[0]
                closed = _expansion(tuple(key.shape.dims), np.dtype(key.shape.dtype),
                                    tuple(instr.attrs["bits_dims"]), np.dtype(instr.attrs["bits_type"]),
                                    instr.attrs["algorithm"])
                ctx = LoweringContext(module, comp)
                outs = inline_jaxpr(ctx, closed, [key], metadata=instr.metadata)
                mapping[instr] = outs[instr.attrs["result_index"]]
            comp.replace_uses(mapping)
            comp.instructions = [i for i in comp.instructions if i not in mapping]
            comp.sort_topologically()
            comp.remove_dead()
            changed = True
        return changed
