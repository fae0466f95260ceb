"""``minixla.numpy``: the NumPy-style API, built only from ``minixla.lax`` primitives (``jax.numpy``).

What this layer adds over ``lax``: JAX's dtype promotion (weak types included, via
``jax.dtypes``), NumPy broadcasting (made explicit with ``broadcast_in_dim``), ``axis``/``keepdims``/
``dtype`` arguments, indexing (basic and integer-array, as gathers) and ``x.at[idx]`` updates
(as scatters). Functions accept tracers, numpy arrays and Python scalars, with ``jax.numpy``'s
signatures; results, result dtypes and weak types equal ``jax.numpy``'s.

Where ``jax.numpy`` builds a function from several ``lax`` ops (``floor_divide``, ``remainder``,
``var``, ``power`` on integers, ...) we build it from the same ops in the same order, so the
roundings are the same and the results bit-identical.
"""
from __future__ import annotations

import builtins
import math
import operator

import jax.numpy as _jnp
import ml_dtypes
import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import WeakScalar, canonicalize_dtype, get_aval, promote_types
from minixla.core.avals import canonicalize_shape
from minixla.core.tracing import Tracer

float32, float64, float16 = np.float32, np.float64, np.float16
bfloat16 = ml_dtypes.bfloat16
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
bool_ = np.bool_
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
        return arr
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


# ---------------------------------------------------------------------------------------
# Elementwise binary functions.

def _binary(lax_fn, name, kinds="biuf"):
    def fn(x1, x2, /):
        x1, x2 = _promote_dtypes(_arr(x1), _arr(x2))
        _check_kind(name, x1, kinds)
        x1, x2 = _broadcast_args(x1, x2)
        return lax_fn(x1, x2)
    fn.__name__ = name
    fn.__doc__ = (f"Elementwise ``{name}`` with broadcasting and JAX's dtype promotion "
                  f"(``jnp.{name}``). Raises ShapeError / DTypeError naming the shapes and your line.")
    return fn


def _bool_as(bool_fn, fn):
    # jax.numpy adds bools with `or` and multiplies them with `and` (lax.add/mul reject bool).
    return lambda x, y: (bool_fn if get_aval(x).dtype == np.bool_ else fn)(x, y)


add = _binary(_bool_as(lax.bitwise_or, lax.add), "add")
subtract = _binary(lax.sub, "subtract", "iuf")
multiply = _binary(_bool_as(lax.bitwise_and, lax.mul), "multiply")
maximum = _binary(lax.max, "maximum")
minimum = _binary(lax.min, "minimum")
equal = _binary(lax.eq, "equal")
not_equal = _binary(lax.ne, "not_equal")
less = _binary(lax.lt, "less")
less_equal = _binary(lax.le, "less_equal")
greater = _binary(lax.gt, "greater")
greater_equal = _binary(lax.ge, "greater_equal")
bitwise_and = _binary(lax.bitwise_and, "bitwise_and", "biu")
bitwise_or = _binary(lax.bitwise_or, "bitwise_or", "biu")
bitwise_xor = _binary(lax.bitwise_xor, "bitwise_xor", "biu")
def _int_args(name, x1, x2):
    """Promote; bools become the default int (as jax.numpy's ``promote_args_numeric``)."""
    x1, x2 = _promote_dtypes(_arr(x1), _arr(x2))
    _check_kind(name, x1, "biu")
    if get_aval(x1).dtype == np.bool_:
        x1, x2 = _cast(x1, _default_int()), _cast(x2, _default_int())
    return x1, x2


def left_shift(x1, x2, /):
    """``x1 << x2`` (``jnp.left_shift``); shifting by >= the bit width gives 0."""
    return lax.shift_left(*_broadcast_args(*_int_args("left_shift", x1, x2)))


def right_shift(x1, x2, /):
    """``x1 >> x2`` (``jnp.right_shift``): arithmetic for signed, logical for unsigned integers."""
    x1, x2 = _int_args("right_shift", x1, x2)
    x1, x2 = _broadcast_args(x1, x2)
    if get_aval(x1).dtype.kind == "u":
        return lax.shift_right_logical(x1, x2)
    return lax.shift_right_arithmetic(x1, x2)


