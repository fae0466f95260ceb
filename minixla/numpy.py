"""``minixla.numpy``: the NumPy-style API, built only from ``minixla.lax`` primitives (``jax.numpy``).

What this layer adds over ``lax``: JAX's dtype promotion (weak types included, via
``jax.dtypes``), NumPy broadcasting (made explicit with ``broadcast_in_dim``), ``axis``/``keepdims``
arguments and indexing. Functions accept tracers, numpy arrays and Python scalars.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import WeakScalar, canonicalize_dtype, get_aval, promote_types
from minixla.core.tracing import Tracer

float32, float64, float16 = np.float32, np.float64, np.float16
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint32 = np.uint8, np.uint32
bool_ = np.bool_
pi, inf, nan, e = np.pi, np.inf, np.nan, np.e


def _is_python_scalar(x):
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def _cast(x, dtype, weak=False):
    """Convert ``x`` to ``dtype``; Python scalars become numpy scalars (wrapping like JAX)."""
    if _is_python_scalar(x) or isinstance(x, (np.ndarray, np.generic)):
        arr = np.asarray(x)
        if arr.dtype != dtype:
            with np.errstate(all="ignore"):
                arr = arr.astype(dtype)
        if arr.ndim == 0:
            return WeakScalar(arr[()]) if weak else arr[()]
        return arr
    aval = get_aval(x)
    if aval.dtype == dtype and aval.weak_type == weak:
        return x
    return lax._convert_weak(x, dtype, weak)


def _promote_dtypes(*args):
    avals = [get_aval(a) for a in args]
    dtype, weak = promote_types(*avals)
    return [_cast(a, dtype, weak) for a in args]


def broadcast_shapes(*shapes):
    """NumPy's broadcasting of shapes; raises ShapeError naming them when incompatible."""
    ndim = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise errors.ShapeError(f"shapes {', '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to(x, shape):
    """Broadcast ``x`` to ``shape`` with NumPy's rules (``jnp.broadcast_to``)."""
    aval = get_aval(x)
    shape = tuple(shape)
    if aval.shape == shape:
        return x
    if broadcast_shapes(aval.shape, shape) != shape:
        raise errors.ShapeError(f"cannot broadcast array of shape {aval.shape} to shape {shape}\n"
                                f"  at: {errors.user_source_line()}")
    nlead = len(shape) - aval.ndim
    return lax.broadcast_in_dim(x, shape, tuple(range(nlead, len(shape))))


def _broadcast_args(*args):
    shapes = [get_aval(a).shape for a in args]
    try:
        shape = broadcast_shapes(*shapes)
    except errors.ShapeError as e:
        raise errors.ShapeError(f"{e.args[0]}\n  at: {errors.user_source_line()}") from None
    # Rank-0 operands stay rank-0: lax ops accept them with any shape (as jax.numpy does).
    return [a if get_aval(a).shape in ((), shape) else broadcast_to(a, shape) for a in args]


def _binary(lax_fn, name, bool_ok=True, out_bool=False):
    def fn(x1, x2):
        x1, x2 = _promote_dtypes(x1, x2)
        if not bool_ok and get_aval(x1).dtype == np.bool_:
            raise errors.DTypeError(f"{name} does not accept bool inputs\n  at: {errors.user_source_line()}")
        x1, x2 = _broadcast_args(x1, x2)
        return lax_fn(x1, x2)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with broadcasting and JAX's dtype promotion (``jnp.{name}``)."
    return fn


add = _binary(lax.add, "add")
subtract = _binary(lax.sub, "subtract", bool_ok=False)
multiply = _binary(lax.mul, "multiply")
maximum = _binary(lax.max, "maximum")
minimum = _binary(lax.min, "minimum")
equal = _binary(lax.eq, "equal")
not_equal = _binary(lax.ne, "not_equal")
less = _binary(lax.lt, "less")
less_equal = _binary(lax.le, "less_equal")
greater = _binary(lax.gt, "greater")
greater_equal = _binary(lax.ge, "greater_equal")


def true_divide(x1, x2):
    """``x1 / x2`` always in floating point (``jnp.true_divide``): integers promote to float."""
    x1, x2 = _promote_dtypes(x1, x2)
    if not np.issubdtype(get_aval(x1).dtype, np.inexact) and get_aval(x1).dtype.name != "bfloat16":
        x1, x2 = _cast(x1, canonicalize_dtype(np.float64)), _cast(x2, canonicalize_dtype(np.float64))
    x1, x2 = _broadcast_args(x1, x2)
    return lax.div(x1, x2)


divide = true_divide


def power(x1, x2):
    """``x1 ** x2`` (``jnp.power``); static integer exponents use ``integer_pow``."""
    if _is_python_scalar(x2) and isinstance(x2, int) and not isinstance(x2, bool):
        return lax.integer_pow(asarray(x1) if not isinstance(x1, Tracer) else x1, x2)
    raise errors.UnsupportedError("power with a non-integer or traced exponent is not supported yet")


def _unary(lax_fn, name, float_only=False):
    def fn(x):
        x = asarray(x) if not isinstance(x, Tracer) else x
        if float_only and not _is_inexact(get_aval(x).dtype):
            x = _cast(x, canonicalize_dtype(np.float64))
        return lax_fn(x)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (``jnp.{name}``)."
    return fn


def _is_inexact(dtype):
    return np.issubdtype(dtype, np.inexact) or np.dtype(dtype).name == "bfloat16"


negative = _unary(lax.neg, "negative")
abs = absolute = _unary(lax.abs, "abs")
sign = _unary(lax.sign, "sign")
exp = _unary(lax.exp, "exp", float_only=True)
log = _unary(lax.log, "log", float_only=True)
tanh = _unary(lax.tanh, "tanh", float_only=True)
sqrt = _unary(lax.sqrt, "sqrt", float_only=True)
floor = _unary(lax.floor, "floor", float_only=True)
ceil = _unary(lax.ceil, "ceil", float_only=True)


def square(x):
    """``x * x`` (``jnp.square``)."""
    return lax.integer_pow(x, 2)


def where(condition, x, y):
    """``x`` where ``condition`` else ``y``, broadcasting all three (``jnp.where``, 3-argument form)."""
    x, y = _promote_dtypes(x, y)
    cond = condition if get_aval(condition).dtype == np.bool_ else not_equal(condition, 0)
    cond, x, y = _broadcast_args(cond, x, y)
    shape = broadcast_shapes(*(get_aval(a).shape for a in (cond, x, y)))
    x, y = broadcast_to(x, shape), broadcast_to(y, shape)
    return lax.select_n(cond, y, x)


def asarray(a, dtype=None):
    """A tracer stays itself (converted to ``dtype`` if given); anything else becomes a numpy array."""
    if isinstance(a, Tracer):
        return a if dtype is None else astype(a, dtype)
    arr = np.asarray(a)
    dtype = canonicalize_dtype(dtype if dtype is not None else arr.dtype)
    return arr.astype(dtype)


array = asarray


def astype(x, dtype):
    """Cast to ``dtype`` (``jnp.astype``)."""
    return lax.convert_element_type(x, dtype)


def zeros(shape, dtype=np.float32):
    return np.zeros(shape, canonicalize_dtype(dtype))


def ones(shape, dtype=np.float32):
    return np.ones(shape, canonicalize_dtype(dtype))


def _canon_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise errors.ShapeError(f"axis {a} is out of bounds for array of dimension {ndim}\n"
                                    f"  at: {errors.user_source_line()}")
        out.append(a % ndim)
    return tuple(sorted(out))


def _keepdims(out, x_shape, axes):
    return reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x_shape)))


