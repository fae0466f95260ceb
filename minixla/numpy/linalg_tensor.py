"""``jnp.linalg``'s compositions of its other functions: ``multi_dot`` (a chain of matmuls in
the cheapest order), ``cond`` (the condition number), ``tensorinv`` and ``tensorsolve`` (``inv``
and ``solve`` of the array flattened to a matrix). Mirrors those of ``jax/_src/numpy/linalg.py``
(their checks and messages); ``minixla.numpy.linalg`` re-exports them.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from minixla.core.avals import get_aval
from minixla.numpy import elementwise as _ew
from minixla.numpy import manipulation as _mn
from minixla.numpy import promotion as _p
from minixla.numpy import reductions as _r

__all__ = ["multi_dot", "cond", "tensorinv", "tensorsolve"]


def _shape(x):
    return tuple(get_aval(x).shape)


def multi_dot(arrays, *, precision=None):
    """The product ``arrays[0] @ arrays[1] @ ...`` (``jnp.linalg.multi_dot``), multiplied in the
    order ``opt_einsum`` finds cheapest (JAX's ``einsum(optimize='auto')``); the first and last
    array may be 1-d. The promoted dtype; the result's rank is that of the chain. Raises
    ``ValueError`` for fewer than two arrays, a middle array that is not 2-d, or inner sizes
    that differ (JAX's messages)."""
    import opt_einsum

    from minixla.numpy import linalg as _la
    arrs = [_p._arr(a) for a in arrays]
    if len(arrs) < 2:
        raise ValueError(f"multi_dot requires at least two arrays; got len(arrays)={len(arrs)}")
    shapes = [_shape(a) for a in arrs]
    if not (len(shapes[0]) in (1, 2) and len(shapes[-1]) in (1, 2) and all(len(s) == 2 for s in shapes[1:-1])):
        raise ValueError("multi_dot: input arrays must all be two-dimensional, except for the first and last "
                         f"array which may be 1 or 2 dimensional. Got array shapes {shapes}")
    if any(a[-1] != b[0] for a, b in zip(shapes[:-1], shapes[1:])):
        raise ValueError("multi_dot: last dimension of each array must match first dimension of following "
                         f"array. Got array shapes {shapes}")
    arrs = list(_p._promote_dtypes(*arrs))
    letters = opt_einsum.get_symbol
    specs = ["".join(letters(i + k) for k in range(2)) for i in range(len(arrs))]
    if len(shapes[0]) == 1:
        specs[0] = specs[0][1:]
    if len(shapes[-1]) == 1:
        specs[-1] = specs[-1][:1]
    out = "".join(c for c in (specs[0][:1] if len(shapes[0]) == 2 else "") + (specs[-1][-1:] if len(shapes[-1]) == 2 else ""))
    path, _ = opt_einsum.contract_path(",".join(specs) + "->" + out, *shapes, shapes=True, optimize="auto")
    terms = list(zip(arrs, specs))
    for pair in path:  # (each step contracts two adjacent factors of the chain: a matmul)
        (i, j) = sorted(pair)
        (a, sa), (b, sb) = terms[i], terms[j]
        if sa and sb and sa[-1] != sb[:1]:
            (a, sa), (b, sb) = (b, sb), (a, sa)
        prod = _la.matmul(a, b, precision=precision)
        spec = sa[:-1] + sb[1:]
        del terms[j], terms[i]
        terms.append((prod, spec))
    return terms[0][0]


def cond(x, p=None):
    """The condition number of each matrix of ``x`` (``jnp.linalg.cond``): for ``p`` None/2 the
    ratio of the largest to the smallest singular value (``-2``: its inverse), otherwise
    ``norm(x, p) * norm(inv(x), p)`` (square matrices); ``inf`` where that is NaN but ``x`` has
    no NaN (a singular matrix). Shape ``x.shape[:-2]``. ``ValueError`` for a rank below 2, an
    empty matrix or a non-square one where ``p`` needs it."""
    from minixla.numpy import linalg as _la
    x = _p._arr(x)
    shape = _shape(x)
    if len(shape) < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D; got arr.shape={shape!r}")
    if shape[-1] == 0 or shape[-2] == 0:
        raise ValueError(f"jnp.linalg.cond: input array must not be empty; got arr.shape={shape!r}")
    if p is None or p == 2:
        s = _la.svdvals(x)
        return _ew.true_divide(s[..., 0], s[..., -1])
    if p == -2:
        s = _la.svdvals(x)
        r = _ew.true_divide(s[..., -1], s[..., 0])
    else:
        if shape[-2] != shape[-1]:
            raise ValueError(f"jnp.linalg.cond: for p={p!r}, array must be square; got arr.shape={shape!r}")
        r = _ew.multiply(_la.norm(x, ord=p, axis=(-2, -1)), _la.norm(_la.inv(x), ord=p, axis=(-2, -1)))
    singular = _ew.logical_and(_ew.isnan(r), _ew.logical_not(_r.any(_ew.isnan(x), axis=(-2, -1))))
    return _ew.where(singular, np.inf, r)


def tensorinv(a, ind=2):
    """The inverse of ``a`` read as a matrix of its first ``ind`` dimensions by the rest
    (``jnp.linalg.tensorinv``): shape ``a.shape[ind:] + a.shape[:ind]``, so that
    ``tensordot(tensorinv(a), a, ind)`` is the identity. ``ValueError`` for ``ind <= 0`` or
    unequal products of the two groups of dimensions."""
    from minixla.numpy import linalg as _la
    a = _p._arr(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer; got ind={ind!r}")
    shape = _shape(a)
    rows, cols = shape[:ind], shape[ind:]
    if math.prod(rows) != math.prod(cols):
        raise ValueError("tensorinv is only possible when the product of the first `ind` dimensions equals "
                         f"that of the remaining dimensions. got arr.shape={shape!r} with ind={ind!r}.")
    flat = _mn.reshape(a, (math.prod(rows), math.prod(cols)))
    return _mn.reshape(_la.inv(flat), cols + rows)


def tensorsolve(a, b, axes=None):
    """The ``x`` with ``tensordot(a, x, x.ndim) == b`` (``jnp.linalg.tensorsolve``): ``axes``
    of ``a`` are first moved to the end; then ``a``'s leading ``b.ndim`` dimensions must be
    ``b``'s shape and the rest (``x``'s shape) must hold as many elements. ``ValueError``
    otherwise (JAX's messages)."""
    from minixla.numpy import linalg as _la
    a, b = _p._arr(a), _p._arr(b)
    if axes is not None:
        axes, n = tuple(axes), len(_shape(a))
        a = _mn.moveaxis(a, axes, tuple(range(n - len(axes), n)))  # (to the end, in their order)
    sa, sb = _shape(a), _shape(b)
    out_shape = sa[len(sb):]
    if sa[:len(sb)] != sb:
        raise ValueError("After moving axes to end, leading shape of a must match shape of b. got "
                         f"a.shape={sa}, b.shape={sb}")
    if math.prod(sb) != math.prod(out_shape):
        raise ValueError("Input arrays must have prod(a.shape[:b.ndim]) == prod(a.shape[b.ndim:]); got "
                         f"a.shape={sa}, b.ndim={len(sb)}.")
    flat = _mn.reshape(a, (math.prod(sb), math.prod(out_shape)))
    return _mn.reshape(_la.solve(flat, _mn.ravel(b)), out_shape)


from minixla.core import errors  # noqa: E402

errors.wrap_public_functions(globals())
