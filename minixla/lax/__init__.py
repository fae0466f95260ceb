"""``minixla.lax``: the primitives, with ``jax.lax``'s names, signatures and shape/dtype rules.

Each primitive is defined once, in the module of its family: a ``Primitive`` object, a shape
rule (avals in, aval out) registered in ``core.shape_rules``, an eager implementation in
``core.impl_rules`` (the reference, ``jax.lax`` itself, run op by op) and the user-facing
wrapper function that binds it. Lowering to HLO, evaluation, LLVM code generation and the JAX
hand-off keep their own tables.

Like ``jax.lax`` (and unlike ``minixla.numpy``) these functions do not promote dtypes or
broadcast, except that a rank-0 operand may be combined with an array of any shape.

The families, each building on the ones before it:

- ``base``: ``_std_prim`` and the checks every family shares
- ``elementwise``: unary and binary ops, comparisons, ``select_n``, ``clamp``, conversions
- ``structural``: broadcast, reshape, transpose, slice, iota, squeeze, rev, pad, concatenate, ``full``
- ``reductions``: ``reduce_*``, ``argmax``/``argmin``, ``cumsum`` & co.
- ``contractions``: ``dot_general``, ``conv_general_dilated``
- ``indexing``: ``dynamic_slice``, ``gather``/``scatter``, ``GatherScatterMode``
- ``windows``: ``reduce_window`` (sum / max / min over sliding windows: pooling)
- ``special``: ``erf_inv``, ``fma``, ``nextafter`` (what ``minixla.random`` needs) and JAX's
  gamma/zeta/Bessel/incomplete-beta family (``lgamma``, ``digamma``, ``igamma``, ``betainc``, ...),
  lowered to their expansions in lax ops (``special_expansions``)
- ``sorting``: ``sort`` (multi-operand, stable, ``num_keys``), ``sort_key_val``, ``top_k``
- ``control_flow``: ``cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``map`` (sub-jaxprs)
- ``composites``: what ``jax.lax`` builds from other primitives: ``associative_scan``,
  ``conv_transpose``, ``reduce`` (standard monoids), ``square``, ``batch_matmul``, ...
- ``scans``: ``cumlogsumexp``, an ``associative_scan`` of ``logaddexp`` with JAX's derivative
- ``bits``: ``population_count``, ``clz`` (composites of shifts and masks)
- ``sharding``: ``with_sharding_constraint`` (a layout over the mesh; the value is unchanged)
- ``barrier``: ``optimization_barrier`` (the identity no pass optimizes across)
- ``structural_more``: ``split``, ``stack``, ``unstack``, ``tile``, ``index_take``, ``empty``,
  ``dtype``, ``broadcast_shapes`` (composites of the structural ops)
- ``implicit``: ``custom_linear_solve``, ``custom_root`` (solves differentiated implicitly)

This module is the public face: it re-exports every family's names.
"""
from minixla.core import errors
from minixla.lax import base, elementwise, structural  # noqa: I001 (in layer order)
from minixla.lax import reductions, contractions, indexing
from minixla.lax import windows, special, sorting, control_flow, composites, scans, sharding
from minixla.lax import bits
from minixla.lax import special_expansions  # noqa: F401 (what the special functions lower to)
from minixla.lax import windows_select  # noqa: F401 (pooling's tangent: select_and_gather_add)
from minixla.lax import rng  # noqa: F401 (rng_bit_generator)
from minixla.lax.base import *  # noqa: F401,F403
from minixla.lax.elementwise import *  # noqa: F401,F403
from minixla.lax.elementwise import _convert_weak  # noqa: F401 (minixla.numpy's promotion)
from minixla.lax.structural import *  # noqa: F401,F403
from minixla.lax.reductions import *  # noqa: F401,F403
from minixla.lax.contractions import *  # noqa: F401,F403
from minixla.lax.indexing import *  # noqa: F401,F403
from minixla.lax.windows import *  # noqa: F401,F403
from minixla.lax.windows_select import *  # noqa: F401,F403
from minixla.lax.rng import *  # noqa: F401,F403
from minixla.lax.special import *  # noqa: F401,F403
from minixla.lax.sorting import *  # noqa: F401,F403
from minixla.lax.control_flow import *  # noqa: F401,F403
from minixla.lax.composites import *  # noqa: F401,F403
from minixla.lax.control_flow import cond_p, while_p, scan_p  # noqa: F401
from minixla.lax.scans import *  # noqa: F401,F403
from minixla.lax.bits import *  # noqa: F401,F403
from minixla.lax.sharding import with_sharding_constraint, sharding_constraint_p  # noqa: F401
from minixla.lax import barrier  # noqa: E402 (optimization_barrier)
from minixla.lax.barrier import *  # noqa: F401,F403
from minixla.lax import structural_more  # noqa: E402 (split, stack, tile, ...)
from minixla.lax.structural_more import *  # noqa: F401,F403
from minixla.lax import implicit  # noqa: E402 (custom_linear_solve, custom_root)
from minixla.lax.implicit import *  # noqa: F401,F403

# Every public function is an API boundary: an error escaping it names the function, the
# shapes it was given and the user's line (``errors.api_boundary``). Keep this at the end.
errors.wrap_package_functions(globals(), [base, elementwise, structural, reductions, contractions,
                                          indexing, windows, special, sorting, control_flow,
                                          composites, scans, sharding, rng, bits, barrier,
                                          structural_more, implicit])
