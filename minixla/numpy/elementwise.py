"""Elementwise functions, binary (``add`` ... ``power``) and unary (``exp`` ... ``clip``), and
``where``/``select``: promotion, broadcasting and dtype-kind checks around a ``lax`` op, in
the order of ops ``jax.numpy`` uses, so results are bit-identical.
"""
from __future__ import annotations

import math

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import WeakScalar, get_aval, promote_types
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import (
    _arr, _broadcast_args, _cast, _check_kind, _default_int, _full_shape, _is_inexact,
    _is_int_index, _is_python_scalar, _promote_dtypes, _promote_inexact, _where_line,
    bfloat16, broadcast_shapes, broadcast_to, finfo)
from minixla.numpy.creation import asarray, full_like


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
    bfloat16 is the exception: XLA:CPU widens bf16 arithmetic to float32 before simplifying, so
    the reciprocal is a float32 one and ``x1 * (1 / x2)`` is rounded to bf16 once (see
    ``_bf16_times_reciprocal``).
    """
    x1, x2 = _promote_inexact(_arr(x1), _arr(x2))
    out_shape = broadcast_shapes(get_aval(x1).shape, get_aval(x2).shape)
    if get_aval(x2).shape != out_shape and math.prod(out_shape) > 1:  # (XLA makes a one-element
        # broadcast a reshape, and then there is no broadcast divisor to rewrite)
        if get_aval(x1).dtype == _BF16:
            return _bf16_times_reciprocal(x1, x2)
        one = _cast(1, get_aval(x2).dtype, get_aval(x2).weak_type)
        return multiply(x1, lax.div(one, x2) if isinstance(x2, Tracer) else _reciprocal_const(x2))
    x1, x2 = _broadcast_args(x1, x2)
    return lax.div(x1, x2)


def _reciprocal_const(x):
    """1/x of a concrete divisor, rounded once in its own dtype, as XLA folds it."""
    r = _flushed_reciprocal(np.asarray(x))
    return WeakScalar(r[()]) if isinstance(x, WeakScalar) else (r[()] if r.ndim == 0 else r)


def _flushed_reciprocal(arr):
    """``1 / arr`` in ``arr``'s dtype with XLA:CPU's denormal flushing (an f32/f64/bf16
    subnormal divisor is a zero, ``1/1e-38`` is inf; a subnormal quotient is a zero): JAX eager
    computes it at run time (``jnp.true_divide`` is jitted, its operands are arguments), and
    XLA's constant folding of a closed-over divisor gives the same."""
    from minixla.hlo.evaluator import flush_denormals
    with np.errstate(all="ignore"):
        return flush_denormals((np.ones((), arr.dtype) / flush_denormals(arr)).astype(arr.dtype))


_BF16 = np.dtype(bfloat16)


def _bf16_times_reciprocal(x1, x2):
    """bf16 ``x1 / broadcast(x2)`` as XLA:CPU computes it (and so JAX eager, whose
    ``jnp.true_divide`` is jitted): bf16 ops are widened to float32 first (float normalization),
    then the simplifier rewrites the division into ``f32(x1) * (1 / f32(x2))``, and the product
    is rounded to bf16 once. Multiplying by a reciprocal rounded to bf16 instead is off by an ulp
    for a third of the values (``x / 3``: 1/3 is 0.333984375 in bf16)."""
    f32 = np.dtype(np.float32)
    weak = get_aval(x1).weak_type and get_aval(x2).weak_type
    if isinstance(x2, Tracer):
        inv = lax.div(_cast(1, f32), _cast(x2, f32))
    else:
        inv = _flushed_reciprocal(np.asarray(x2.value if isinstance(x2, WeakScalar) else x2).astype(f32))
        inv = inv[()] if inv.ndim == 0 else inv
    return _cast(multiply(_cast(x1, f32), inv), _BF16, weak)


divide = true_divide