def _logical(lax_fn, name):
    def fn(x1, x2, /):
        x1, x2 = _arr(x1), _arr(x2)
        return lax_fn(*_broadcast_args(_as_bool(x1), _as_bool(x2)))
    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` of the truth values (``jnp.{name}``)."
    return fn


def _as_bool(x):
    x = _arr(x)
    if get_aval(x).dtype == np.bool_:
        return x
    return not_equal(x, 0)


logical_and = _logical(lax.bitwise_and, "logical_and")
logical_or = _logical(lax.bitwise_or, "logical_or")
logical_xor = _logical(lax.bitwise_xor, "logical_xor")


def logical_not(x, /):
    """Elementwise ``not`` of the truth values (``jnp.logical_not``)."""
    return lax.bitwise_not(_as_bool(x))


def true_divide(x1, x2, /):
    """``x1 / x2`` always in floating point (``jnp.true_divide``): integers promote to float.

    A divisor that is broadcast (a scalar, a row or a column) is inverted once and multiplied:
    ``x1 * broadcast(1 / x2)``. This is what XLA's algebraic simplifier does to the
    ``div(x, broadcast(y))`` that ``jnp.true_divide`` compiles to, so it is what JAX eager
    returns (up to 1 ulp away from a correctly rounded division); equal shapes divide exactly.
    """
    x1, x2 = _promote_inexact(_arr(x1), _arr(x2))
    out_shape = broadcast_shapes(get_aval(x1).shape, get_aval(x2).shape)
    if get_aval(x2).shape != out_shape and math.prod(out_shape) > 1:  # (XLA makes a one-element
        # broadcast a reshape, and then there is no broadcast divisor to rewrite)
        one = _cast(1, get_aval(x2).dtype, get_aval(x2).weak_type)
        return multiply(x1, lax.div(one, x2) if isinstance(x2, Tracer) else _reciprocal_const(x2))
    x1, x2 = _broadcast_args(x1, x2)
    return lax.div(x1, x2)


def _reciprocal_const(x):
    """1/x of a concrete divisor, rounded once in its own dtype, as XLA folds it."""
    arr = np.asarray(x)
    with np.errstate(all="ignore"):
        r = (np.ones((), arr.dtype) / arr).astype(arr.dtype)
    return WeakScalar(r[()]) if isinstance(x, WeakScalar) else (r[()] if arr.ndim == 0 else r)


divide = true_divide


def _div_by_constant(x, c):
    """``x / c`` for a constant ``c``, as JAX eager computes ``jax.numpy``'s ``lax.div(x, c)``:
    for an array, XLA rewrites the division by the broadcast ``c`` into ``x * (1 / c)`` (``1 / c``
    rounded to the dtype, an ulp away from the division at most); a one-element ``x`` is divided
    (XLA turns a one-element broadcast into a reshape); integers divide, truncating. ``mean``, ``var`` and
    ``round(x, decimals)`` use this, so they are JAX's bit for bit."""
    aval = get_aval(x)
    dt = aval.dtype
    if not _is_inexact(dt) or aval.size <= 1:
        return lax.div(*_broadcast_args(x, np.asarray(c).astype(dt)[()]))
    with np.errstate(divide="ignore"):
        inv = np.asarray(1, dt) / np.asarray(c).astype(dt)
    return lax.mul(x, np.asarray(inv, dt)[()])


def _float_divmod(x1, x2):
    # Python's float divmod (CPython's float_divmod), as jax.numpy computes it.
    mod = lax.rem(x1, x2)
    x1_corrected = where(equal(x2, 0), x1, lax.sub(x1, mod))
    div = lax.div(x1_corrected, x2)
    ind = lax.bitwise_and(not_equal(mod, 0), not_equal(lax.sign(x2), lax.sign(mod)))
    mod = lax.select(ind, add(mod, x2), mod)
    div = lax.select(ind, subtract(div, 1.0), div)
    return lax.round(div, lax.RoundingMethod.TO_NEAREST_EVEN), mod


def floor_divide(x1, x2, /):
    """``x1 // x2`` rounding toward -inf (``jnp.floor_divide``); integer x // 0 is -1 (XLA), no trap."""
    x1, x2 = _promote_dtypes(_arr(x1), _arr(x2))
    _check_kind("floor_divide", x1, "biuf")
    if get_aval(x1).dtype == np.bool_:  # as jax.numpy: bools divide as the default int
        x1, x2 = _cast(x1, _default_int()), _cast(x2, _default_int())
    x1, x2 = _full_shape(x1, x2)
    dt = get_aval(x1).dtype
    if dt.kind == "u":
        return lax.div(x1, x2)
    if dt.kind == "i":
        quotient = lax.div(x1, x2)
        select = logical_and(not_equal(lax.sign(x1), lax.sign(x2)), not_equal(lax.rem(x1, x2), 0))
        return where(select, subtract(quotient, 1), quotient)
    return _float_divmod(x1, x2)[0]


def remainder(x1, x2, /):
    """``x1 % x2`` with the divisor's sign (``jnp.remainder``/``jnp.mod``); integer x % 0 is 0 (as JAX)."""
    x1, x2 = _promote_dtypes(_arr(x1), _arr(x2))
    _check_kind("remainder", x1, "biuf")
    if get_aval(x1).dtype == np.bool_:
        x1, x2 = _cast(x1, _default_int()), _cast(x2, _default_int())
    x1, x2 = _full_shape(x1, x2)
    if get_aval(x2).dtype.kind in "iu":  # as jax.numpy: x % 0 is computed as x % 1 = 0
        x2 = where(equal(x2, 0), _cast(1, get_aval(x2).dtype, get_aval(x2).weak_type), x2)
    trunc_mod = lax.rem(x1, x2)
    trunc_mod_not_zero = not_equal(trunc_mod, 0)
    do_plus = lax.bitwise_and(not_equal(less(trunc_mod, 0), less(x2, 0)), trunc_mod_not_zero)
    return lax.select(do_plus, add(trunc_mod, x2), trunc_mod)


mod = remainder


def divmod(x1, x2, /):  # noqa: A001 (numpy's name)
    """``(floor_divide(x1, x2), remainder(x1, x2))`` (``jnp.divmod``)."""
    return floor_divide(x1, x2), remainder(x1, x2)


def fmod(x1, x2, /):
    """C's ``fmod``: remainder with the dividend's sign (``jnp.fmod``).

    As ``jnp.fmod``, an integer divisor 0 is replaced by 1 (x fmod 0 = 0) *before* promotion, in
    the divisor's own dtype: a weak divisor that only becomes 0 in ``x1``'s dtype
    (``fmod(int8_array, 256)``) stays and gives XLA's x rem 0 = x, and bools are not replaced."""
    x1, x2 = _arr(x1), _arr(x2)
    if promote_types(get_aval(x1), get_aval(x2))[0].kind in "iu":
        if _is_python_scalar(x2) or isinstance(x2, (WeakScalar, np.generic)):
            x2 = _cast(1, get_aval(x2).dtype, get_aval(x2).weak_type) if np.asarray(x2) == 0 else x2
        else:
            x2 = where(equal(x2, 0), _cast(1, get_aval(x2).dtype, get_aval(x2).weak_type), x2)
    x1, x2 = _promote_dtypes(x1, x2)
    _check_kind("fmod", x1, "biuf")
    if get_aval(x1).dtype == np.bool_:
        x1, x2 = _cast(x1, _default_int()), _cast(x2, _default_int())
    return lax.rem(*_full_shape(x1, x2))


def arctan2(x1, x2, /):
    """Angle of the point ``(x2, x1)`` in radians (``jnp.arctan2``)."""
    x1, x2 = _promote_inexact(_arr(x1), _arr(x2))
    return lax.atan2(*_broadcast_args(x1, x2))


atan2 = arctan2


def _pow_int_int(x1, x2):
    # jax.numpy's integer power, op for op: square-and-multiply over the exponent's low 6 bits
    # (more would overflow for any |x1| > 1), so a negative exponent gives whatever its low
    # bits give, as in JAX.
    dt = get_aval(x1).dtype
    one, zero = _cast(1, dt), _cast(0, dt)
    acc = where(logical_and(equal(x1, zero), not_equal(x2, zero)), zero, one)
    for _ in range(6):
        acc = where(lax.bitwise_and(x2, one), lax.mul(acc, x1), acc)
        x1 = lax.mul(x1, x1)
        x2 = lax.shift_right_logical(x2, one)
    return acc


def power(x1, x2, /):
    """``x1 ** x2`` (``jnp.power``): a static Python int exponent becomes ``integer_pow``
    (repeated multiplication, as in JAX); integer arrays use square-and-multiply; floats ``pow``."""
    x1 = _arr(x1)
    if isinstance(x2, np.integer):
        x2 = int(x2)
    if _is_int_index(x2) and not isinstance(x1, (int, float)):
        dt = get_aval(x1).dtype
        if dt == np.bool_:
            x1 = _cast(x1, _default_int())
        if x2 < 0 and get_aval(x1).dtype.kind in "iu":
            raise errors.DTypeError(f"power: integers to negative integer powers are not allowed{_where_line()}")
        return lax.integer_pow(x1, x2)
    x1, x2 = _promote_dtypes(x1, _arr(x2))
    if get_aval(x1).dtype == np.bool_:
        x1, x2 = _cast(x1, _default_int()), _cast(x2, _default_int())
    x1, x2 = _full_shape(x1, x2)
    dt = get_aval(x1).dtype
    if dt.kind in "iu":
        return _pow_int_int(x1, x2)
    return lax.pow(x1, x2)


def float_power(x1, x2, /):
    """``x1 ** x2`` in floating point (``jnp.float_power``): both promoted to an inexact dtype
    first (a Python int exponent is converted straight to it, never through ``x1``'s integer
    dtype), then ``pow``."""
    x1, x2 = _promote_inexact(_arr(x1), _arr(x2))
    return lax.pow(*_full_shape(x1, x2))


# ---------------------------------------------------------------------------------------
# Elementwise unary functions.

def _unary(lax_fn, name, float_only=False, kinds="biuf"):
    def fn(x, /):
        x = _arr(x)
        if float_only:
            x, = _promote_inexact(x)
        _check_kind(name, x, kinds)
        if get_aval(x).shape == () and not isinstance(x, Tracer):
            x = asarray(x) if not isinstance(x, WeakScalar) else x
        return lax_fn(x)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (``jnp.{name}``)" + (
        "; integer inputs are promoted to the default float." if float_only else ".")
    return fn


negative = _unary(lax.neg, "negative", kinds="iuf")
positive = _unary(lambda x: x, "positive")
sign = _unary(lax.sign, "sign", kinds="iuf")
exp = _unary(lax.exp, "exp", float_only=True)
exp2 = _unary(lax.exp2, "exp2", float_only=True)
expm1 = _unary(lax.expm1, "expm1", float_only=True)
log = _unary(lax.log, "log", float_only=True)
log1p = _unary(lax.log1p, "log1p", float_only=True)
tanh = _unary(lax.tanh, "tanh", float_only=True)
sqrt = _unary(lax.sqrt, "sqrt", float_only=True)
cbrt = _unary(lax.cbrt, "cbrt", float_only=True)
sin = _unary(lax.sin, "sin", float_only=True)
cos = _unary(lax.cos, "cos", float_only=True)
tan = _unary(lax.tan, "tan", float_only=True)
isfinite = _unary(lambda x: lax.is_finite(x) if _is_inexact(get_aval(x).dtype)
                  else full_like(x, True, np.bool_), "isfinite")


def abs(x, /):  # noqa: A001 (numpy's name)
    """``|x|`` (``jnp.abs``); bool and unsigned inputs are returned as they are."""
    x = _arr(x)
    _check_kind("abs", x, "biuf")
    if get_aval(x).dtype.kind in "bu":
        return x
    return lax.abs(x)


absolute = abs


def _float_or_int_identity(lax_fn, name):
    def fn(x, /):
        x = _arr(x)
        _check_kind(name, x, "biuf")
        if not _is_inexact(get_aval(x).dtype):
            return x  # jnp.floor/ceil/round of an integer is the integer itself
        return lax_fn(x)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (``jnp.{name}``); integers are returned unchanged."
    return fn


floor = _float_or_int_identity(lax.floor, "floor")
ceil = _float_or_int_identity(lax.ceil, "ceil")
rint = _unary(lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), "rint", float_only=True)


def trunc(x, /):
    """Round toward zero (``jnp.trunc``)."""
    x = _arr(x)
    if not _is_inexact(get_aval(x).dtype):
        return x
    return where(less(x, 0), lax.ceil(x), lax.floor(x))


fix = trunc


def round(a, decimals=0):  # noqa: A001 (numpy's name)
    """Round half to even (``jnp.round``), to ``decimals`` decimal places (a static int)."""
    a = _arr(a)
    dt = get_aval(a).dtype
    if not _is_inexact(dt):
        if decimals >= 0:
            return a
        raise errors.UnsupportedError("round of integers to negative decimals is not supported")
    if decimals == 0:
        return lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN)
    factor = _cast(10 ** decimals, dt)
    return _div_by_constant(lax.round(multiply(a, factor), lax.RoundingMethod.TO_NEAREST_EVEN), factor)


around = round


def square(x, /):
    """``x * x`` (``jnp.square``)."""
    x = _arr(x)
    if get_aval(x).dtype == np.bool_:
        x = _cast(x, _default_int())
    return lax.integer_pow(x, 2)


def reciprocal(x, /):
    """``1 / x`` (``jnp.reciprocal``), in floating point."""
    x, = _promote_inexact(_arr(x))
    return lax.div(_cast(1, get_aval(x).dtype), x)


def log2(x, /):
    """Base-2 logarithm, ``log(x) / log(2)`` as jax.numpy computes it (``jnp.log2``)."""
    x, = _promote_inexact(_arr(x))
    dt = get_aval(x).dtype
    return lax.div(lax.log(x), lax.log(_cast(2, dt)))


def log10(x, /):
    """Base-10 logarithm, ``log(x) / log(10)`` (``jnp.log10``)."""
    x, = _promote_inexact(_arr(x))
    dt = get_aval(x).dtype
    return lax.div(lax.log(x), lax.log(_cast(10, dt)))


def invert(x, /):
    """Bitwise not (``jnp.invert``/``bitwise_not``); logical not for bool."""
    x = _arr(x)
    _check_kind("invert", x, "biu")
    return lax.bitwise_not(x)


bitwise_not = bitwise_invert = invert


def isnan(x, /):
    """``x != x`` (``jnp.isnan``); always False for integers and bools."""
    x = _arr(x)
    if not _is_inexact(get_aval(x).dtype):
        return full_like(x, False, np.bool_)
    return lax.ne(x, x)


def isinf(x, /):
    """``|x| == inf`` (``jnp.isinf``)."""
    x = _arr(x)
    dt = get_aval(x).dtype
    if not _is_inexact(dt):
        return full_like(x, False, np.bool_)
    return lax.eq(lax.abs(x), _cast(np.inf, dt))


def signbit(x, /):
    """True where the sign bit is set, including -0.0 and negative NaNs (``jnp.signbit``)."""
    x = _arr(x)
    dt = get_aval(x).dtype
    if dt.kind == "i":
        return less(x, 0)
    if dt.kind in "bu":
        return full_like(x, False, np.bool_)
    int_dt = {2: np.int16, 4: np.int32, 8: np.int64}[dt.itemsize]
    return less(lax.bitcast_convert_type(x, int_dt), _cast(0, int_dt))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN by ``nan`` and ±inf by the largest finite values (``jnp.nan_to_num``)."""
    x = _arr(x)
    dt = get_aval(x).dtype
    if not _is_inexact(dt):
        return x
    info = finfo(dt)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = where(isnan(x), _cast(nan, dt), x)
    out = where(logical_and(isinf(out), greater(out, 0)), _cast(posinf, dt), out)
    return where(logical_and(isinf(out), less(out, 0)), _cast(neginf, dt), out)


def clip(arr, min=None, max=None):  # noqa: A002 (jax.numpy's signature)
    """``minimum(maximum(arr, min), max)`` (``jnp.clip``); NaN propagates."""
    arr = _arr(arr)
    if min is not None:
        arr = maximum(arr, min)
    if max is not None:
        arr = minimum(arr, max)
    return arr


def where(condition, x=None, y=None, /):
    """``x`` where ``condition`` else ``y``, broadcasting all three (``jnp.where``, 3-argument form)."""
    if x is None or y is None:
        raise errors.UnsupportedError("where(condition) with one argument has a data-dependent shape; "
                                      f"give x and y{_where_line()}")
    x, y = _promote_dtypes(_arr(x), _arr(y))
    cond = _as_bool(condition)
    shape = broadcast_shapes(*(get_aval(a).shape for a in (cond, x, y)))
    cond = broadcast_to(cond, shape) if get_aval(cond).shape != () else cond
    weak = get_aval(x).weak_type and get_aval(y).weak_type
    x, y = broadcast_to(x, shape), broadcast_to(y, shape)
    out = lax.select_n(cond, y, x)
    # (a broadcast weak constant is a plain array: put back the weak type JAX gives the result)
    return lax._convert_weak(out, get_aval(out).dtype, True) if weak and not get_aval(out).weak_type else out


def select(condlist, choicelist, default=0):
    """The first matching choice per element (``jnp.select``)."""
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        out = where(cond, choice, out)
    return out


# ---------------------------------------------------------------------------------------
# Array creation.

def asarray(a, dtype=None):
    """A tracer stays itself (converted to ``dtype`` if given); anything else becomes a numpy
    array with JAX's canonical dtype (float64 -> float32 unless x64 is on)."""
    if isinstance(a, Tracer):
        return a if dtype is None else astype(a, dtype)
    if isinstance(a, WeakScalar):
        a = a.value
    if isinstance(a, (list, tuple)) and builtins.any(isinstance(v, Tracer) for v in _flatten_list(a)):
        return stack([asarray(v, dtype) for v in a])
    arr = np.asarray(a)
    if dtype is None and _is_python_scalar(a):
        dtype = get_aval(a).dtype
    dtype = canonicalize_dtype(dtype if dtype is not None else arr.dtype)
    return _np_astype(arr, dtype)


def _flatten_list(a):
    for v in a:
        if isinstance(v, (list, tuple)):
            yield from _flatten_list(v)
        else:
            yield v


array = asarray


def astype(x, dtype):
    """Cast to ``dtype`` (``jnp.astype``): float -> int truncates and saturates, NaN -> 0."""
    x = _arr(x)
    if isinstance(x, WeakScalar) or _is_python_scalar(x):
        x = asarray(x)
    return lax.convert_element_type(x, dtype)


def _shape_arg(shape):
    return canonicalize_shape(shape)


def zeros(shape, dtype=None):
    """An array of zeros (``jnp.zeros``); the default dtype is the default float. Inside a trace
    (and so for every creation function here) the result is staged, like JAX's."""
    return lax.full(_shape_arg(shape), 0, canonicalize_dtype(dtype or _default_float()))


def ones(shape, dtype=None):
    """An array of ones (``jnp.ones``)."""
    return lax.full(_shape_arg(shape), 1, canonicalize_dtype(dtype or _default_float()))


empty = zeros


def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with ``fill_value`` (``jnp.full``); a traced fill value is broadcast."""
    shape = _shape_arg(shape)
    if isinstance(fill_value, Tracer):
        v = fill_value if dtype is None else astype(fill_value, dtype)
        return broadcast_to(v, shape)
    if dtype is None and _is_python_scalar(fill_value):
        # (lax.full gives the weak type JAX gives, and wraps a Python int into int32 as JAX
        # does here, without the OverflowError of arithmetic: full(2, 2**40) is [0, 0])
        return lax.full(shape, fill_value)
    dt = canonicalize_dtype(dtype) if dtype is not None else asarray(fill_value).dtype
    return lax.full(shape, _np_astype(np.asarray(fill_value), dt), dt)


def _like(x, dtype, shape):
    aval = get_aval(_arr(x))
    return (aval.shape if shape is None else _shape_arg(shape)), (aval.dtype if dtype is None else dtype)


def zeros_like(a, dtype=None, shape=None):
    """Zeros with ``a``'s shape and dtype (``jnp.zeros_like``)."""
    shape, dtype = _like(a, dtype, shape)
    return full_like(a, 0, dtype, shape)


def ones_like(a, dtype=None, shape=None):
    """Ones with ``a``'s shape and dtype (``jnp.ones_like``)."""
    shape, dtype = _like(a, dtype, shape)
    return full_like(a, 1, dtype, shape)


def full_like(a, fill_value, dtype=None, shape=None):
    """``fill_value`` with ``a``'s shape and dtype (``jnp.full_like``)."""
    shape, dtype = _like(a, dtype, shape)
    dtype = canonicalize_dtype(dtype)
    if isinstance(fill_value, Tracer):
        return lax.full(shape, fill_value, dtype)
    return lax.full(shape, _np_astype(np.asarray(fill_value), dtype), dtype)


def arange(start, stop=None, step=None, dtype=None):
    """``jnp.arange`` with static bounds: a constant, computed by JAX so values and dtype match."""
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise errors.ConcretizationTypeError(f"arange needs static (non-traced) bounds{_where_line()}")
    return lax.stage_constant(np.asarray(_jnp.arange(start, stop, step, dtype=dtype)))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """``jnp.linspace`` with static arguments: a constant, computed by JAX so the values match."""
    out = _jnp.linspace(start, stop, num, endpoint=endpoint, retstep=retstep, dtype=dtype, axis=axis)
    if retstep:
        return lax.stage_constant(np.asarray(out[0])), np.asarray(out[1])
    return lax.stage_constant(np.asarray(out))


def eye(N, M=None, k=0, dtype=None):
    """Identity-like matrix (``jnp.eye``), a constant."""
    return lax.stage_constant(np.asarray(_jnp.eye(N, M, k, dtype=dtype)))


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    return lax.stage_constant(np.asarray(_jnp.tri(N, M, k, dtype=dtype)))


# ---------------------------------------------------------------------------------------
# Reductions.

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


def _keepdims(out, x_shape, axes):
    return reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x_shape)))


def _upcast_f16(dt):
    return np.dtype(np.float32) if np.dtype(dt) in (np.dtype(np.float16), np.dtype(bfloat16)) else np.dtype(dt)


def _sum_like(lax_fn, name, identity):
    def fn(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
        if where is not None or out is not None:
            raise errors.UnsupportedError(f"{name}: where= and out= are not supported")
        a = _arr(a)
        if not isinstance(a, Tracer):
            a = asarray(a)
        aval = get_aval(a)
        axes = _canon_axes(axis, aval.ndim)
        if dtype is None:
            dt = aval.dtype
            if dt == np.bool_:
                dt = _default_int()
            elif dt.kind == "i" and dt.itemsize < _default_int().itemsize:
                dt = _default_int()
            elif dt.kind == "u" and dt.itemsize < _default_int().itemsize:
                dt = canonicalize_dtype(np.uint64)
        else:
            dt = canonicalize_dtype(dtype)
        comp = _upcast_f16(dt)
        x = _cast(a, comp) if aval.dtype != comp else a
        r = lax_fn(x, axes)
        if initial is not None:
            r = (add if name == "sum" else multiply)(r, _cast(initial, comp))
        r = _cast(r, dt) if comp != dt else r
        return _keepdims(r, aval.shape, axes) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"``jnp.{name}(a, axis=None, dtype=None, keepdims=False, initial=None)``: bool and "
                  f"small integers accumulate in the default integer type, f16/bf16 in f32; "
                  f"an empty extent gives {identity}.")
    return fn


sum = _sum_like(lax.reduce_sum, "sum", 0)
prod = _sum_like(lax.reduce_prod, "prod", 1)


def _minmax(lax_fn, name):
    def fn(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        if where is not None or out is not None:
            raise errors.UnsupportedError(f"{name}: where= and out= are not supported")
        a = _arr(a)
        if not isinstance(a, Tracer):
            a = asarray(a)
        aval = get_aval(a)
        axes = _canon_axes(axis, aval.ndim)
        if initial is None and builtins.any(aval.shape[i] == 0 for i in axes):
            raise errors.ShapeError(f"zero-size array to reduction operation {name} which has no "
                                    f"identity (shape {aval.shape}, axis {axis}){_where_line()}")
        r = lax_fn(a, axes)
        if initial is not None:
            r = (maximum if name == "max" else minimum)(r, initial)
        return _keepdims(r, aval.shape, axes) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"``jnp.{name}``: NaN-propagating; an empty extent needs ``initial`` "
                  "(else ShapeError, as NumPy/JAX raise).")
    return fn


max = amax = _minmax(lax.reduce_max, "max")
min = amin = _minmax(lax.reduce_min, "min")


def _bool_reduction(lax_fn, name):
    def fn(a, axis=None, out=None, keepdims=False, where=None):
        a = _as_bool(_arr(a) if isinstance(a, Tracer) else asarray(a))
        aval = get_aval(a)
        axes = _canon_axes(axis, aval.ndim)
        r = lax_fn(a, axes)
        return _keepdims(r, aval.shape, axes) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = f"``jnp.{name}``: the truth values reduced over ``axis``."
    return fn


all = _bool_reduction(lax.reduce_and, "all")  # noqa: A001
any = _bool_reduction(lax.reduce_or, "any")  # noqa: A001


def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """Arithmetic mean (``jnp.mean``): integers average in the default float, f16/bf16 in f32."""
    a = _arr(a) if isinstance(a, Tracer) else asarray(a)
    aval = get_aval(a)
    axes = _canon_axes(axis, aval.ndim)
    n = math.prod(aval.shape[i] for i in axes)
    if dtype is None:
        dt = aval.dtype if _is_inexact(aval.dtype) else _default_float()
    else:
        dt = canonicalize_dtype(dtype)
    comp = _upcast_f16(dt)
    s = sum(a, axes, dtype=comp, keepdims=keepdims)
    return _cast(_div_by_constant(s, n), dt)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, correction=None):
    """Variance ``sum((a - mean)**2) / (n - ddof)`` (``jnp.var``), NaN when ``n - ddof <= 0``."""
    a = _arr(a) if isinstance(a, Tracer) else asarray(a)
    correction = ddof if correction is None else correction
    aval = get_aval(a)
    axes = _canon_axes(axis, aval.ndim)
    if dtype is None:
        dt = aval.dtype if _is_inexact(aval.dtype) else _default_float()
    else:
        dt = canonicalize_dtype(dtype)
    comp = _upcast_f16(dt)
    a = _cast(a, comp)
    a_mean = mean(a, axes, dtype=comp, keepdims=True)
    centered = lax.integer_pow(subtract(a, a_mean), 2)
    n = math.prod(aval.shape[i] for i in axes)
    result = _div_by_constant(sum(centered, axes, dtype=comp, keepdims=keepdims), n - correction)
    result = _cast(result, dt)
    return result if n - correction > 0 else full_like(result, np.nan, dt)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, correction=None):
    """Standard deviation, ``sqrt(var)`` (``jnp.std``)."""
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where, correction))


def _argminmax(lax_fn, name):
    def fn(a, axis=None, out=None, keepdims=False):
        a = _arr(a) if isinstance(a, Tracer) else asarray(a)
        aval = get_aval(a)
        if axis is None:
            if aval.size == 0:
                raise errors.ShapeError(f"attempt to get {name} of an empty sequence{_where_line()}")
            r = lax_fn(ravel(a), 0, _default_int())
            return reshape(r, (1,) * aval.ndim) if keepdims else r
        ax = _canon_axis1(axis, aval.ndim)
        if aval.shape[ax] == 0:
            raise errors.ShapeError(f"attempt to get {name} of an empty sequence (shape {aval.shape}, "
                                    f"axis {axis}){_where_line()}")
        r = lax_fn(a, ax, _default_int())
        return _keepdims(r, aval.shape, (ax,)) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"``jnp.{name}``: index of the first extreme value (int32); the first NaN wins. "
                  "Raises ShapeError (a ValueError) for an empty array, like JAX.")
    return fn


argmax = _argminmax(lax.argmax, "argmax")
argmin = _argminmax(lax.argmin, "argmin")


def _cumulative(lax_fn, name):
    def fn(a, axis=None, dtype=None):
        a = _arr(a) if isinstance(a, Tracer) else asarray(a)
        if axis is None:
            a, axis = ravel(a), 0
        aval = get_aval(a)
        ax = _canon_axis1(axis, aval.ndim)
        dt = canonicalize_dtype(dtype) if dtype is not None else (
            _default_int() if aval.dtype == np.bool_ else aval.dtype)
        comp = _upcast_f16(dt) if name in ("cumsum", "cumprod") else dt
        a = _cast(a, comp)
        if aval.ndim == 0:
            a, ax = reshape(a, (1,)), 0
        return _cast(lax_fn(a, ax), dt)
    fn.__name__ = name
    fn.__doc__ = f"``jnp.{name}(a, axis=None, dtype=None)``: inclusive scan (flattened if axis is None)."
    return fn


cumsum = _cumulative(lax.cumsum, "cumsum")
cumprod = _cumulative(lax.cumprod, "cumprod")


# ---------------------------------------------------------------------------------------
# Shape manipulation.

def reshape(a, newshape=None, order="C", *, shape=None):
    """Row-major reshape with one ``-1`` allowed (``jnp.reshape``)."""
    a = _arr(a)
    if isinstance(a, WeakScalar) or _is_python_scalar(a):
        a = asarray(a)
    newshape = shape if shape is not None else newshape
    if order != "C":
        raise errors.UnsupportedError("reshape supports only order='C'")
    aval = get_aval(a)
    newshape = (newshape,) if isinstance(newshape, (int, np.integer)) else tuple(int(d) for d in newshape)
    if newshape.count(-1) > 1:
        raise errors.ShapeError(f"can only specify one unknown dimension (-1) in reshape{_where_line()}")
    if -1 in newshape:
        known = math.prod(d for d in newshape if d != -1)
        if known == 0 or aval.size % known:
            raise errors.ShapeError(f"cannot reshape array of shape {aval.shape} into shape {newshape}"
                                    f"{_where_line()}")
        newshape = tuple(aval.size // known if d == -1 else d for d in newshape)
    if aval.shape == newshape:
        return a
    return lax.reshape(a, newshape)


def ravel(a, order="C"):
    """Flatten in row-major order (``jnp.ravel``)."""
    return reshape(a, (-1,), order)


def transpose(a, axes=None):
    """Permute axes (``jnp.transpose``); default reverses them."""
    a = _arr(a)
    nd = get_aval(a).ndim
    if axes is None:
        axes = tuple(reversed(range(nd)))
    else:
        axes = tuple(_canon_axis1(int(x), nd) for x in axes)
        if sorted(axes) != list(range(nd)):
            raise errors.ShapeError(f"transpose axes {axes} are not a permutation of {nd} axes{_where_line()}")
    return lax.transpose(a, axes)


def swapaxes(a, axis1, axis2):
    """Exchange two axes (``jnp.swapaxes``)."""
    nd = get_aval(a).ndim
    perm = list(range(nd))
    i, j = _canon_axis1(axis1, nd), _canon_axis1(axis2, nd)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def moveaxis(a, source, destination):
    """Move axes to new positions (``jnp.moveaxis``)."""
    nd = get_aval(a).ndim
    src = [_canon_axis1(s, nd) for s in ((source,) if isinstance(source, int) else source)]
    dst = [_canon_axis1(d, nd) for d in ((destination,) if isinstance(destination, int) else destination)]
    if len(src) != len(dst):
        raise errors.ShapeError(f"moveaxis: source and destination need the same number of axes{_where_line()}")
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


def expand_dims(a, axis):
    """Insert size-1 axes at ``axis`` (``jnp.expand_dims``)."""
    a = _arr(a)
    shape = list(get_aval(a).shape)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = len(shape) + len(axes)
    for ax in sorted(_canon_axis1(x, nd) for x in axes):
        shape.insert(ax, 1)
    return reshape(a, shape)


def squeeze(a, axis=None):
    """Remove size-1 axes (``jnp.squeeze``); ShapeError for an axis whose size is not 1."""
    a = _arr(a)
    shape = get_aval(a).shape
    axes = [i for i, d in enumerate(shape) if d == 1] if axis is None else _canon_axes(axis, len(shape))
    for i in axes:
        if shape[i] != 1:
            raise errors.ShapeError(f"cannot select an axis to squeeze out which has size not equal to "
                                    f"one (axis {i} of shape {shape}){_where_line()}")
    return reshape(a, [d for i, d in enumerate(shape) if i not in axes])


def atleast_1d(a):
    a = _arr(a)
    return reshape(a, (1,)) if get_aval(a).ndim == 0 else a


def atleast_2d(a):
    a = atleast_1d(a)
    return reshape(a, (1,) + get_aval(a).shape) if get_aval(a).ndim == 1 else a


def concatenate(arrays, axis=0, dtype=None):
    """Join arrays along ``axis`` (``jnp.concatenate``); ``axis=None`` flattens them first."""
    arrays = [_arr(a) for a in arrays]
    if not arrays:
        raise errors.ShapeError(f"need at least one array to concatenate{_where_line()}")
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    arrays = _promote_dtypes(*arrays)
    if dtype is not None:
        arrays = [astype(a, dtype) for a in arrays]
    arrays = [asarray(a) if not isinstance(a, Tracer) else a for a in arrays]
    nd = get_aval(arrays[0]).ndim
    if nd == 0:
        raise errors.ShapeError(f"zero-dimensional arrays cannot be concatenated{_where_line()}")
    return lax.concatenate(arrays, _canon_axis1(axis, nd))


def stack(arrays, axis=0, dtype=None):
    """Join arrays along a new ``axis`` (``jnp.stack``)."""
    arrays = [_arr(a) for a in arrays]
    if not arrays:
        raise errors.ShapeError(f"need at least one array to stack{_where_line()}")
    shapes = {get_aval(a).shape for a in arrays}
    if len(shapes) != 1:
        raise errors.ShapeError(f"all input arrays must have the same shape, got {sorted(shapes)}{_where_line()}")
    nd = get_aval(arrays[0]).ndim + 1
    ax = _canon_axis1(axis, nd)
    return concatenate([expand_dims(a, ax) for a in arrays], ax, dtype)


def hstack(arrays):
    arrays = [atleast_1d(a) for a in arrays]
    return concatenate(arrays, 0 if get_aval(arrays[0]).ndim == 1 else 1)


def vstack(arrays):
    return concatenate([atleast_2d(a) for a in arrays], 0)


def split(ary, indices_or_sections, axis=0):
    """Split into pieces along ``axis`` (``jnp.split``): a section count or static split points."""
    ary = _arr(ary)
    shape = get_aval(ary).shape
    ax = _canon_axis1(axis, len(shape))
    n = shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise errors.ShapeError(f"array split does not result in an equal division: {n} into {k}"
                                    f"{_where_line()}")
        points = [n // k * i for i in range(1, k)]
    else:
        points = [int(p) for p in indices_or_sections]
    bounds = [0] + [builtins.min(builtins.max(p, 0), n) for p in points] + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        start = [0] * len(shape)
        limit = list(shape)
        start[ax], limit[ax] = lo, builtins.max(lo, hi)
        out.append(lax.slice(ary, start, limit))
    return out


def array_split(ary, sections, axis=0):
    n = get_aval(ary).shape[_canon_axis1(axis, get_aval(ary).ndim)]
    q, r = builtins.divmod(n, sections)
    points, acc = [], 0
    for i in range(sections - 1):
        acc += q + (1 if i < r else 0)
        points.append(acc)
    return split(ary, points, axis)


def flip(m, axis=None):
    """Reverse the order of elements along ``axis`` (``jnp.flip``)."""
    m = _arr(m)
    nd = get_aval(m).ndim
    return lax.rev(m, _canon_axes(axis, nd))


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def pad(array, pad_width, mode="constant", constant_values=0):
    """Pad with a constant (``jnp.pad``, ``mode='constant'``); ``pad_width`` as in NumPy."""
    array = _arr(array)
    if mode != "constant":
        raise errors.UnsupportedError(f"pad mode '{mode}' is not supported (only 'constant')")
    nd = get_aval(array).ndim
    pw = np.asarray(pad_width, dtype=np.int64)
    if pw.ndim == 0:
        pw = np.full((nd, 2), int(pw))
    elif pw.shape == (2,) or pw.shape == (1, 2):
        pw = np.tile(pw.reshape(1, 2), (nd, 1))
    elif pw.shape == (1,):
        pw = np.full((nd, 2), int(pw[0]))
    if pw.shape != (nd, 2) or (pw < 0).any():
        raise errors.ShapeError(f"pad_width {pad_width!r} must be non-negative (before, after) pairs "
                                f"for each of {nd} dims{_where_line()}")
    dt = get_aval(array).dtype
    value = _cast(constant_values, dt) if not isinstance(constant_values, Tracer) else astype(constant_values, dt)
    return lax.pad(array, value, [(int(lo), int(hi), 0) for lo, hi in pw])


def tile(A, reps):
    """Repeat the whole array ``reps`` times per axis (``jnp.tile``)."""
    A = _arr(A)
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    shape = get_aval(A).shape
    nd = builtins.max(len(shape), len(reps))
    shape = (1,) * (nd - len(shape)) + shape
    reps = (1,) * (nd - len(reps)) + tuple(int(r) for r in reps)
    x = reshape(A, shape)
    # broadcast to (r0, d0, r1, d1, ...) then merge each pair.
    big = tuple(v for r, d in zip(reps, shape) for v in (r, d))
    x = lax.broadcast_in_dim(x, big, tuple(range(1, 2 * nd, 2)))
    return reshape(x, [r * d for r, d in zip(reps, shape)])


def repeat(a, repeats, axis=None, total_repeat_length=None):
    """Repeat each element ``repeats`` times (``jnp.repeat``); ``repeats`` is a static int or list."""
    a = _arr(a)
    if axis is None:
        a, axis = ravel(a), 0
    shape = get_aval(a).shape
    ax = _canon_axis1(axis, len(shape))
    if isinstance(repeats, (int, np.integer)):
        r = int(repeats)
        x = expand_dims(a, ax + 1)
        big = list(get_aval(x).shape)
        big[ax + 1] = r
        x = broadcast_to(x, big)
        new = list(shape)
        new[ax] = shape[ax] * r
        return reshape(x, new)
    reps = np.asarray(repeats)
    if isinstance(repeats, Tracer) or reps.shape != (shape[ax],):
        raise errors.ShapeError(f"repeat: repeats must be a static int or a list of {shape[ax]} ints{_where_line()}")
    idx = np.repeat(np.arange(shape[ax]), reps)
    return take(a, idx, axis=ax)


def take(a, indices, axis=None, mode=None, fill_value=None, unique_indices=False,
         indices_are_sorted=False):
    """Elements at ``indices`` along ``axis`` (``jnp.take``; ``axis=None`` takes from the flat
    array), one XLA gather. Modes as JAX's: ``None``/``"fill"`` counts negative indices from the
    end (in the indices' dtype; unsigned ones are never negative) and gives ``fill_value`` for
    the others out of range (default: NaN for floats, the minimum of a signed and the maximum of
    an unsigned int, True for bool); ``"clip"`` clamps (negatives to 0, they do not wrap);
    ``"wrap"`` takes the index modulo the axis size. Raises ``ValueError`` for another mode or
    non-integer indices, ``IndexError`` for a non-empty take from an empty axis."""
    a = _arr(a)
    idx = _canonical_index(indices)
    idt = get_aval(idx).dtype
    if idt.kind not in "iub":
        raise ValueError(f"take: indices must have an integer type, got {idt.name}{_where_line()}")
    if idt == np.bool_:
        idx = _cast(idx, np.int32)
    if axis is None:
        a, axis = ravel(a), 0
    aval = get_aval(a)
    ax = _canon_axis1(axis, aval.ndim)
    n = aval.shape[ax]
    if mode is None or mode == "fill":
        gmode = lax.GatherScatterMode.FILL_OR_DROP
        idx = _count_from_end(idx, n)
    elif mode == "raise":
        raise errors.UnsupportedError(f"take: mode='raise' is not supported (as in JAX){_where_line()}")
    elif mode == "wrap":
        idx = remainder(idx, _cast(n, get_aval(idx).dtype)) if n else idx
        gmode = lax.GatherScatterMode.PROMISE_IN_BOUNDS
    elif mode == "clip":
        gmode = lax.GatherScatterMode.CLIP
    else:
        raise ValueError(f"Invalid mode '{mode}' for np.take{_where_line()}")
    ishape = get_aval(idx).shape
    if n == 0:
        if math.prod(ishape):
            raise IndexError(f"Cannot do a non-empty jnp.take() from an empty axis.{_where_line()}")
        return a
    out_shape = aval.shape[:ax] + ishape + aval.shape[ax + 1:]
    if math.prod(ishape) == 0:
        return zeros(out_shape, aval.dtype)
    nd = len(ishape)
    dn = lax.GatherDimensionNumbers(
        offset_dims=tuple(range(ax)) + tuple(range(ax + nd, aval.ndim + nd - 1)),
        collapsed_slice_dims=(ax,), start_index_map=(ax,))
    sizes = list(aval.shape)
    sizes[ax] = 1
    return lax.gather(a, reshape(idx, ishape + (1,)), dn, sizes, mode=gmode,
                      fill_value=fill_value if gmode is lax.GatherScatterMode.FILL_OR_DROP else None)


def take_along_axis(arr, indices, axis, mode=None, fill_value=None):
    """``jnp.take_along_axis``: ``arr`` indexed along ``axis`` by ``indices`` of the same rank
    (their other dims broadcast against ``arr``'s), one XLA gather. As JAX: unless
    ``mode="promise_in_bounds"`` the indices are first converted to int32 (int64 for a huge
    axis) and negative ones counted from the end; then ``mode`` ``None``/``"fill"`` gives
    ``fill_value`` (NaN for floats, see ``take``) out of range and ``"clip"`` clamps. An empty
    axis gives zeros. Raises ``TypeError`` for non-integer indices, ``ValueError`` for a rank
    mismatch."""
    arr = _arr(arr)
    idx = _canonical_index(indices)
    idt = get_aval(idx).dtype
    if idt.kind not in "iu":
        raise errors.DTypeError(f"take_along_axis indices must be of integer type, got {idt.name}"
                                f"{_where_line()}")
    if axis is None:
        if get_aval(idx).ndim != 1:
            raise errors.ShapeError(f"take_along_axis: when axis=None, indices must have a single "
                                    f"dimension, got {get_aval(idx).shape}{_where_line()}")
        arr, axis = ravel(arr), 0
    shape = get_aval(arr).shape
    ax = _canon_axis1(axis, len(shape))
    ishape = get_aval(idx).shape
    if len(ishape) != len(shape):
        raise errors.ShapeError(f"take_along_axis: indices rank {len(ishape)} != array rank {len(shape)}{_where_line()}")
    arr_shape = tuple(1 if i == ax else d for i, d in enumerate(shape))
    try:
        out_shape = broadcast_shapes(ishape, arr_shape)
    except errors.ShapeError as e:
        raise errors.ShapeError(f"take_along_axis: {e.args[0]}{_where_line()}") from None
    n = shape[ax]
    if n == 0:
        return zeros(out_shape, get_aval(arr).dtype)
    itype = _index_dtype((n,))
    if mode == "promise_in_bounds":
        # XLA clamps; clamping first in the indices' own dtype keeps that (a uint32 index
        # >= 2**31 is large, not negative) when they join the int32 iotas below.
        idx = _clamp_in_dtype(idx, n)
    else:
        idx = _count_from_end(_cast(idx, itype), n)
    gmode = lax.GatherScatterMode.from_any("fill" if mode is None else mode)
    parts = []
    for d in range(len(shape)):
        if d == ax:
            part = broadcast_to(_cast(idx, itype), out_shape)
        elif shape[d] == 1:  # broadcast against the indices: always row 0
            part = np.zeros(out_shape, itype)
        else:
            part = lax.broadcasted_iota(itype, out_shape, d)
        parts.append(reshape(part, out_shape + (1,)))
    gidx = parts[0] if len(parts) == 1 else concatenate(parts, axis=-1)
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(len(shape))),
                                    start_index_map=tuple(range(len(shape))))
    return lax.gather(arr, gidx, dn, [1] * len(shape), mode=gmode,
                      fill_value=fill_value if gmode is lax.GatherScatterMode.FILL_OR_DROP else None)


def _canonical_index(idx):
    """A static index array in the dtype ``jnp.take`` converts it to first (int64 -> int32
    without x64, wrapping); a tracer is already canonical. (``x[idx]`` counts a NumPy index
    from the end before it converts, so it does not use this.)"""
    if isinstance(idx, Tracer):
        return idx
    idx = np.asarray(idx)
    return _cast(idx, canonicalize_dtype(idx.dtype)) if idx.dtype != np.bool_ else idx


def _index_dtype(shape):
    """The signed index dtype JAX converts gather indices into ``shape`` to (int32, or int64
    for a dim past int32's range)."""
    big = builtins.any(d > np.iinfo(np.int32).max for d in shape)
    return canonicalize_dtype(np.int64 if big else np.int32)


def _count_from_end(idx, n, strict=False):
    """JAX's ``_normalize_index``: ``idx + n`` where ``idx < 0``, computed in ``idx``'s dtype
    (wrapping); unsigned indices are returned unchanged. ``strict``: a size ``n`` that does not
    fit the dtype raises ``OverflowError``, as ``x[idx]`` does in JAX."""
    dt = get_aval(idx).dtype
    if dt.kind != "i":
        return idx
    if strict and n > np.iinfo(dt).max:
        raise OverflowError(f"Python integer {n} out of bounds for {dt.name}{_where_line()}")
    with np.errstate(all="ignore"):
        c = np.asarray(n).astype(dt)[()]
        if not isinstance(idx, Tracer):
            v = np.asarray(idx)
            return np.where(v < 0, v + c, v).astype(dt)
    return lax.select_n(lax.lt(idx, np.zeros((), dt)[()]), idx, lax.add(idx, c))


def _clamp_in_dtype(idx, n):
    """Indices clamped to ``[0, n - 1]`` in their own dtype (unsigned ones are never negative)."""
    dt = get_aval(idx).dtype
    hi = np.asarray(builtins.min(n - 1, np.iinfo(dt).max)).astype(dt)[()]
    if not isinstance(idx, Tracer):
        return np.clip(np.asarray(idx), 0, hi).astype(dt)
    out = lax.min(idx, hi)
    return lax.max(out, np.zeros((), dt)[()]) if dt.kind == "i" else out


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


def einsum(subscripts, *operands):
    """``jnp.einsum`` for explicit or implicit subscripts, evaluated left to right as
    ``dot_general`` (batch dims = indices in both operands that survive, contracting = indices
    shared and not in the output); sums of single-operand indices are reductions."""
    operands = list(_promote_dtypes(*[_arr(o) for o in operands]))
    subscripts = subscripts.replace(" ", "")
    if "..." in subscripts:
        raise errors.UnsupportedError("einsum with '...' is not supported")
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
    for spec, op in zip(ins, operands):
        shape = get_aval(op).shape
        if len(spec) != len(shape):
            raise errors.ShapeError(f"einsum: subscript '{spec}' does not match operand shape {shape}{_where_line()}")
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
        acc = lax.dot_general(acc, op, dn)
        acc_spec = "".join(batch + [c for c in acc_spec if c not in batch and c not in contract]
                           + [c for c in spec if c not in batch and c not in contract])
    acc, acc_spec = reduce_private(acc, acc_spec, set(out))
    if sorted(acc_spec) != sorted(out):
        raise errors.ShapeError(f"einsum: output '{out}' is not reachable from '{subscripts}'{_where_line()}")
    return transpose(acc, [acc_spec.index(c) for c in out]) if acc_spec != out else acc


# ---------------------------------------------------------------------------------------
# Indexing: x[idx] (basic and integer-array) and x.at[idx].set/add/... (static indices).

def _is_int_index(i):
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _normalize_index(idx, ndim):
    """Turn an index into a list of ('slice', s) / ('int', i) / ('none',) / ('adv', array) covering
    every dim; numpy bool masks become integer arrays (``nonzero``); lists become arrays."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    expanded = []
    for i in idx:
        if isinstance(i, list):
            i = np.asarray(i)
            if i.dtype == np.float64 and i.size == 0:
                i = i.astype(np.int32)
        if isinstance(i, Tracer) and i.dtype == np.bool_:
            raise IndexError("boolean indices must be concrete (a traced bool mask has a "
                             f"data-dependent shape); use where(mask, x, y) instead{_where_line()}")
        if isinstance(i, (np.ndarray, np.bool_)) and np.asarray(i).dtype == np.bool_:
            i = np.asarray(i)
            if i.ndim == 0:
                raise errors.UnsupportedError("a scalar boolean index is not supported")
            expanded.extend(("adv", nz) for nz in np.nonzero(i))
            continue
        if isinstance(i, (np.ndarray, Tracer)) and not (isinstance(i, np.ndarray) and i.ndim == 0
                                                       and i.dtype.kind in "iu"):
            if get_aval(i).dtype.kind not in "iu":
                raise IndexError(f"indices must be integers, slices, None, Ellipsis or integer arrays, "
                                 f"got an array of dtype {get_aval(i).dtype.name}{_where_line()}")
            expanded.append(("adv", i))
        elif isinstance(i, np.ndarray):
            expanded.append(("int", i[()]))
        elif i is None:
            expanded.append(("none",))
        elif i is Ellipsis:
            expanded.append(("ellipsis",))
        elif isinstance(i, builtins.slice):
            for part in (i.start, i.stop, i.step):
                if isinstance(part, Tracer):
                    raise errors.ConcretizationTypeError(
                        f"slice bounds must be static; use lax.dynamic_slice for traced starts{_where_line()}")
            expanded.append(("slice", i))
        elif _is_int_index(i):
            expanded.append(("int", i))  # (its dtype matters: unsigned ints never count from the end)
        else:
            raise IndexError(f"indices must be integers, slices, None, Ellipsis or integer arrays, "
                             f"got {type(i).__name__}{_where_line()}")
    n_ell = builtins.sum(e[0] == "ellipsis" for e in expanded)
    if n_ell > 1:
        raise IndexError(f"an index can only have a single ellipsis ('...'){_where_line()}")
    n_real = builtins.sum(e[0] in ("slice", "int", "adv") for e in expanded)
    if n_real > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {n_real} "
                         f"were indexed{_where_line()}")
    fill = [("slice", builtins.slice(None))] * (ndim - n_real)
    if n_ell:
        k = [e[0] for e in expanded].index("ellipsis")
        expanded = expanded[:k] + fill + expanded[k + 1:]
    else:
        expanded = expanded + fill
    if builtins.any(e[0] == "adv" for e in expanded):  # ints join the advanced indices (NumPy)
        expanded = [("adv", _int_index_array(e[1])) if e[0] == "int" else e for e in expanded]
    return expanded


def _int_index_array(i):
    """A static int index as the 0-d array JAX makes of it: a Python int is int32 (an
    ``OverflowError`` past its range, as in JAX), a NumPy integer keeps its dtype."""
    if isinstance(i, np.integer):
        return _cast(np.asarray(i), canonicalize_dtype(i.dtype))
    info = np.iinfo(_default_int())
    if not info.min <= int(i) <= info.max:
        raise OverflowError(f"Python int {int(i)} too large to convert to {np.dtype(_default_int()).name}"
                            f"{_where_line()}")
    return np.asarray(int(i), _default_int())


def _static_start(i, n, rank):
    """The start of a static int index ``i`` into a dim of size ``n`` (> 0), as JAX computes it:
    in range, counted from the end if negative; out of range, through JAX's dynamic-slice path,
    where the index keeps its dtype (unsigned ones never count from the end) for a rank-1
    operand and is converted to int32 for a higher rank; then clamped."""
    v = int(i)
    if -n <= v < n:
        return v + n if v < 0 else v
    a = _int_index_array(i)
    if rank > 1:
        a = _cast(a, _index_dtype((n,)))
    v = int(a)
    if a.dtype.kind == "i" and v < 0:
        v += n
    return builtins.min(builtins.max(v, 0), n - 1)


def _getitem(x, idx, mode=None, fill_value=None):
    """``x[idx]`` (and ``x.at[idx].get(mode, fill_value)``) with NumPy's indexing: ints (negative
    too), slices with any step, None, Ellipsis, integer arrays (static or traced; broadcast
    together, placed as NumPy places them) and concrete bool masks. Out-of-range indices follow
    JAX: ``mode=None`` (``"promise_in_bounds"``) or ``"clip"`` clamps, ``"fill"`` gives
    ``fill_value`` (NaN for floats, see ``take``). Negative indices count from the end, except
    unsigned ones; as in JAX, integer-array indices are converted to int32 after that (so a
    uint32 index >= 2**31 is out of range at the low end), and so are traced scalar indices of
    an operand of rank > 1. Indexing a size-0 axis raises IndexError."""
    x = _arr(x)
    shape = get_aval(x).shape
    entries = _normalize_index(idx, len(shape))
    fill = mode is not None and lax.GatherScatterMode.from_any(mode) is lax.GatherScatterMode.FILL_OR_DROP
    clip = mode is not None and lax.GatherScatterMode.from_any(mode) is lax.GatherScatterMode.CLIP
    if fill:  # JAX: only a gather can fill, so static ints join the gather's indices
        entries = [("adv", _int_index_array(e[1])) if e[0] == "int" else e for e in entries]
    adv = [e[1] for e in entries if e[0] == "adv"]
    if adv and not fill and builtins.all(get_aval(a).ndim == 0 for a in adv) and builtins.all(
            e[1].step in (None, 1, -1) for e in entries if e[0] == "slice"):
        return _dynamic_slice_getitem(x, shape, entries)
    starts, limits, strides, revs = [], [], [], []
    dim = 0
    for e in entries:
        if e[0] == "none":
            continue
        d = shape[dim]
        if e[0] == "slice":
            s, l, st = e[1].indices(d)
            if st == 0:
                raise errors.ShapeError(f"slice step cannot be zero{_where_line()}")
            if st > 0:
                n = len(range(s, l, st))
                starts.append(s), limits.append(s + (n - 1) * st + 1 if n else s), strides.append(st)
            else:
                n = len(range(s, l, st))
                # x[s:l:-k] = rev(x[s-(n-1)k : s+1 : k])
                lo = s - (n - 1) * (-st) if n else 0
                starts.append(lo), limits.append(s + 1 if n else 0), strides.append(-st)
                revs.append(dim)
        elif e[0] == "int":
            if d == 0:
                raise IndexError(f"index {e[1]} is out of bounds for axis {dim} with size 0{_where_line()}")
            if clip:
                v = int(e[1])
                i = builtins.min(builtins.max(v + d if v < 0 else v, 0), d - 1)
            else:
                i = _static_start(e[1], d, len(shape))
            starts.append(i), limits.append(i + 1), strides.append(1)
        else:  # advanced: keep the whole dim for the gather
            starts.append(0), limits.append(d), strides.append(1)
        dim += 1
    y = x
    if starts != [0] * len(shape) or limits != list(shape) or builtins.any(s != 1 for s in strides):
        y = lax.slice(x, starts, limits, strides)
    if revs:
        y = lax.rev(y, revs)
    yshape = get_aval(y).shape
    adv_pos = [k for k, e in enumerate(entries) if e[0] == "adv"]
    if not adv_pos:
        out_shape, dim = [], 0
        for e in entries:
            if e[0] == "none":
                out_shape.append(1)
                continue
            if e[0] == "slice":
                out_shape.append(yshape[dim])
            dim += 1
        return reshape(y, out_shape)
    mode = lax.GatherScatterMode.from_any(lax.GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode)
    return _advanced_getitem(y, yshape, entries, adv_pos, mode, fill_value)


def _dynamic_slice_getitem(x, shape, entries):
    """JAX's dynamic-slice path of ``x[idx]``: scalar (0-d) indices, slices of step 1 or -1, None.
    One ``dynamic_slice`` (which counts signed negative starts from the end and clamps); with
    more than one dim every start is converted to int32 first, as JAX does."""
    starts, sizes, revs, out_shape, dim = [], [], [], [], 0
    for e in entries:
        if e[0] == "none":
            out_shape.append(1)
            continue
        d = shape[dim]
        if e[0] == "slice":
            s, l, st = e[1].indices(d)
            n = len(range(s, l, st))
            if st < 0:
                s = s - n + 1 if n else 0
                revs.append(dim)
            starts.append(np.int32(s)), sizes.append(n), out_shape.append(n)
        else:
            if d == 0:
                raise IndexError(f"index is out of bounds for axis {dim} with size 0{_where_line()}")
            starts.append(e[1]), sizes.append(1)
        dim += 1
    if len(starts) > 1:
        starts = [_cast(i, _index_dtype(shape)) for i in starts]
    y = lax.dynamic_slice(x, starts, sizes)
    if revs:
        y = lax.rev(y, revs)
    return reshape(y, out_shape)


def _entry_dims(entries):
    """The operand dim of each non-None entry."""
    dims, dim = {}, 0
    for k, e in enumerate(entries):
        if e[0] != "none":
            dims[k] = dim
            dim += 1
    return dims


def _gather_indices(arrays, sizes, idx_dtype, bshape):
    """JAX's integer-array indices for a gather: each counted from the end where negative (in
    its own dtype; an unsigned one is never negative), converted to ``idx_dtype``, broadcast to
    ``bshape`` and stacked on a new last dim (the index vector). Static in, static out."""
    parts = []
    for a, n in zip(arrays, sizes):
        a = _cast(_count_from_end(a, n, strict=True), idx_dtype)
        a = np.broadcast_to(a, bshape) if not isinstance(a, Tracer) else broadcast_to(a, bshape)
        parts.append(a)
    if builtins.all(not isinstance(a, Tracer) for a in parts):
        return np.stack(parts, axis=-1).astype(idx_dtype)
    parts = [reshape(a, tuple(bshape) + (1,)) for a in parts]
    return parts[0] if len(parts) == 1 else concatenate(parts, axis=-1)


def _advanced_getitem(y, yshape, entries, adv_pos, mode, fill_value):
    edims = _entry_dims(entries)
    adv_dims = [edims[k] for k in adv_pos]
    rest_dims = [d for d in range(len(yshape)) if d not in adv_dims]
    arrays = [entries[k][1] for k in adv_pos]
    try:
        bshape = broadcast_shapes(*(get_aval(a).shape for a in arrays))
    except errors.ShapeError as err:
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together: "
                         f"{err.args[0]}{_where_line()}") from None
    if math.prod(yshape[d] for d in adv_dims) == 0:  # an empty axis: fine only if nothing is read
        return _empty_advanced_result(y, yshape, entries, adv_pos, bshape)
    # One gather whose index vector has a component per advanced dim (the start_index_map);
    # those dims collapse, the others are whole windows (offset dims after the batch dims).
    indices = _gather_indices(arrays, [yshape[d] for d in adv_dims], _index_dtype(yshape), bshape)
    nb = len(bshape)
    dn = lax.GatherDimensionNumbers(offset_dims=tuple(range(nb, nb + len(rest_dims))),
                                    collapsed_slice_dims=tuple(adv_dims), start_index_map=tuple(adv_dims))
    sizes = [1 if d in adv_dims else yshape[d] for d in range(len(yshape))]
    g = lax.gather(y, indices, dn, sizes, mode=mode,
                   fill_value=fill_value if mode is lax.GatherScatterMode.FILL_OR_DROP else None)
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    out_shape = []
    if adjacent:
        # The broadcast block goes where the first advanced index was (among the other dims).
        q = builtins.sum(1 for d in rest_dims if d < adv_dims[0])
        perm = list(range(nb, nb + q)) + list(range(nb)) + list(range(nb + q, nb + len(rest_dims)))
        g = lax.transpose(g, perm)
        seen = False
        dim = 0
        for k, e in enumerate(entries):
            if e[0] == "none":
                out_shape.append(1)
            elif e[0] == "adv":
                if not seen:
                    out_shape.extend(bshape)
                    seen = True
            else:
                out_shape.append(yshape[edims[k]])
    else:
        out_shape.extend(bshape)
        for k, e in enumerate(entries):
            if e[0] == "none":
                out_shape.append(1)
            elif e[0] == "slice":
                out_shape.append(yshape[edims[k]])
    return reshape(g, out_shape)


def _empty_advanced_result(y, yshape, entries, adv_pos, bshape):
    edims = _entry_dims(entries)
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    out_shape, seen = ([] if adjacent else list(bshape)), False
    for k, e in enumerate(entries):
        if e[0] == "none":
            out_shape.append(1)
        elif e[0] == "slice":
            out_shape.append(yshape[edims[k]])
        elif adjacent and not seen:
            out_shape.extend(bshape)
            seen = True
    if math.prod(out_shape):
        raise IndexError(f"index is out of bounds for an axis of size 0 (shape {yshape}){_where_line()}")
    # (a slice of y itself, so the result is traced like y: an empty array reshapes to any empty shape)
    empty = lax.slice(reshape(y, (-1,)), (0,), (0,))
    return reshape(empty, out_shape)


class _IndexUpdateHelper:
    """``x.at``: ``x.at[idx].set(v)`` etc. (``jax.numpy.ndarray.at``)."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, idx):
        return _IndexUpdateRef(self.array, idx)


class _IndexUpdateRef:
    """``x.at[idx]``: functional updates with static indices, as one XLA scatter.

    Indices follow NumPy indexing (ints, slices, None, Ellipsis, integer arrays, bool masks);
    they must be static (Python/NumPy values). As in JAX, negative indices count from the end
    (not unsigned ones), integer indices are then converted to int32, and ``mode`` says what
    happens to the others out of range: ``None``/``"drop"``/``"fill"`` and
    ``"promise_in_bounds"`` skip their updates, ``"clip"`` clamps them into range.
    With repeated indices, ``set`` keeps the last update and the others combine them all.
    ``get(mode=None, fill_value=None)`` is ``x[idx]`` with JAX's gather modes (see ``_getitem``).
    """
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None):
        return _getitem(self.array, self.index, mode=mode, fill_value=fill_value)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_static(self.array, self.index, values, lax.scatter, mode)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_static(self.array, self.index, values, lax.scatter_add, mode)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_static(self.array, self.index, values, lax.scatter_mul, mode)

    mul = multiply

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_static(self.array, self.index, values, lax.scatter_min, mode)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_static(self.array, self.index, values, lax.scatter_max, mode)


def _static_flat_positions(shape, idx, mode=None):
    """The flat position of every element ``x[idx]`` selects, as an int array of the result's
    shape; elements out of range get -1 (a scatter drops them), or, with ``mode="clip"``, are
    clamped into range. Integer indices are treated as JAX's scatter treats them (counted from
    the end where negative and signed, then converted to int32). NumPy does the indexing on a
    grid with one extra "out of range" slot per integer-indexed dim."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    for i in idx:
        if isinstance(i, Tracer) or (isinstance(i, builtins.slice) and builtins.any(
                isinstance(p, Tracer) for p in (i.start, i.stop, i.step))):
            raise errors.UnsupportedError(f"x.at[idx] needs static indices (not traced values){_where_line()}")
    clip = lax.GatherScatterMode.from_any(mode) is lax.GatherScatterMode.CLIP
    entries = _normalize_index(idx, len(shape))
    int_dims, dim = set(), 0
    for e in entries:
        if e[0] == "none":
            continue
        if e[0] in ("int", "adv"):
            int_dims.add(dim)
        dim += 1
    grid_shape = [n + 1 if d in int_dims else n for d, n in enumerate(shape)]
    grid = np.full(grid_shape, -1, np.int64)
    grid[tuple(builtins.slice(0, n) for n in shape)] = np.arange(math.prod(shape)).reshape(shape)
    new_idx, dim = [], 0
    for e in entries:
        if e[0] == "none":
            new_idx.append(None)
            continue
        n = shape[dim]
        if e[0] == "slice":
            new_idx.append(e[1])
        else:
            a = _int_index_array(e[1]) if e[0] == "int" else np.asarray(e[1])
            if e[0] == "int" and a.dtype.kind == "i":  # a Python-level count from the end, as JAX's
                v = int(e[1])
                a = _cast(np.asarray(v + n if v < 0 else v), a.dtype)
            else:
                a = _count_from_end(a, n, strict=True)
            v = np.asarray(_cast(a, _index_dtype(shape))).astype(np.int64)
            v = np.clip(v, 0, builtins.max(n - 1, 0)) if clip else np.where((v < 0) | (v >= n), n, v)
            new_idx.append(v if e[0] == "adv" else int(v))
        dim += 1
    return grid[tuple(new_idx)]


def _scatter_static(x, idx, values, scatter_fn, mode=None):
    x = _arr(x)
    aval = get_aval(x)
    pos = _static_flat_positions(aval.shape, idx, mode)
    # As jax.numpy: the update is computed in the promoted dtype of x and the values, and the
    # result converted back to x's dtype (uint8 x.at[i].min(-1.5) is 0, bool .min(-1.5) is True).
    x_out_dtype = aval.dtype
    if isinstance(values, int) and aval.dtype.kind in "iu" and (
            np.iinfo(aval.dtype).min <= values <= np.iinfo(aval.dtype).max):
        # (JAX converts a Python int that fits x's dtype straight to it here, without the
        # default-int OverflowError of arithmetic: uint32 x.at[0].set(2**31) is exact)
        values = _cast(values, aval.dtype, weak=True)
    x, values = _promote_dtypes(x, _arr(values))
    x = asarray(x) if not isinstance(x, Tracer) else x
    dt = get_aval(x).dtype
    if dt == np.bool_ and scatter_fn in (lax.scatter_add, lax.scatter_mul):
        raise errors.DTypeError(f"x.at[idx].{'add' if scatter_fn is lax.scatter_add else 'multiply'} "
                                f"does not accept dtype bool (as in JAX){_where_line()}")
    try:
        values = broadcast_to(values, pos.shape)
    except errors.ShapeError:
        raise errors.ShapeError(f"x.at[idx] update of shape {get_aval(values).shape} cannot be "
                                f"broadcast to the indexed shape {pos.shape}{_where_line()}") from None
    if not isinstance(values, Tracer):
        values = np.asarray(values)
    flat = reshape(x, (aval.size,))
    n = pos.size
    idx_dtype = np.int32 if aval.size < 2 ** 31 else np.int64
    indices = pos.reshape(n, 1).astype(idx_dtype)
    upd = reshape(values, (n,))
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    out = reshape(scatter_fn(flat, indices, upd, dn), aval.shape)
    return out if dt == x_out_dtype else astype(out, x_out_dtype)


# ---------------------------------------------------------------------------------------
# Misc.

def shape(a):
    return get_aval(_arr(a)).shape


def ndim(a):
    return get_aval(_arr(a)).ndim


def size(a, axis=None):
    s = get_aval(_arr(a)).shape
    return math.prod(s) if axis is None else s[axis]


def result_type(*args):
    """JAX's result dtype for ``args`` (``jnp.result_type``)."""
    return promote_types(*(get_aval(_arr(a)) for a in args))[0]


def can_cast(from_, to, casting="safe"):
    return np.can_cast(from_, to, casting)


def logaddexp(x1, x2, /):
    """``log(exp(x1) + exp(x2))`` without overflow (``jnp.logaddexp``), computed as JAX does:
    ``max + log1p(exp(-|x1 - x2|))``, or ``x1 + x2`` where the difference is NaN."""
    x1, x2 = _promote_inexact(_arr(x1), _arr(x2))
    x1, x2 = _full_shape(x1, x2)
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    return lax.select(lax.ne(delta, delta), lax.add(x1, x2),
                      lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta))))))


# ---------------------------------------------------------------------------------------
# Every public function is an API boundary: an error escaping it names the function, the
# shapes it was given and the user's line (``errors.api_boundary``). Keep this at the end.

def _at_operands(ref, *args, **kwargs):
    return (ref.array, *args), kwargs


errors.wrap_public_functions(globals(), extra=[("_getitem", "getitem")])
for _name in ("get", "set", "add", "multiply", "mul", "min", "max"):
    setattr(_IndexUpdateRef, _name, errors.api_boundary(getattr(_IndexUpdateRef, _name), f"at[].{_name}",
                                                        _at_operands))
del _name
