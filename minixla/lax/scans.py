"""Parallel prefix scans built from structural ops: ``associative_scan`` and ``cumlogsumexp``
(``jax.lax``'s names and signatures).

``associative_scan(fn, elems)`` is the classic odd/even recursion (the one ``jax.lax`` uses):
combine neighbouring pairs, scan the half-length result recursively, then combine the
scanned odd prefixes with the remaining even elements and interleave the two (a pad with
interior padding and an add). It is O(n) work in O(log n) levels of strided slices, so it
needs no new primitive and every transformation (jvp, transpose, vmap) and backend comes
for free. ``fn`` must be associative; it sees whole slices, so it must be elementwise over
the scanned axis.

``cumlogsumexp`` is ``associative_scan`` over ``logaddexp``, with JAX's ``logaddexp`` JVP
(``+inf`` replaced by 0 in the exponent, so infinite entries give finite tangents, not NaN). JAX lowers it to a reduce-window that XLA rewrites, so values agree with JAX's
to rounding (a few ulp), not bit for bit.
"""
from __future__ import annotations

import numpy as np
from jax import tree_util

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.lax import elementwise as _ew
from minixla.lax import structural as _st


def _interleave(even, odd, axis):
    """``even[0], odd[0], even[1], odd[1], ...`` along ``axis`` (``even`` may be one longer)."""
    ne, no = get_aval(even).shape[axis], get_aval(odd).shape[axis]
    nd = get_aval(even).ndim
    cfg_e = [(0, 0, 0)] * nd
    cfg_o = [(0, 0, 0)] * nd
    cfg_e[axis] = (0, 1 if ne == no else 0, 1)
    cfg_o[axis] = (1, 0 if ne == no else 1, 1)
    dt = get_aval(even).dtype
    zero = np.zeros((), dt)
    op = _ew.bitwise_or if dt == np.bool_ else _ew.add
    return op(_st.pad(even, zero, cfg_e), _st.pad(odd, zero, cfg_o))


def associative_scan(fn, elems, reverse=False, axis=0):
    """Inclusive scan of ``elems`` (an array or a pytree of arrays with one length along
    ``axis``) with the associative binary ``fn`` (``jax.lax.associative_scan``): element ``i``
    of the result is ``fn(... fn(elems[0], elems[1]) ..., elems[i])``; ``reverse`` scans from
    the end. Raises TypeError for a non-callable ``fn``, ValueError for mismatched lengths."""
    if not callable(fn):
        raise TypeError("lax.associative_scan: fn argument should be callable.")
    flat, tree = tree_util.tree_flatten(elems)
    if not flat:
        return elems
    nd = get_aval(flat[0]).ndim
    if not -nd <= axis < nd:
        raise errors.ShapeError(f"associative_scan: axis {axis} is out of range for rank {nd}")
    axis = axis % nd
    if any(get_aval(e).shape[axis] != get_aval(flat[0]).shape[axis] for e in flat):
        raise ValueError("Array inputs to associative_scan must have the same first dimension. (saw: "
                         f"{[get_aval(e).shape for e in flat]})")
    if reverse:
        flat = [_st.rev(e, (axis,)) for e in flat]

    def combine(a, b):
        out = fn(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        return tree_util.tree_leaves(out)

    def sl(e, start, stop=None, stride=1):
        return _st.slice_in_dim(e, start, stop, stride=stride, axis=axis)

    def scan(xs):
        n = get_aval(xs[0]).shape[axis]
        if n < 2:
            return xs
        odd = scan(combine([sl(e, 0, -1, 2) for e in xs], [sl(e, 1, None, 2) for e in xs]))
        if n % 2 == 0:
            even = combine([sl(o, 0, -1) for o in odd], [sl(e, 2, None, 2) for e in xs])
        else:
            even = combine(odd, [sl(e, 2, None, 2) for e in xs])
        even = [_st.concatenate([sl(e, 0, 1), r], axis) for e, r in zip(xs, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    out = scan(flat)
    if reverse:
        out = [_st.rev(e, (axis,)) for e in out]
    return tree_util.tree_unflatten(tree, out)


def _logaddexp_impl(x1, x2):
    amax = _ew.max(x1, x2)
    delta = _ew.sub(x1, x2)
    return _ew.select(_ew.ne(delta, delta), _ew.add(x1, x2),
                      _ew.add(amax, _ew.log1p(_ew.exp(_ew.neg(_ew.abs(delta))))))


_logaddexp = None


def _make_logaddexp():
    # (custom_jvp lives with the transformations, which import lax: bind it on first use)
    from minixla.interpreters.custom_derivatives import custom_jvp

    f = custom_jvp(_logaddexp_impl)

    def no_inf(x):  # +inf -> 0 (JAX's rule; -inf stays, so its term's tangent is exactly 0)
        return _ew.select(_ew.eq(x, np.asarray(np.inf, get_aval(x).dtype)),
                          _st.full(get_aval(x).shape, 0, get_aval(x).dtype), x)

    @f.defjvp
    def _jvp(primals, tangents):
        x1, x2 = primals
        t1, t2 = tangents
        out = f(x1, x2)
        return out, _ew.add(_ew.mul(t1, _ew.exp(_ew.sub(no_inf(x1), no_inf(out)))),
                            _ew.mul(t2, _ew.exp(_ew.sub(no_inf(x2), no_inf(out)))))
    return f


def cumlogsumexp(operand, axis=0, reverse=False):
    """Inclusive cumulative ``log(sum(exp(operand)))`` along ``axis`` without overflow
    (``jax.lax.cumlogsumexp``); ``reverse`` scans from the end. Floating dtypes only
    (DTypeError otherwise)."""
    global _logaddexp
    dt = get_aval(operand).dtype
    if dt.kind != "f" and dt.name != "bfloat16":
        raise errors.DTypeError(f"cumlogsumexp does not accept dtype {dt.name}")
    if _logaddexp is None:
        _logaddexp = _make_logaddexp()
    nd = get_aval(operand).ndim
    return associative_scan(_logaddexp, operand, reverse=bool(reverse), axis=int(axis) % nd if nd else 0)


__all__ = ["associative_scan", "cumlogsumexp"]
