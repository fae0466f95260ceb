"""The coverage table: every primitive against every stage's rules table.

``python -m minixla.coverage > docs/coverage.md`` writes it. A row per primitive of the
registry (``minixla.core.primitive.registry``): does it have a shape rule, an eager
implementation and an HLO lowering rule; which HLO opcodes the lowering emits
(``PRIMITIVE_OPCODES``); and does each of those opcodes have a row in the HLO evaluator
(``evaluate_rules``), the LLVM backend (an elemental ``emit_rules`` row or a kernel of its
own) and the JAX hand-off (``jax_rules``). ``tests/test_coverage.py`` fails if a cell is
"no", if a primitive has no opcode list, or if ``docs/coverage.md`` is stale.

Three more columns show the transformations' rows (``minixla.interpreters.rules``): JVP,
transpose (for linear primitives; "n/a" for the others) and batching; a "missing" cell is one
listed, with its reason, in ``rules.MISSING`` (``tests/test_transform_coverage.py``).
"""
from __future__ import annotations

import minixla.numpy  # noqa: F401 (registers every primitive)
import minixla.nn  # noqa: F401
from minixla.core.primitive import impl_rules, registry, shape_rules

#: the HLO opcodes each primitive's lowering rule may emit (besides constant/broadcast/reshape
#: of its operands, which every lowering may add).
PRIMITIVE_OPCODES = {
    "neg": ["negate"], "abs": ["abs"], "sign": ["sign"], "floor": ["floor"], "ceil": ["ceil"],
    "round": ["round-nearest-afz", "round-nearest-even"], "exp": ["exponential"],
    "exp2": ["multiply", "exponential"], "expm1": ["exponential-minus-one"], "log": ["log"],
    "log1p": ["log-plus-one"], "sqrt": ["sqrt"], "rsqrt": ["rsqrt"], "cbrt": ["cbrt"], "tanh": ["tanh"],
    "logistic": ["logistic"], "sin": ["sine"], "cos": ["cosine"], "tan": ["tan"], "erf": ["erf"],
    "asin": ["sqrt", "multiply", "subtract", "add", "atan2"],
    "acos": ["sqrt", "multiply", "subtract", "add", "atan2"], "atan": ["atan2"],
    "sinh": ["abs", "compare", "exponential-minus-one", "add", "divide", "multiply", "exponential",
             "subtract", "select"],
    "cosh": ["add", "exponential", "subtract"],
    "asinh": ["abs", "sign", "compare", "multiply", "add", "sqrt", "divide", "log-plus-one", "log", "select"],
    "acosh": ["compare", "subtract", "sqrt", "add", "multiply", "log-plus-one", "log", "select"],
    "atanh": ["abs", "compare", "log-plus-one", "negate", "subtract", "multiply", "select"],
    "erfc": ["erfc"], "atan2": ["atan2"], "pow": ["power"], "integer_pow": ["multiply", "divide"],
    "is_finite": ["is-finite"], "not": ["not"], "add": ["add"], "add_any": ["add"], "sub": ["subtract"], "mul": ["multiply"],
    "div": ["divide"], "rem": ["remainder"], "max": ["maximum"], "min": ["minimum"], "and": ["and"],
    "or": ["or"], "xor": ["xor"], "shift_left": ["shift-left"], "shift_right_logical": ["shift-right-logical"],
    "shift_right_arithmetic": ["shift-right-arithmetic"], "eq": ["compare"], "ne": ["compare"],
    "lt": ["compare"], "le": ["compare"], "gt": ["compare"], "ge": ["compare"],
    "select_n": ["select", "compare"], "clamp": ["clamp"], "convert_element_type": ["convert"],
    "bitcast_convert_type": ["bitcast-convert"],
    "broadcast_in_dim": ["broadcast", "reshape"], "reshape": ["reshape"], "transpose": ["transpose"],
    "squeeze": ["reshape"], "rev": ["reverse"], "pad": ["pad"], "concatenate": ["concatenate"],
    "slice": ["slice"], "dynamic_slice": ["dynamic-slice"], "dynamic_update_slice": ["dynamic-update-slice"],
    "iota": ["iota"], "gather": ["gather"], "scatter": ["scatter"], "scatter-add": ["scatter"],
    "scatter-mul": ["scatter"], "scatter-min": ["scatter"], "scatter-max": ["scatter"],
    "reduce_sum": ["reduce"], "reduce_prod": ["reduce"], "reduce_max": ["reduce"], "reduce_min": ["reduce"],
    "reduce_and": ["reduce"], "reduce_or": ["reduce"],
    "argmax": ["reduce", "compare", "or", "iota", "select"],
    "argmin": ["reduce", "compare", "or", "iota", "select"],
    "cumsum": ["reduce-window"], "cumprod": ["reduce-window"], "cummax": ["reduce-window"],
    "cummin": ["reduce-window"], "dot_general": ["dot"], "conv_general_dilated": ["convolution"],
    # no opcode of their own: stop_gradient lowers to its operand, and the call primitives
    # inline their sub-jaxpr (its equations' opcodes)
    "stop_gradient": [], "custom_jvp_call": [], "custom_vjp_call": [], "remat2": [], "jit": [],
    "reduce_window_sum": ["reduce-window"], "reduce_window_max": ["reduce-window"],
    "reduce_window_min": ["reduce-window"],
    # pooling's tangent (issue 14): its selection over the window's taps, inlined
    "select_and_gather_add": ["pad", "slice", "compare", "not", "or", "select"],
    # XLA's stateless bit generator (issue 14); the LLVM backend gets its expansion
    "rng_bit_generator": ["rng-bit-generator"],
    "fma": ["fma"], "erf_inv": ["negate", "log-plus-one", "multiply", "compare", "select", "subtract",
                                "sqrt", "fma", "abs", "convert"],
    "sort": ["sort"], "sharding_constraint": ["custom-call"],
    # issue 14: the barrier of its operands' tuple (the LLVM backend removes it after the passes)
    "optimization_barrier": ["tuple", "opt-barrier", "get-tuple-element"],
    # issue 14: XLA's ReducePrecision on the float's bits (minixla.lax.bits.expand_reduce_precision)
    "reduce_precision": ["bitcast-convert", "and", "shift-right-logical", "add", "compare", "or", "select"],
    # the special functions (issue 14): their expansions in lax ops (minixla.lax.special_expansions)
    "lgamma": ["abs", "add", "compare", "convert", "divide", "floor", "fma", "is-finite", "log",
               "log-plus-one", "multiply", "negate", "select", "sine", "subtract"],
    "digamma": ["abs", "add", "and", "compare", "convert", "cosine", "divide", "floor", "log-plus-one",
                "multiply", "negate", "select", "sine", "subtract"],
    "bessel_i0e": ["abs", "add", "compare", "convert", "divide", "fma", "multiply", "negate", "rsqrt",
                   "select", "subtract"],
    "bessel_i1e": ["abs", "add", "compare", "convert", "divide", "fma", "multiply", "negate", "rsqrt",
                   "select", "sign", "subtract"],
    "polygamma": ["abs", "add", "and", "compare", "convert", "cosine", "divide", "exponential", "floor",
                  "fma", "is-finite", "log", "log-plus-one", "multiply", "negate", "or", "power",
                  "remainder", "select", "sine", "subtract"],
    "zeta": ["abs", "add", "and", "compare", "convert", "divide", "floor", "fma", "multiply", "negate",
             "power", "remainder", "select", "subtract"],
    "igamma": ["abs", "add", "and", "compare", "convert", "divide", "exponential", "floor", "fma",
               "get-tuple-element", "is-finite", "log", "log-plus-one", "multiply", "negate", "not", "or",
               "reduce", "select", "sine", "subtract", "tuple", "while"],
    "igammac": ["abs", "add", "and", "compare", "convert", "divide", "exponential", "floor", "fma",
                "get-tuple-element", "is-finite", "log", "log-plus-one", "multiply", "negate", "not",
                "or", "reduce", "select", "sine", "subtract", "tuple", "while"],
    "igamma_grad_a": ["abs", "add", "and", "compare", "convert", "cosine", "divide", "exponential",
                      "floor", "fma", "get-tuple-element", "is-finite", "log", "log-plus-one", "multiply",
                      "negate", "not", "or", "reduce", "select", "sine", "subtract", "tuple", "while"],
    "random_gamma_grad": ["abs", "add", "and", "compare", "convert", "cosine", "divide", "floor", "fma",
                          "get-tuple-element", "is-finite", "log", "log-plus-one", "multiply", "negate",
                          "not", "or", "reduce", "select", "sine", "subtract", "tuple", "while"],
    "regularized_incomplete_beta": ["abs", "add", "and", "compare", "convert", "divide", "exponential",
                                    "floor", "fma", "get-tuple-element", "is-finite", "log",
                                    "log-plus-one", "multiply", "negate", "not", "or", "reduce",
                                    "remainder", "select", "sine", "subtract", "tuple", "while"],
    # minixla.random's gamma sampler (issue 14): threefry keys, normals, uniforms in two while loops
    "random_gamma": ["abs", "add", "and", "bitcast-convert", "compare", "concatenate", "divide", "fma",
                     "get-tuple-element", "iota", "log", "log-plus-one", "maximum", "multiply", "negate",
                     "or", "power", "reduce", "rsqrt", "select", "shift-left", "shift-right-logical", "slice", "sqrt",
                     "subtract", "tuple", "while", "xor"],
    "cond": ["conditional", "tuple", "get-tuple-element"], "while": ["while", "tuple", "get-tuple-element"],
    "scan": ["while", "tuple", "get-tuple-element", "dynamic-slice", "dynamic-update-slice", "compare",
             "add", "subtract"],
}


