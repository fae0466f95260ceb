"""Contractions: ``matmul``, ``dot``, ``vdot``, ``inner``, ``outer``, ``tensordot``, ``einsum``,
all as ``lax.dot_general``.
"""
from __future__ import annotations

import builtins

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.numpy.promotion import (
    _arr, _canon_axis1, _cast, _promote_dtypes, _where_line, broadcast_shapes, broadcast_to)
from minixla.numpy.creation import zeros, zeros_like
from minixla.numpy.manipulation import ravel, reshape, transpose
from minixla.numpy.elementwise import multiply, where
from minixla.numpy.reductions import sum  # noqa: A004 (einsum sums with minixla.numpy.sum)


# ---------------------------------------------------------------------------------------
# Contractions.

def matmul(a, b):
    """``a @ b`` with NumPy's rules: batch dims broadcast, 1-d operands promoted (``jnp.matmul``)."""
    a, b = _arr(a), _arr(b)
    la, lb = get_aval(a), get_aval(b)
    if ({la.dtype, lb.dtype} in ({np.dtype(np.bool_), np.dtype(np.float32)}, {np.dtype(np.bool_), np.dtype(np.float64)})
            and la.shape == lb.shape == (1,)):
        return _vdot_bool_of_one(a, b)
    a, b = _promote_dtypes(a, b)
    la, lb = get_aval(a), get_aval(b)
    if la.ndim == 0 or lb.ndim == 0:
        raise errors.ShapeError(f"matmul: operands must not be scalars, got shapes {la.shape} and {lb.shape}"
                                f"{_where_line()}")
    if la.dtype == np.bool_:
        a, b = _cast(a, np.int32), _cast(b, np.int32)
        return _cast(matmul(a, b), np.bool_)
    a2 = reshape(a, (1,) + la.shape) if la.ndim == 1 else a
    b2 = reshape(b, lb.shape + (1,)) if lb.ndim == 1 else b
    sa, sb = get_aval(a2).shape, get_aval(b2).shape
    if sa[-1] != sb[-2]:
        raise errors.ShapeError(f"matmul: contracting dims differ: {la.shape} @ {lb.shape} "
                                f"({sa[-1]} != {sb[-2]}){_where_line()}")
    try:
        batch = broadcast_shapes(sa[:-2], sb[:-2])
    except errors.ShapeError as e:
        raise errors.ShapeError(f"matmul: {e.args[0]}{_where_line()}") from None
    a2 = broadcast_to(a2, batch + sa[-2:])
    b2 = broadcast_to(b2, batch + sb[-2:])
    nb = len(batch)
    out = lax.dot_general(a2, b2, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))
    out_shape = batch + ((sa[-2],) if la.ndim > 1 else ()) + ((sb[-1],) if lb.ndim > 1 else ())
    return reshape(out, out_shape)


def _vdot_bool_of_one(a, b):
    """``a @ b`` of a bool and a number, both of shape (1,), as JAX eager computes it:
    ``jnp.matmul`` hands XLA the bool operand itself, XLA turns the one-term dot into
    ``x * convert(p)`` and that into ``select(p, x, 0)``: +0.0 where ``x * 0.0`` may be -0.0,
    and 0 for ``inf * False``. (With a broadcast in between, or f16/bf16 computed in f32, XLA
    keeps the multiply.)"""
    p, x = (a, b) if get_aval(a).dtype == np.bool_ else (b, a)
    x = _promote_dtypes(x, p)[0]
    return where(reshape(p, ()), reshape(x, ()), zeros((), get_aval(x).dtype))


def dot(a, b):
    """``jnp.dot``: a product for scalars, matmul for rank <= 2, and for rank > 2 the sum over
    the last axis of ``a`` and the second-to-last of ``b``."""
    a, b = _arr(a), _arr(b)
    la, lb = get_aval(a), get_aval(b)
    if la.ndim == 0 or lb.ndim == 0:
        return multiply(a, b)
    if la.ndim <= 2 and lb.ndim <= 2:
        return matmul(a, b)
    return tensordot(a, b, ((la.ndim - 1,), (builtins.max(lb.ndim - 2, 0),)))


def vdot(a, b):
    """Dot product of the flattened arrays (``jnp.vdot``)."""
    return dot(ravel(_arr(a)), ravel(_arr(b)))


def inner(a, b):
    a, b = _arr(a), _arr(b)
    la, lb = get_aval(a), get_aval(b)
    if la.ndim == 0 or lb.ndim == 0:
        return multiply(a, b)
    return tensordot(a, b, ((la.ndim - 1,), (lb.ndim - 1,)))


