"""Sorting: ``sort`` (multi-operand, stable, ``num_keys``, any dimension), ``sort_key_val`` and
``top_k``, as ``jax.lax`` defines them.

``sort_p`` is JAX's primitive: several operands of one shape, sorted together along
``dimension`` by the lexicographic order of the first ``num_keys`` of them (the others are
carried along); one result per operand. The order is JAX's comparator: integers and bools as
numbers; floats by a total order in which ``-0.0 == 0.0`` and every NaN is one value above
``+inf`` (JAX canonicalizes both before comparing, so a stable sort keeps such ties in input
order); and, as XLA:CPU compares with denormals read as zero, a denormal ties with zero.

``top_k`` is JAX's ``top_k``: the ``k`` largest along ``axis`` by the *raw* total order
(``-NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN``), ties by the lower index. It is built from
``sort`` on an integer key, so every backend runs the same kernel.
"""
from __future__ import annotations

import numpy as np
import jax

from minixla.core import errors
from minixla.core.avals import ShapedArray, get_aval
from minixla.core.primitive import Primitive, impl_rules, shape_rules
from minixla.lax import elementwise as _ew
from minixla.lax import structural as _st


def _sort_rule(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise errors.ShapeError("sort needs at least one operand")
    shape = operands[0].shape
    if any(o.shape != shape for o in operands):
        raise errors.ShapeError("sort operands must have one shape, got "
                                + ", ".join(str(o.shape) for o in operands))
    if not shape:
        raise errors.ShapeError("sort needs operands of rank >= 1, got rank-0 operands")
    if not 0 <= dimension < len(shape):
        raise errors.ShapeError(f"sort dimension {dimension} is out of range for rank {len(shape)}")
    if not 1 <= num_keys <= len(operands):
        raise errors.ShapeError(f"sort num_keys={num_keys} must be in [1, {len(operands)}] "
                                f"(the number of operands)")
    for o in operands[:num_keys]:
        if o.dtype.kind not in "fiub" and o.dtype.name != "bfloat16":
            raise errors.DTypeError(f"sort does not accept key dtype {o.dtype.name}")
    return [ShapedArray(shape, o.dtype, o.weak_type) for o in operands]


sort_p = Primitive("sort")
sort_p.multiple_results = True
shape_rules[sort_p] = _sort_rule
impl_rules[sort_p] = lambda *ops, dimension, is_stable, num_keys: [
    np.asarray(r) for r in jax.lax.sort(ops, dimension=dimension, is_stable=is_stable, num_keys=num_keys)]


def _axis(axis, ndim, opname):
    if not -ndim <= axis < ndim:
        raise errors.ShapeError(f"{opname}: dimension {axis} is out of range for rank {ndim}")
    return axis % ndim


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sort ``operand`` (an array, or a sequence of arrays of one shape sorted together by the
    first ``num_keys``) along ``dimension`` (``jax.lax.sort``). Returns an array, or a tuple
    with one array per operand. Raises ``ShapeError`` for mismatched shapes, a rank-0 operand,
    or a bad ``dimension``/``num_keys``."""
    single = not isinstance(operand, (tuple, list))
    ops = [operand] if single else list(operand)
    if not ops:
        raise errors.ShapeError("sort needs at least one operand")
    dim = _axis(int(dimension), get_aval(ops[0]).ndim, "sort")
    out = sort_p.bind(*ops, dimension=dim, is_stable=bool(is_stable), num_keys=int(num_keys))
    return out[0] if single else tuple(out)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """``(sorted keys, values in the keys' order)`` along ``dimension`` (``jax.lax.sort_key_val``)."""
    k, v = sort([keys, values], dimension=dimension, is_stable=is_stable, num_keys=1)
    return k, v


def _total_order_key(x):
    """An integer array ordered as ``x`` by the raw IEEE total order (``-NaN < -inf < ... <
    -0.0 < 0.0 < ... < inf < NaN``); integers and bools are returned as they are."""
    dt = get_aval(x).dtype
    if dt.kind in "iub":
        return x
    it = np.dtype(f"int{8 * dt.itemsize}")
    bits = _ew.bitcast_convert_type(x, it)
    # negative floats: flip the magnitude bits, so more negative means smaller as a signed int
    flip = _ew.bitwise_and(_ew.shift_right_arithmetic(bits, np.asarray(8 * dt.itemsize - 1, it)),
                           np.asarray(np.iinfo(it).max, it))
    return _ew.bitwise_xor(bits, flip)


def top_k(operand, k, *, axis=-1):
    """The ``k`` largest entries along ``axis`` and their indices (int32), largest first, ties
    by the lower index (``jax.lax.top_k``). Floats use the raw total order (NaN largest,
    ``-NaN`` smallest, ``0.0 > -0.0``). Raises ``ShapeError`` unless ``0 <= k <= size``."""
    aval = get_aval(operand)
    if aval.ndim == 0:
        raise errors.ShapeError("top_k operand must have rank >= 1")
    ax = _axis(int(axis), aval.ndim, "top_k")
    k = int(k)
    if not 0 <= k <= aval.shape[ax]:
        raise errors.ShapeError(f"top_k: k={k} must be in [0, {aval.shape[ax]}] (the size of axis {ax})")
    key = _total_order_key(operand)
    # descending: sort ascending by the complement (for bool: by not)
    desc = _ew.bitwise_not(key)
    iota = _st.broadcasted_iota(np.int32, aval.shape, ax)
    _, values, idx = sort([desc, operand, iota], dimension=ax, is_stable=True, num_keys=1)
    limit = list(aval.shape)
    limit[ax] = k
    start = [0] * aval.ndim
    return [_st.slice(values, start, limit), _st.slice(idx, start, limit)]  # (a list, as JAX's)