def _llvm_supports(opcode) -> bool:
    from minixla.backends.llvm.control_flow import CONTROL_OPCODES
    from minixla.backends.llvm.elemental import emit_rules
    from minixla.backends.llvm.executable import _NO_KERNEL
    from minixla.backends.llvm.kernels_extra import KERNELS
    from minixla.passes.optimization_barrier_expander import EXPANDED_OPCODES as BARRIERS
    from minixla.passes.rng_bit_generator_expander import EXPANDED_OPCODES  # (rewritten before codegen)
    return (opcode in emit_rules or opcode in KERNELS or opcode in CONTROL_OPCODES or opcode in _NO_KERNEL
            or opcode in EXPANDED_OPCODES or opcode in BARRIERS)


def rows():
    """One dict per primitive (sorted by name): the stage columns as booleans, and opcodes."""
    from minixla.backends.jax_xla import jax_rules
    from minixla.hlo.evaluator import evaluate_rules
    from minixla.hlo.lowering import lowering_rules
    out = []
    for name in sorted(registry):
        prim = registry[name]
        ops = PRIMITIVE_OPCODES.get(name)
        out.append(dict(
            primitive=name, opcodes=ops,
            shape_rule=prim in shape_rules, eager=prim in impl_rules, lowering=prim in lowering_rules,
            evaluator=ops is not None and all(o in evaluate_rules for o in ops),
            llvm=ops is not None and all(_llvm_supports(o) for o in ops),
            jax=ops is not None and all(o in jax_rules for o in ops)))
    return out


