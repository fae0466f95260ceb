"""One lookup for every rules table of a primitive, and what the transformations cover.

``rules(prim)`` gathers a primitive's rows from each stage's table (shape, eager, HLO
lowering, JVP, transpose, batching). ``LINEAR`` lists the primitives that are linear in (some
of) their float operands and so need a transpose rule; ``MISSING`` says, with a reason, which
rows the transformations still lack. ``tests/test_transform_coverage.py`` fails when a
primitive outside ``MISSING`` lacks a row, or when ``MISSING`` names a row that now exists.
``using_rule(table, prim, rule)`` swaps one row in for a ``with`` block (the course's exercises).
"""
from __future__ import annotations

import contextlib

from minixla.core.primitive import impl_rules, registry, shape_rules
from minixla.interpreters import (ad_rules, ad_scatter_rules, batching, custom_derivatives,  # noqa: F401
                                  jit_call, remat, sharding_rules, barrier_rules,
                                  precision_rules)  # (they register the rows)
from minixla.interpreters.ad import jvp_rules, transpose_rules
from minixla.interpreters.batching import batching_rules

#: primitives linear in their float operands (``mul``/``dot_general``/``conv`` in each one
#: separately, ``div`` in the dividend, ``pad`` in both operand and padding value; ``remat2``
#: in its tangent operands once differentiated; ``jit`` where its body is)
LINEAR = {"neg", "add", "add_any", "sub", "mul", "div", "convert_element_type", "broadcast_in_dim", "reshape",
          "transpose", "squeeze", "rev", "reduce_sum", "slice", "pad", "concatenate", "select_n",
          "dot_general", "conv_general_dilated", "cumsum", "dynamic_slice", "dynamic_update_slice",
          "gather", "scatter-add", "scatter", "scatter-mul", "remat2", "jit", "reduce_window_sum"}
LINEAR |= {"sort"}  # (issue 14) in the operands it carries along (not its keys)
LINEAR |= {"select_and_gather_add"}  # (issue 14) in its tangents (pooling's jvp)
LINEAR |= {"sharding_constraint"}  # (issue 17) the identity, laid out
LINEAR |= {"optimization_barrier"}  # (issue 14) the identity, kept opaque
LINEAR |= {"reduce_precision"}  # (issue 14) as JAX defines it (ad.deflinear)

#: primitives without operands: nothing to batch, no tangent to carry
NO_OPERANDS = {"iota"}

#: rows still missing, each with why (no silent gaps)
MISSING = {
    "jvp": {p: "JAX has no derivative rule for it either" for p in (
        "zeta", "igamma_grad_a", "random_gamma_grad")},
    "transpose": {},
    "batching": {},
}


#: batching rules that are JAX's but not a per-example loop (tested against ``jax.vmap`` instead)
NOT_PER_EXAMPLE = {"rng_bit_generator": "JAX's rule: the first key makes the whole batch's bits"}


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


_TABLES = {"jvp": jvp_rules, "transpose": transpose_rules, "batching": batching_rules}


@contextlib.contextmanager
def using_rule(table: str, prim, rule):
    """Within the ``with`` block, ``rule`` is ``prim``'s row of the ``table`` ("jvp", "transpose"
    or "batching"; ``rule=None``: no row, as for a primitive without one); the previous row (or
    its absence) is restored on exit, also after an error.

    The hook the course's exercises (tutorials 09 and 10) use to try a rule of their own on
    the real transformations. The tables are process-global: not for use from several threads.
    Raises ``KeyError`` for an unknown table name or primitive name.
    """
    rows = _TABLES[table]
    prim = registry[prim] if isinstance(prim, str) else prim
    missing = object()
    old = rows.get(prim, missing)
    rows[prim] = rule
    try:
        yield rule
    finally:
        if old is missing:
            del rows[prim]
        else:
            rows[prim] = old
