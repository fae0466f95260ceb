"""The ground ``minixla.numpy`` stands on: dtype names, JAX's dtype promotion (weak types
included, via ``jax.dtypes``), casting, and NumPy broadcasting made explicit with
``broadcast_in_dim``, and the checks of axis and index arguments.
"""
from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import WeakScalar, canonicalize_dtype, get_aval, promote_types, weak_array
from minixla.core.tracing import Tracer


class _ScalarMeta(type):
    """The type of ``minixla.numpy.float32`` & co. (``jax.numpy``'s scalar types): a dtype name
    that is also a converter. ``mnp.float16(x)`` is ``asarray(x, float16)`` for a tracer (under
    ``jit``, ``grad``, ``vmap``), an array or a Python scalar, as ``jnp.float16(x)``; as a dtype
    (``dtype=mnp.float16``, ``np.dtype(mnp.float16)``, ``x.dtype == mnp.float16``, a dict key)
    it is NumPy's scalar type, and ``isinstance(v, mnp.float32)`` tests NumPy's."""

    def __hash__(cls):
        return hash(cls.dtype.type)

    def __eq__(cls, other):
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other):
        return not cls == other

    def __instancecheck__(cls, instance):
        return isinstance(instance, cls.dtype.type)

    def __call__(cls, x):
        from minixla.numpy.creation import asarray
        return asarray(x, dtype=cls.dtype)


def _scalar_type(np_type):
    name = np.dtype(np_type).name
    return _ScalarMeta("bool_" if name == "bool" else name, (object,),
                       {"dtype": np.dtype(np_type), "__module__": "minixla.numpy"})


float16, float32, float64, bfloat16 = map(_scalar_type, (np.float16, np.float32, np.float64,
                                                           ml_dtypes.bfloat16))
