"""One lookup for every rules table of a primitive, and what the transformations cover.

``rules(prim)`` gathers a primitive's rows from each stage's table (shape, eager, HLO
lowering, JVP, transpose, batching). ``LINEAR`` lists the primitives that are linear in (some
of) their float operands and so need a transpose rule; ``MISSING`` says, with a reason, which
rows the transformations still lack. ``tests/test_transform_coverage.py`` fails when a
primitive outside ``MISSING`` lacks a row, or when ``MISSING`` names a row that now exists.
"""
from __future__ import annotations

from minixla.core.primitive import impl_rules, registry, shape_rules
from minixla.interpreters import ad_rules, batching  # noqa: F401 (register the rows)
from minixla.interpreters.ad import jvp_rules, transpose_rules
from minixla.interpreters.batching import batching_rules

#: primitives linear in their float operands (``mul``/``dot_general``/``conv`` in each one
#: separately, ``div`` in the dividend, ``pad`` in both operand and padding value)
LINEAR = {"neg", "add", "sub", "mul", "div", "convert_element_type", "broadcast_in_dim", "reshape",
          "transpose", "squeeze", "rev", "reduce_sum", "slice", "pad", "concatenate", "select_n",
          "dot_general", "conv_general_dilated", "cumsum", "dynamic_slice", "dynamic_update_slice",
          "gather", "scatter-add", "scatter", "scatter-mul"}

#: primitives without operands: nothing to batch, no tangent to carry
NO_OPERANDS = {"iota"}

#: rows still missing, each with why (no silent gaps)
MISSING = {
    "jvp": {
        "scatter": "overwriting scatter: needs JAX's unique-index trick (scatter of ids) to know which updates win",
        "scatter-mul": "needs the product of the colliding updates (JAX's rule); not done yet",
        "scatter-min": "needs the tie handling of colliding updates; not done yet",
        "scatter-max": "needs the tie handling of colliding updates; not done yet",
    },
    "transpose": {
        "scatter": "follows its JVP rule (missing)",
        "scatter-mul": "follows its JVP rule (missing)",
    },
    "batching": {},
}


#: primitives with a JVP but no reverse mode, as in JAX (their transpose rule raises JAX's error)
FORWARD_ONLY = {"while": "the trip count is unknown: use scan or a fori_loop with static bounds"}


def rules(prim) -> dict:
    """``{table name: rule or None}`` for ``prim`` (a ``Primitive`` or its name) across every stage."""
    from minixla.hlo.lowering import lowering_rules
    prim = registry[prim] if isinstance(prim, str) else prim
    return {"shape": shape_rules.get(prim), "impl": impl_rules.get(prim), "lowering": lowering_rules.get(prim),
            "jvp": jvp_rules.get(prim), "transpose": transpose_rules.get(prim),
            "batching": batching_rules.get(prim)}


def transform_cells(name) -> dict:
    """``{"jvp"|"transpose"|"batching": "yes" | "n/a" | "missing"}`` for the coverage table."""
    r = rules(name)
    cells = {}
    for col in ("jvp", "transpose", "batching"):
        needed = not ((col == "transpose" and name not in LINEAR)
                      or (col == "batching" and name in NO_OPERANDS))
        cells[col] = "yes" if r[col] is not None else ("missing" if needed else "n/a")
    return cells