def _reduction(lax_fn, name, upcast_bool=False):
    def fn(a, axis=None, keepdims=False):
        a = a if isinstance(a, Tracer) else asarray(a)
        aval = get_aval(a)
        axes = _canon_axes(axis, aval.ndim)
        if upcast_bool and aval.dtype == np.bool_:
            a = astype(a, canonicalize_dtype(np.int64))
        out = lax_fn(a, axes)
        return _keepdims(out, aval.shape, axes) if keepdims else out
    fn.__name__ = name
    fn.__doc__ = f"``jnp.{name}(a, axis=None, keepdims=False)``."
    return fn


sum = _reduction(lax.reduce_sum, "sum", upcast_bool=True)
max = amax = _reduction(lax.reduce_max, "max")
min = amin = _reduction(lax.reduce_min, "min")


def mean(a, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` (``jnp.mean``); integers average in float."""
    aval = get_aval(a)
    axes = _canon_axes(axis, aval.ndim)
    n = int(np.prod([aval.shape[i] for i in axes], dtype=np.int64))
    if not _is_inexact(aval.dtype):
        a = astype(a, canonicalize_dtype(np.float64))
    return true_divide(sum(a, axes, keepdims), n)


def reshape(a, newshape):
    """Row-major reshape with one ``-1`` allowed (``jnp.reshape``)."""
    aval = get_aval(a)
    newshape = (newshape,) if isinstance(newshape, int) else tuple(newshape)
    if newshape.count(-1) > 1:
        raise errors.ShapeError("can only specify one unknown dimension (-1) in reshape")
    if -1 in newshape:
        known = int(np.prod([d for d in newshape if d != -1], dtype=np.int64))
        if known == 0 or aval.size % known:
            raise errors.ShapeError(f"cannot reshape array of shape {aval.shape} into shape {newshape}\n"
                                    f"  at: {errors.user_source_line()}")
        newshape = tuple(aval.size // known if d == -1 else d for d in newshape)
    return lax.reshape(a, newshape)


def ravel(a):
    return reshape(a, (-1,))


def transpose(a, axes=None):
    """Permute axes (``jnp.transpose``); default reverses them."""
    nd = get_aval(a).ndim
    axes = tuple(reversed(range(nd))) if axes is None else tuple(x % nd for x in axes)
    return lax.transpose(a, axes)


def expand_dims(a, axis):
    shape = list(get_aval(a).shape)
    for ax in sorted(x % (len(shape) + 1) for x in ((axis,) if isinstance(axis, int) else axis)):
        shape.insert(ax, 1)
    return reshape(a, shape)


def squeeze(a, axis=None):
    shape = get_aval(a).shape
    axes = [i for i, d in enumerate(shape) if d == 1] if axis is None else _canon_axes(axis, len(shape))
    for i in axes:
        if shape[i] != 1:
            raise errors.ShapeError(f"cannot squeeze axis {i} of size {shape[i]}")
    return reshape(a, [d for i, d in enumerate(shape) if i not in axes])


def matmul(a, b):
    """``a @ b`` with NumPy's rules: batch dims broadcast, 1-d operands promoted (``jnp.matmul``)."""
    a, b = _promote_dtypes(a, b)
    la, lb = get_aval(a), get_aval(b)
    if la.ndim == 0 or lb.ndim == 0:
        raise errors.ShapeError(f"matmul: operands must not be scalars, got shapes {la.shape} and {lb.shape}\n"
                                f"  at: {errors.user_source_line()}")
    a2 = reshape(a, (1,) + la.shape) if la.ndim == 1 else a
    b2 = reshape(b, lb.shape + (1,)) if lb.ndim == 1 else b
    sa, sb = get_aval(a2).shape, get_aval(b2).shape
    if sa[-1] != sb[-2]:
        raise errors.ShapeError(f"matmul: contracting dims differ: {la.shape} @ {lb.shape} "
                                f"({sa[-1]} != {sb[-2]})\n  at: {errors.user_source_line()}")
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    a2 = broadcast_to(a2, batch + sa[-2:])
    b2 = broadcast_to(b2, batch + sb[-2:])
    nb = len(batch)
    out = lax.dot_general(a2, b2, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))
    out_shape = batch + ((sa[-2],) if la.ndim > 1 else ()) + ((sb[-1],) if lb.ndim > 1 else ())
    return reshape(out, out_shape)


def dot(a, b):
    """``jnp.dot``: matmul for rank <= 2, a scalar product for rank-0 operands."""
    la, lb = get_aval(a), get_aval(b)
    if la.ndim == 0 or lb.ndim == 0:
        return multiply(a, b)
    if la.ndim <= 2 and lb.ndim <= 2:
        return matmul(a, b)
    raise errors.UnsupportedError("jnp.dot of rank > 2 operands is not supported yet; use matmul/einsum")


def _getitem(x, idx):
    """Basic indexing: ints (negative too), slices with steps, None and Ellipsis."""
    shape = get_aval(x).shape
    idx = idx if isinstance(idx, tuple) else (idx,)
    if builtins.sum(i is Ellipsis for i in idx) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = builtins.sum(i is not None and i is not Ellipsis for i in idx)
    if n_real > len(shape):
        raise IndexError(f"too many indices for array of shape {shape}")
    if Ellipsis in idx:
        k = idx.index(Ellipsis)
        idx = idx[:k] + (builtins.slice(None),) * (len(shape) - n_real) + idx[k + 1:]
    idx = idx + (builtins.slice(None),) * (len(shape) - n_real)
    starts, limits, strides, out_shape, flips = [], [], [], [], []
    dim = 0
    for i in idx:
        if i is None:
            out_shape.append(1)
            continue
        d = shape[dim]
        if isinstance(i, builtins.slice):
            s, l, st = i.indices(d)
            if st < 0:
                raise errors.UnsupportedError("negative slice steps are not supported yet")
            starts.append(s), limits.append(builtins.max(s, l)), strides.append(st)
            out_shape.append(len(range(s, l, st)))
        elif isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            if not -d <= i < d:
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {d}")
            i = operator.index(i) % d
            starts.append(i), limits.append(i + 1), strides.append(1)
        else:
            raise errors.UnsupportedError(f"indexing with {type(i).__name__} is not supported yet")
        dim += 1
    out = lax.slice(x, starts, limits, strides) if (starts != [0] * len(shape) or limits != list(shape)
                                                   or builtins.any(s != 1 for s in strides)) else x
    return reshape(out, out_shape)

