"""The transformations' rows of ``reduce_precision`` (``minixla.lax.bits``), JAX's: the
primitive counts as linear (``ad.deflinear``), so the tangent and the cotangent are rounded to
the same precision; ``vmap`` applies it elementwise."""
from __future__ import annotations

from minixla.interpreters.ad import Zero, jvp_rules, transpose_rules
from minixla.interpreters.batching import batching_rules
from minixla.lax.bits import reduce_precision_p


def _jvp(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    return reduce_precision_p.bind(x, **params), (t if isinstance(t, Zero) else reduce_precision_p.bind(t, **params))


def _transpose(ct, x, **params):
    return [ct if isinstance(ct, Zero) else reduce_precision_p.bind(ct, **params)]


jvp_rules[reduce_precision_p] = _jvp
transpose_rules[reduce_precision_p] = _transpose
batching_rules[reduce_precision_p] = lambda vals, dims, **params: (reduce_precision_p.bind(vals[0], **params), dims[0])