int8, int16, int32, int64 = map(_scalar_type, (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = map(_scalar_type, (np.uint8, np.uint16, np.uint32, np.uint64))
bool_ = _scalar_type(np.bool_)
pi, inf, nan, e = np.pi, np.inf, np.nan, np.e
newaxis = None
dtype = np.dtype
iinfo = np.iinfo
finfo = ml_dtypes.finfo


def _is_python_scalar(x):
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def _where_line():
    return f"\n  at: {errors.user_source_line()}"


def _cast(x, dtype, weak=False):
    """Convert ``x`` to ``dtype``; Python scalars become numpy scalars as in JAX: first the
    default int/float (an int that does not fit raises OverflowError, see ``get_aval``), then
    ``dtype``, wrapping or rounding there (``uint8(300) = 44``; a float rounds to float32 first,
    then to float16)."""
    dtype = np.dtype(dtype)
    if _is_python_scalar(x) or isinstance(x, (np.ndarray, np.generic, WeakScalar)):
        if isinstance(x, int) and dtype.kind in "iu" and np.iinfo(dtype).min <= x <= np.iinfo(dtype).max:
            arr = np.asarray(x, dtype)  # (exact: e.g. a constant iinfo(uint32).max, beyond int32)
        elif _is_python_scalar(x):
            with np.errstate(over="ignore"):  # (1e40 -> float32 inf, as in JAX)
                arr = np.asarray(x, get_aval(x).dtype)
        else:
            arr = np.asarray(x.value if isinstance(x, WeakScalar) else x)
        if arr.dtype != dtype:
            with np.errstate(all="ignore"):
                arr = _np_astype(arr, dtype)
        if arr.ndim == 0:
            return WeakScalar(arr[()]) if weak else arr[()]
        return weak_array(arr, weak)
    aval = get_aval(x)
    if aval.dtype == dtype and aval.weak_type == weak:
        return x
    return lax._convert_weak(x, dtype, weak)


def _np_astype(arr, dtype):
    """Convert a constant as XLA's ``convert`` would: integers wrap (int8(1000) = -24); float ->
    int truncates, saturates and maps NaN to 0 (NumPy's cast would wrap or be undefined)."""
    dtype = np.dtype(dtype)
    if arr.dtype.kind in "iu" and dtype.kind in "iu":
        return arr.astype(np.int64).astype(dtype)
    if (arr.dtype.kind == "f" or arr.dtype == np.dtype(bfloat16)) and dtype.kind in "iu":
        info = np.iinfo(dtype)
        t = np.trunc(arr.astype(np.float64))
        t = np.where(np.isnan(t), 0, np.clip(t, info.min, info.max))
        return t.astype(dtype)
    return arr.astype(dtype)


def _promote_dtypes(*args):
    avals = [get_aval(a) for a in args]
    dtype, weak = promote_types(*avals)
    return [_cast(a, dtype, weak) for a in args]


def _is_inexact(dtype):
    return np.issubdtype(dtype, np.inexact) or np.dtype(dtype) == np.dtype(bfloat16)


def _default_float():
    return canonicalize_dtype(np.float64)


def _default_int():
    return canonicalize_dtype(np.int64)


def _promote_inexact(*args):
    """JAX's ``promote_args_inexact``: the promoted dtype, made the default float if it is an
    integer or bool, and each argument converted to it directly: ``uint8_array / 256`` divides by
    256.0 (going through the promoted uint8 first would make the divisor 256 -> 0)."""
    dtype, weak = promote_types(*(get_aval(a) for a in args))
    dtype = _to_inexact(dtype)
    return [_cast(a, dtype, weak) for a in args]


def _to_inexact(dtype):
    """JAX's ``to_inexact_dtype``: bools and integers up to 32 bits become float32, 64-bit
    integers float64 (float32 again unless x64 is on); float dtypes stay."""
    dtype = np.dtype(dtype)
    if _is_inexact(dtype):
        return dtype
    return canonicalize_dtype(np.float64 if dtype.itemsize == 8 else np.float32)


def _arr(x):
    """A tracer stays; anything else becomes a numpy array or (weakly typed) scalar."""
    if isinstance(x, (Tracer, WeakScalar)) or _is_python_scalar(x):
        return x
    return asarray(x)


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
    x = _arr(x)
    aval = get_aval(x)
    shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    if aval.shape == shape:
        return x
    try:
        ok = len(shape) >= aval.ndim and broadcast_shapes(aval.shape, shape) == shape
    except errors.ShapeError:
        ok = False
    if not ok:
        raise errors.ShapeError(f"cannot broadcast array of shape {aval.shape} to shape {shape}{_where_line()}")
    nlead = len(shape) - aval.ndim
    return lax.broadcast_in_dim(x, shape, tuple(range(nlead, len(shape))))


def broadcast_arrays(*args):
    """The arrays broadcast to their common shape (``jnp.broadcast_arrays``)."""
    shape = broadcast_shapes(*(get_aval(a).shape for a in args))
    return [broadcast_to(a, shape) for a in args]


def _broadcast_args(*args):
    shapes = [get_aval(a).shape for a in args]
    try:
        shape = broadcast_shapes(*shapes)
    except errors.ShapeError as e:
        raise errors.ShapeError(f"{e.args[0]}{_where_line()}") from None
    # Rank-0 operands stay rank-0: lax ops accept them with any shape (as jax.numpy does).
    return [a if get_aval(a).shape in ((), shape) else broadcast_to(a, shape) for a in args]


def _full_shape(*args):
    """Broadcast all to one full shape (for ops whose operands must all have it), except a
    weak-typed constant scalar: broadcast, it would become a plain (strong) array, and lax ops
    take a rank-0 operand with any shape anyway. (``0 // bool_array`` is weak int32 in JAX and
    adds to an int8 array as int8.)"""
    shape = broadcast_shapes(*(get_aval(a).shape for a in args))
    return [a if isinstance(a, WeakScalar) else broadcast_to(a, shape) for a in args]


def _check_kind(name, x, kinds):
    dt = get_aval(x).dtype
    ok = dt.kind in kinds or ("f" in kinds and dt == np.dtype(bfloat16))
    if not ok:
        raise errors.DTypeError(f"{name} does not accept dtype {dt.name}{_where_line()}")


# Axis and index arguments.

def _canon_axis1(axis, ndim, name="axis"):
    if not -ndim <= axis < builtins.max(ndim, 1):
        raise errors.ShapeError(f"{name} {axis} is out of bounds for array of dimension {ndim}{_where_line()}")
    return axis % ndim if ndim else 0


def _canon_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise errors.ShapeError(f"axis {a} is out of bounds for array of dimension {ndim}{_where_line()}")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise errors.ShapeError(f"repeated axis in {axes}{_where_line()}")
    return tuple(sorted(out))


def _is_int_index(i):
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


# Imported last, after this module's definitions, to close an import cycle: ``_arr`` converts with
# ``asarray``, which needs the dtype helpers above.
from minixla.numpy.creation import asarray  # noqa: E402