COLUMNS = [("shape_rule", "shape rule"), ("eager", "eager impl"), ("lowering", "HLO lowering"),
           ("evaluator", "HLO evaluator"), ("llvm", "LLVM backend"), ("jax", "JAX hand-off")]


TRANSFORM_COLUMNS = [("jvp", "JVP rule"), ("transpose", "transpose rule"), ("batching", "batching rule")]


def markdown() -> str:
    """The table as Markdown (what ``docs/coverage.md`` holds)."""
    from minixla.interpreters.rules import MISSING, transform_cells
    lines = ["# minixla coverage", "",
             "Generated by `python -m minixla.coverage > docs/coverage.md` from the primitive registry and",
             "each stage's rules table; `tests/test_coverage.py` fails when a cell is missing or this file",
             "is stale. The LLVM column counts an elemental `emit_rules` row or a kernel of its own",
             "(`reduce`, `dot`, `convolution`, `scatter`), or the loop or branch emitted in the generated",
             "code (`while`, `conditional`; `tuple`/`get-tuple-element` are views). The last three columns are the",
             "transformations' rules (`minixla.interpreters.rules`): a transpose rule is needed by linear",
             "primitives only (n/a otherwise); a **missing** cell is listed below with its reason.", "",
             "| primitive | HLO opcodes | " + " | ".join(t for _, t in COLUMNS + TRANSFORM_COLUMNS) + " |",
             "|---|---|" + "---|" * (len(COLUMNS) + len(TRANSFORM_COLUMNS))]
    for r in rows():
        ops = ", ".join(f"`{o}`" for o in r["opcodes"]) if r["opcodes"] else (
            "?" if r["opcodes"] is None else "(none)")
        cells = " | ".join("yes" if r[k] else "**no**" for k, _ in COLUMNS)
        t = transform_cells(r["primitive"])
        tcells = " | ".join(t[k] if t[k] != "missing" else "**missing**" for k, _ in TRANSFORM_COLUMNS)
        lines.append(f"| `{r['primitive']}` | {ops} | {cells} | {tcells} |")
    n = len(rows())
    complete = sum(all(r[k] for k, _ in COLUMNS) for r in rows())
    lines += ["", f"{complete} of {n} primitives are implemented in every stage.", "",
              "Missing transformation rules:", ""]
    for col, title in TRANSFORM_COLUMNS:
        for name, why in sorted(MISSING[col].items()):
            lines.append(f"- {title} of `{name}`: {why}")
    if not any(MISSING.values()):
        lines.append("- none")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