def _div_by_constant(x, c, folded=True):
    """``x / c`` for a Python constant ``c``, in ``x``'s dtype, as JAX eager computes the
    ``lax.div(x, c)`` of a jitted ``jax.numpy`` function.

    ``folded=True`` (``mean``, ``round(x, decimals)``): the constant is part of that XLA program,
    and XLA's simplifier rewrites a float division by a constant into ``x * (1 / c)`` (``1 / c``
    rounded to the dtype, at most an ulp from the division) at every rank, a rank-0 ``x``
    included; a division by 1 is ``x`` itself. ``folded=False`` (``var``'s normalizer, which
    JAX passes into its jitted ``_var`` as a run-time value): the division is exact, by a
    full-shape ``c``.
    Integers divide, truncating. bf16 is widened to f32 before XLA simplifies (see
    ``_bf16_times_reciprocal``)."""
    aval = get_aval(x)
    dt = aval.dtype
    c = np.asarray(c).astype(dt)[()]
    if not _is_inexact(dt):
        return lax.div(*_broadcast_args(x, c))
    if not folded:  # (full-shape: a rank-0 NumPy constant is folded into JAX's eager div too)
        return lax.div(x, broadcast_to(c, aval.shape))
    if c == 1:
        return x
    if dt == _BF16:
        return _bf16_times_reciprocal(x, c)
    with np.errstate(divide="ignore"):
        inv = np.asarray(1, dt) / np.asarray(c, dt)
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
    (repeated multiplication, as in JAX); integer arrays use square-and-multiply; a float base
    with an integer exponent ``pow`` with that integer exponent (x's dtype, unpromoted, as
    jnp.power); other floats ``pow`` after promotion."""
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
    x2 = _arr(x2)
    if _is_inexact(get_aval(x1).dtype) and get_aval(x2).dtype.kind in "iu":
        # A float base with an integer array exponent keeps it an integer, as jnp.power does
        # (``0.9 ** step`` binds ``pow f32 i32``): its derivative in x is 0 where y == 0.
        return lax.pow(*_full_shape(x1, x2))
    x1, x2 = _promote_dtypes(x1, x2)
    if get_aval(x1).dtype == np.bool_:
        x1, x2 = _cast(x1, _default_int()), _cast(x2, _default_int())
    x1, x2 = _full_shape(x1, x2)
    dt = get_aval(x1).dtype
    if dt.kind in "iu":
        return _pow_int_int(x1, x2)
    return lax.pow(x1, x2)


def pow(x1, x2, /):  # noqa: A001 (jax.numpy's name)
    """Alias of ``power`` (``jnp.pow``, the Array API's name)."""
    return power(x1, x2)


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
arcsin = asin = _unary(lax.asin, "arcsin", float_only=True)
arccos = acos = _unary(lax.acos, "arccos", float_only=True)
arctan = atan = _unary(lax.atan, "arctan", float_only=True)
sinh = _unary(lax.sinh, "sinh", float_only=True)
cosh = _unary(lax.cosh, "cosh", float_only=True)
arcsinh = asinh = _unary(lax.asinh, "arcsinh", float_only=True)
arccosh = acosh = _unary(lax.acosh, "arccosh", float_only=True)
arctanh = atanh = _unary(lax.atanh, "arctanh", float_only=True)
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
    if dt == np.float16:  # (jax.numpy rounds f16 in f32: 10**decimals * x loses too much in f16)
        return _cast(round(_cast(a, np.float32), decimals), dt, get_aval(a).weak_type)
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
    """Base-2 logarithm (``jnp.log2``). jax.numpy writes ``log(x) / log(2.0)``; XLA folds the
    constant ``log(2.0)`` and rewrites the division by a constant into ``log(x) * (1 / log(2))``
    (any size, a scalar too), which is what JAX eager and jit return (bf16: widened to float32
    first, see ``_bf16_times_reciprocal``)."""
    x, = _promote_inexact(_arr(x))
    dt = get_aval(x).dtype
    ln2 = np.log(np.float32(2)).astype(dt) if dt != np.float64 else np.log(np.float64(2))
    if dt == _BF16:
        return _bf16_times_reciprocal(lax.log(x), ln2[()])
    return lax.mul(lax.log(x), _flushed_reciprocal(np.asarray(ln2))[()])


def log10(x, /):
    """Base-10 logarithm (``jnp.log10``): ``log(x) * (1 / log(10))``, the constant rounded to
    ``x``'s float dtype as jax.numpy writes it (not a division: bf16 ``log10(0.5)`` is -0.298828)."""
    x, = _promote_inexact(_arr(x))
    dt = get_aval(x).dtype
    return lax.mul(lax.log(x), np.asarray(0.4342944819032518, dt)[()])


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


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """``x`` where ``condition`` else ``y``, broadcasting all three (``jnp.where``); with
    ``condition`` alone, ``nonzero(condition, size=size, fill_value=fill_value)`` (under a
    transformation ``size`` must be given, as in JAX)."""
    if x is None and y is None:
        from minixla.numpy.setops import nonzero  # (a later layer: nonzero builds on where)
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        none = 1 if x is None else 2
        raise TypeError(f"where requires ndarray or scalar arguments, got <class 'NoneType'> at position "
                        f"{none}.{_where_line()}")
    if size is not None or fill_value is not None:
        raise ValueError("size and fill_value arguments cannot be used in three-term where function.")
    x, y = _promote_dtypes(_arr(x), _arr(y))
    cond = _as_bool(condition)
    shape = broadcast_shapes(*(get_aval(a).shape for a in (cond, x, y)))
    cond = broadcast_to(cond, shape) if get_aval(cond).shape != () else cond
    weak = get_aval(x).weak_type and get_aval(y).weak_type
    x, y = broadcast_to(x, shape), broadcast_to(y, shape)
    # As JAX: an empty result is the broadcast ``x`` itself, no select (so under vmap it is
    # batched only when ``x`` is, whatever ``condition`` and ``y`` are)
    out = x if 0 in shape else lax.select_n(cond, y, x)
    # (a broadcast weak constant is a plain array: put back the weak type JAX gives the result)
    return lax._convert_weak(out, get_aval(out).dtype, True) if weak and not get_aval(out).weak_type else out


def select(condlist, choicelist, default=0):
    """The first matching choice per element (``jnp.select``)."""
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        out = where(cond, choice, out)
    return out
