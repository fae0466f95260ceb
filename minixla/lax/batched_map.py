"""``lax.map(f, xs, batch_size=b)``: ``f`` vmapped over batches of ``b`` rows, the batches run
by a ``scan``, a remainder of ``len(xs) % b`` rows by one more ``vmap`` (``jax.lax.map``'s
``batch_size``: a trade between the loop's trip count and the memory of a batch)."""
from __future__ import annotations

import numpy as np
from jax import tree_util

from minixla.core import errors
from minixla.core.avals import get_aval


def map_in_batches(f, xs, batch_size, scan):
    """``jnp.stack([f(x) for x in xs])`` computed ``batch_size`` rows at a time.

    ``xs`` is a pytree of arrays with one leading extent ``n``; the result is the pytree ``f``
    returns with a leading ``n``. ``scan`` is ``lax.scan``. Raises ShapeError (a TypeError
    and ValueError, JAX's classes) for a negative or non-integer ``batch_size`` or leaves of
    different leading extents."""
    from minixla.interpreters.api import vmap
    from minixla.lax.structural import concatenate, reshape, slice_in_dim
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise errors.ShapeError(f"map: batch_size must be a positive int, got {batch_size!r}"
                                       f"\n  at: {errors.user_source_line()}")
    leaves, tree = tree_util.tree_flatten(xs)
    sizes = {get_aval(x).shape[0] if get_aval(x).ndim else None for x in leaves}
    if len(sizes) != 1 or None in sizes:
        raise errors.ShapeError(f"map: every leaf of xs needs the same leading extent, got "
                                       f"{sorted(map(str, sizes))}\n  at: {errors.user_source_line()}")
    n = sizes.pop()
    full, rest = divmod(n, int(batch_size))
    batch_size = int(batch_size)
    fv = vmap(f)
    head = [reshape(slice_in_dim(x, 0, full * batch_size), (full, batch_size) + get_aval(x).shape[1:])
            for x in leaves]
    _, ys = scan(lambda c, b: ((), fv(tree_util.tree_unflatten(tree, b))), (), head)
    ys = tree_util.tree_map(lambda y: reshape(y, (full * batch_size,) + get_aval(y).shape[2:]), ys)
    if rest:
        tail = fv(tree_util.tree_unflatten(tree, [slice_in_dim(x, full * batch_size, n) for x in leaves]))
        ys = tree_util.tree_map(lambda a, b: concatenate([a, b], 0), ys, tail)
    return ys