def outer(a, b):
    """``a[:, None] * b[None, :]`` of the flattened arrays (``jnp.outer``)."""
    a, b = ravel(_arr(a)), ravel(_arr(b))
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def tensordot(a, b, axes=2):
    """Sum over ``axes`` of ``a`` and ``b`` (``jnp.tensordot``), one ``dot_general``."""
    a, b = _promote_dtypes(_arr(a), _arr(b))
    la, lb = get_aval(a), get_aval(b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n > builtins.min(la.ndim, lb.ndim) or n < 0:
            raise errors.ShapeError(f"tensordot: axes={n} is too large for shapes {la.shape}, {lb.shape}"
                                    f"{_where_line()}")
        ca, cb = tuple(range(la.ndim - n, la.ndim)), tuple(range(n))
    else:
        ca, cb = axes
        ca = (ca,) if isinstance(ca, int) else tuple(ca)
        cb = (cb,) if isinstance(cb, int) else tuple(cb)
        ca = tuple(_canon_axis1(x, la.ndim) for x in ca)
        cb = tuple(_canon_axis1(x, lb.ndim) for x in cb)
    if len(ca) != len(cb) or builtins.any(la.shape[i] != lb.shape[j] for i, j in zip(ca, cb)):
        raise errors.ShapeError(f"tensordot: shape mismatch {la.shape} axes {ca} vs {lb.shape} axes {cb}"
                                f"{_where_line()}")
    return lax.dot_general(a, b, ((ca, cb), ((), ())))


def einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None):
    """``jnp.einsum`` for explicit or implicit subscripts, ``...`` (broadcast batch dims) and
    the interleaved form ``einsum(x, [0, 1], y, [1, 2], [0, 2])``, evaluated left to right as
    ``dot_general`` (batch dims = indices in both operands that survive, contracting = indices
    shared and not in the output); sums of single-operand indices are reductions.
    ``optimize`` is accepted and ignored (JAX picks the pairwise order with opt_einsum, so a
    float result may differ from JAX's by rounding); ``precision`` and
    ``preferred_element_type`` go to each ``dot_general``. Raises ShapeError naming the
    subscripts and shapes; ``out=`` is JAX's NotImplementedError."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.einsum is not supported.")
    if not isinstance(subscripts, str):  # the interleaved form: op, sublist, op, sublist, [out]
        subscripts, operands = _einsum_sublists((subscripts,) + operands)
    operands = list(_promote_dtypes(*[_arr(o) for o in operands]))
    subscripts = subscripts.replace(" ", "")
    if "..." in subscripts:
        subscripts, operands = _einsum_ellipsis(subscripts, operands)
    dot_kw = dict(precision=precision, preferred_element_type=preferred_element_type)
    if "->" in subscripts:
        ins, out = subscripts.split("->")
    else:
        ins = subscripts
        letters = ins.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = ins.split(",")
    if len(ins) != len(operands):
        raise errors.ShapeError(f"einsum: {len(ins)} subscripts for {len(operands)} operands{_where_line()}")
    sizes = {}
    for i, (spec, op) in enumerate(zip(ins, operands)):
        shape = get_aval(op).shape
        if len(spec) != len(shape):
            raise errors.ShapeError(f"Einstein sum subscript '{spec}' does not contain the correct number "
                                    f"of indices for operand {i}.{_where_line()}")
        for c, d in zip(spec, shape):
            if sizes.setdefault(c, d) != d:
                raise errors.ShapeError(f"einsum: index '{c}' has sizes {sizes[c]} and {d}{_where_line()}")

    def reduce_private(op, spec, keep):
        # Sum indices that no one else needs; take diagonals of repeated indices first.
        for c in set(spec):
            while spec.count(c) > 1:
                i = spec.index(c)
                j = spec.index(c, i + 1)
                n = sizes[c]
                eye_ = np.eye(n, dtype=bool)
                shape = get_aval(op).shape
                mask = lax.broadcast_in_dim(eye_, shape, (i, j))
                op = sum(where(mask, op, zeros_like(op)), axis=j)
                spec = spec[:j] + spec[j + 1:]
        axes = tuple(i for i, c in enumerate(spec) if c not in keep)
        if axes:
            op = sum(op, axis=axes)
            spec = "".join(c for c in spec if c in keep)
        return op, spec

    specs = list(ins)
    for k in range(len(operands)):
        others = set(out) | {c for j, s in enumerate(specs) if j != k for c in s}
        operands[k], specs[k] = reduce_private(operands[k], specs[k], others)
    acc, acc_spec = operands[0], specs[0]
    for k in range(1, len(operands)):
        op, spec = operands[k], specs[k]
        later = set(out).union(*(set(s) for s in specs[k + 1:]))
        batch = [c for c in acc_spec if c in spec and c in later]
        contract = [c for c in acc_spec if c in spec and c not in later]
        dn = (((tuple(acc_spec.index(c) for c in contract)), tuple(spec.index(c) for c in contract)),
              (tuple(acc_spec.index(c) for c in batch), tuple(spec.index(c) for c in batch)))
        acc = lax.dot_general(acc, op, dn, **dot_kw)
        acc_spec = "".join(batch + [c for c in acc_spec if c not in batch and c not in contract]
                           + [c for c in spec if c not in batch and c not in contract])
    acc, acc_spec = reduce_private(acc, acc_spec, set(out))
    if sorted(acc_spec) != sorted(out):
        raise errors.ShapeError(f"einsum: output '{out}' is not reachable from '{subscripts}'{_where_line()}")
    acc = transpose(acc, [acc_spec.index(c) for c in out]) if acc_spec != out else acc
    if preferred_element_type is not None and get_aval(acc).dtype != np.dtype(preferred_element_type):
        acc = lax.convert_element_type(acc, preferred_element_type)
    return acc


_EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_sublists(args):
    """``einsum(x, [0, 1], y, [1, 2], [0, 2])`` as ``("ab,bc->ac", (x, y))`` (ints 0-51 name
    indices as NumPy's, ``Ellipsis`` is ``...``)."""
    def letters(sub):
        out = []
        for i in sub:
            if i is Ellipsis:
                out.append("...")
            elif isinstance(i, (int, np.integer)) and 0 <= i < len(_EINSUM_LETTERS):
                out.append(_EINSUM_LETTERS[int(i)])
            else:
                raise ValueError(f"einsum: subscript {i!r} is not an int in [0, 52) or Ellipsis"
                                 f"{_where_line()}")
        return "".join(out)
    ops, subs = list(args[0::2]), [letters(s) for s in args[1::2]]
    if len(args) % 2:  # an output sublist last
        return ",".join(subs) + "->" + letters(ops.pop()), ops
    return ",".join(subs), ops


def _einsum_ellipsis(subscripts, operands):
    """Replace ``...`` by fresh letters, right-aligned across operands as NumPy broadcasting
    aligns them (an extent-1 dim is broadcast to the others' extent); the implicit output is
    the broadcast dims, then the indices used once in alphabetical order."""
    ins, arrow, out = subscripts.partition("->")
    specs = ins.split(",")
    if len(specs) != len(operands):
        raise errors.ShapeError(f"einsum: {len(specs)} subscripts for {len(operands)} operands{_where_line()}")
    fresh = [c for c in _EINSUM_LETTERS if c not in subscripts]
    ranks = []
    for spec, op in zip(specs, operands):
        ndim = get_aval(op).ndim
        k = ndim - (len(spec) - 3) if "..." in spec else 0
        if k < 0:
            raise errors.ShapeError(f"Ellipses lengths do not match.{_where_line()}")
        ranks.append(k)
    n = builtins.max(ranks)
    ell = "".join(fresh[:n])
    shapes = [get_aval(op).shape[:k] for op, k in zip(operands, ranks)]
    try:
        batch = broadcast_shapes(*shapes)
    except errors.ShapeError:
        raise errors.ShapeError(f"einsum: the '...' dims {', '.join(map(str, shapes))} of "
                                f"'{subscripts}' do not broadcast{_where_line()}") from None
    new_specs, new_ops = [], []
    for spec, op, k in zip(specs, operands, ranks):
        if "..." in spec:
            shape = get_aval(op).shape
            full = batch[n - k:] + shape[k:]
            if shape != full:
                op = broadcast_to(op, full)
            spec = spec.replace("...", ell[n - k:])
        new_specs.append(spec)
        new_ops.append(op)
    if arrow:
        out = out.replace("...", ell)
    else:
        letters = "".join(new_specs)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return ",".join(new_specs) + "->" + out, new_ops


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """The contraction order ``opt_einsum`` chooses for ``einsum(subscripts, *operands)`` and its
    report (``jnp.einsum_path``): ``(path, PathInfo)``, computed from the operands' shapes only
    (tracers are fine). ``optimize``: ``True`` ('optimal'), ``False`` (left to right), a strategy
    name or an explicit path. (``minixla.numpy.einsum`` itself contracts left to right.)"""
    import opt_einsum
    shapes = [tuple(get_aval(o).shape) for o in operands]
    if isinstance(optimize, bool):
        optimize = "optimal" if optimize else [(0, 1)] * max(len(shapes) - 1, 0) if len(shapes) > 1 else [(0,)]
    return opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize=optimize)
