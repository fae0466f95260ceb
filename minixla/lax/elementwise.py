"""Elementwise primitives (unary, binary, comparisons, ``select_n``, ``clamp``, conversions)
and their ``jax.lax`` functions. A rank-0 operand combines with an array of any shape;
dtypes are never promoted (``minixla.numpy`` does that).
"""
from __future__ import annotations

import numpy as np
import jax

from minixla.core import errors
from minixla.core.avals import ShapedArray, canonicalize_dtype, get_aval
from minixla.core.tracing import Tracer
from minixla.lax.base import _ANY, _FLT, _NUM, _int_kinds, _is_float, _jax_impl, _scalar_like, _std_prim


# ---------------------------------------------------------------------------------------
# Elementwise primitives.

def _unary_rule(kinds, opname):
    def rule(x, **_):
        if not (x.dtype.kind in kinds or ("f" in kinds and _is_float(x.dtype))):
            raise errors.DTypeError(f"{opname} does not accept dtype {x.dtype.name}")
        return x
    return rule


def _broadcast_shapes(*avals):
    shapes = {a.shape for a in avals if a.shape != ()}
    if len(shapes) > 1:
        raise errors.ShapeError(
            "lax ops need operands of equal shapes (or rank-0 operands); got "
            + ", ".join(str(a.shape) for a in avals)
            + ". Use minixla.numpy for NumPy-style broadcasting")
    return shapes.pop() if shapes else ()


def _binary_rule(kinds, opname, out_dtype=None):
    def rule(x, y, **_):
        if x.dtype != y.dtype:
            raise errors.DTypeError(
                f"{opname} requires arguments to have the same dtypes, got {x.dtype.name}, {y.dtype.name}")
        ok = x.dtype.kind in kinds or ("f" in kinds and _is_float(x.dtype))
        if not ok:
            raise errors.DTypeError(f"{opname} does not accept dtype {x.dtype.name}")
        shape = _broadcast_shapes(x, y)
        dtype = np.dtype(out_dtype) if out_dtype else x.dtype
        # (a comparison of two weak operands is a weak bool, as JAX's standard weak-type rule)
        return ShapedArray(shape, dtype, weak_type=x.weak_type and y.weak_type)
    return rule


neg_p = _std_prim("neg", _unary_rule(_NUM, "neg"))
abs_p = _std_prim("abs", _unary_rule(_NUM, "abs"))
sign_p = _std_prim("sign", _unary_rule(_NUM, "sign"))
floor_p = _std_prim("floor", _unary_rule(_FLT, "floor"))
ceil_p = _std_prim("ceil", _unary_rule(_FLT, "ceil"))
exp_p = _std_prim("exp", _unary_rule(_FLT, "exp"))
log_p = _std_prim("log", _unary_rule(_FLT, "log"))
tanh_p = _std_prim("tanh", _unary_rule(_FLT, "tanh"))
logistic_p = _std_prim("logistic", _unary_rule(_FLT, "logistic"))
sqrt_p = _std_prim("sqrt", _unary_rule(_FLT, "sqrt"))
rsqrt_p = _std_prim("rsqrt", _unary_rule(_FLT, "rsqrt"))
not_p = _std_prim("not", _unary_rule("iub", "not"), impl=_jax_impl("bitwise_not"))

add_p = _std_prim("add", _binary_rule(_NUM, "add"))
#: JAX's ``add_any`` (``add_jaxvals_p``): the sum of two tangents or cotangents, which JVP rules
#: and the backward pass use to accumulate them (``make_jaxpr(grad(f))`` prints it); an ``add``
#: in HLO. Linear, as ``add``; equal shapes and dtypes (the same variable's tangents).
add_any_p = _std_prim("add_any", _binary_rule(_NUM, "add_any"), impl=_jax_impl("add"))
sub_p = _std_prim("sub", _binary_rule(_NUM, "sub"))
mul_p = _std_prim("mul", _binary_rule(_NUM, "mul"))
div_p = _std_prim("div", _binary_rule(_NUM, "div"))
max_p = _std_prim("max", _binary_rule(_ANY, "max"))
min_p = _std_prim("min", _binary_rule(_ANY, "min"))
and_p = _std_prim("and", _binary_rule("iub", "and"), impl=_jax_impl("bitwise_and"))
or_p = _std_prim("or", _binary_rule("iub", "or"), impl=_jax_impl("bitwise_or"))

eq_p = _std_prim("eq", _binary_rule(_ANY, "eq", np.bool_))
ne_p = _std_prim("ne", _binary_rule(_ANY, "ne", np.bool_))
lt_p = _std_prim("lt", _binary_rule(_ANY, "lt", np.bool_))
le_p = _std_prim("le", _binary_rule(_ANY, "le", np.bool_))
gt_p = _std_prim("gt", _binary_rule(_ANY, "gt", np.bool_))
ge_p = _std_prim("ge", _binary_rule(_ANY, "ge", np.bool_))


def _integer_pow_rule(x, *, y):
    if not isinstance(y, int):
        raise errors.DTypeError(f"integer_pow exponent must be a Python int, got {y!r}")
    if y < 0 and x.dtype.kind in _int_kinds:
        raise errors.DTypeError("integer_pow: negative exponent of an integer array")
    return _unary_rule(_NUM, "integer_pow")(x)


integer_pow_p = _std_prim("integer_pow", _integer_pow_rule)


def _select_n_rule(which, *cases):
    if not cases:
        raise errors.ShapeError("select_n needs at least one case")
    if which.dtype != np.bool_ and which.dtype.kind not in _int_kinds:
        raise errors.DTypeError(f"select_n selector must be bool or integer, got {which.dtype.name}")
    if which.dtype == np.bool_ and len(cases) > 2:
        raise errors.ShapeError("select_n with a bool selector takes at most 2 cases")
    if any(c.shape != cases[0].shape or c.dtype != cases[0].dtype for c in cases):
        raise errors.ShapeError("select_n cases must have the same shapes and dtypes, got "
                                + ", ".join(c.str_short() for c in cases))
    if which.shape not in ((), cases[0].shape):
        raise errors.ShapeError(f"select_n selector shape {which.shape} must be () or {cases[0].shape}")
    return ShapedArray(cases[0].shape, cases[0].dtype, all(c.weak_type for c in cases))


select_n_p = _std_prim("select_n", _select_n_rule)


def _convert_rule(x, *, new_dtype, weak_type=False):
    return ShapedArray(x.shape, new_dtype, weak_type)


convert_element_type_p = _std_prim(
    "convert_element_type", _convert_rule,
    impl=lambda x, *, new_dtype, weak_type=False: np.asarray(jax.lax.convert_element_type(x, new_dtype)))


# --- more unary and binary ops ------------------------------------------------------

exp2_p = _std_prim("exp2", _unary_rule(_FLT, "exp2"))
expm1_p = _std_prim("expm1", _unary_rule(_FLT, "expm1"))
log1p_p = _std_prim("log1p", _unary_rule(_FLT, "log1p"))
cbrt_p = _std_prim("cbrt", _unary_rule(_FLT, "cbrt"))
sin_p = _std_prim("sin", _unary_rule(_FLT, "sin"))
cos_p = _std_prim("cos", _unary_rule(_FLT, "cos"))
tan_p = _std_prim("tan", _unary_rule(_FLT, "tan"))
erf_p = _std_prim("erf", _unary_rule(_FLT, "erf"))
erfc_p = _std_prim("erfc", _unary_rule(_FLT, "erfc"))

# inverse trigonometric and hyperbolic functions (jax.lax's asin_p ... atanh_p); their lowering
# is XLA's decomposition of the CHLO op into plain HLO (hlo/lowering.py)
asin_p = _std_prim("asin", _unary_rule(_FLT, "asin"))
acos_p = _std_prim("acos", _unary_rule(_FLT, "acos"))
atan_p = _std_prim("atan", _unary_rule(_FLT, "atan"))
sinh_p = _std_prim("sinh", _unary_rule(_FLT, "sinh"))
cosh_p = _std_prim("cosh", _unary_rule(_FLT, "cosh"))
asinh_p = _std_prim("asinh", _unary_rule(_FLT, "asinh"))
acosh_p = _std_prim("acosh", _unary_rule(_FLT, "acosh"))
atanh_p = _std_prim("atanh", _unary_rule(_FLT, "atanh"))

def _round_rule(x, *, rounding_method):
    if int(rounding_method) not in (0, 1):
        raise errors.ShapeError(f"round: rounding_method must be 0 (AWAY_FROM_ZERO) or "
                                f"1 (TO_NEAREST_EVEN), got {rounding_method!r}")
    return _unary_rule(_FLT, "round")(x)


round_p = _std_prim("round", _round_rule,
                    impl=lambda x, *, rounding_method: np.asarray(jax.lax.round(x, rounding_method)))


def _is_finite_rule(x):
    _unary_rule(_FLT, "is_finite")(x)
    return ShapedArray(x.shape, np.bool_)


is_finite_p = _std_prim("is_finite", _is_finite_rule)

rem_p = _std_prim("rem", _binary_rule(_NUM, "rem"))
def _pow_rule(x, y):
    # JAX's pow_p: a floating base; an exponent of the base's dtype or of any integer dtype
    # (signed or unsigned: ``0.9 ** step`` with an int32 step binds ``pow f32 i32``), which
    # the lowering converts to the base's dtype. The result has the base's dtype.
    if not _is_float(x.dtype):
        raise errors.DTypeError(f"pow does not accept dtype {x.dtype.name} at position 0. Accepted "
                                f"dtypes at position 0 are subtypes of floating")
    if y.dtype.kind not in "iu" and not _is_float(y.dtype):
        raise errors.DTypeError(f"pow does not accept dtype {y.dtype.name} at position 1. Accepted "
                                f"dtypes at position 1 are subtypes of integer, floating")
    if y.dtype.kind not in "iu" and y.dtype != x.dtype:
        raise errors.DTypeError(
            "the first argument to pow must have an inexact dtype (float or complex), and the second "
            "argument must have an inexact or integer dtype, and two inexact dtypes must match, but got "
            f"{x.dtype.name} and {y.dtype.name} respectively.")
    return ShapedArray(_broadcast_shapes(x, y), x.dtype, weak_type=x.weak_type and y.weak_type)


pow_p = _std_prim("pow", _pow_rule)
atan2_p = _std_prim("atan2", _binary_rule(_FLT, "atan2"))
xor_p = _std_prim("xor", _binary_rule("iub", "xor"), impl=_jax_impl("bitwise_xor"))
shift_left_p = _std_prim("shift_left", _binary_rule(_int_kinds, "shift_left"))
shift_right_logical_p = _std_prim("shift_right_logical", _binary_rule(_int_kinds, "shift_right_logical"))
shift_right_arithmetic_p = _std_prim("shift_right_arithmetic",
                                     _binary_rule(_int_kinds, "shift_right_arithmetic"))


def _clamp_rule(lo, x, hi):
    if not (lo.dtype == x.dtype == hi.dtype):
        raise errors.DTypeError(f"clamp requires min, operand and max of one dtype, got "
                                f"{lo.dtype.name}, {x.dtype.name}, {hi.dtype.name}")
    if x.dtype == np.bool_:
        raise errors.DTypeError("clamp does not accept dtype bool")
    for name, a in (("min", lo), ("max", hi)):
        if a.shape not in ((), x.shape):
            raise errors.ShapeError(f"clamp {name} shape {a.shape} must be () or the operand's {x.shape}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


clamp_p = _std_prim("clamp", _clamp_rule)


def _bitcast_convert_rule(x, *, new_dtype):
    new_dtype = np.dtype(new_dtype)
    if np.bool_ in (x.dtype, new_dtype):
        raise errors.DTypeError("bitcast_convert_type does not accept bool")
    if x.dtype.itemsize != new_dtype.itemsize:
        raise errors.UnsupportedError(
            f"bitcast_convert_type between dtypes of different widths ({x.dtype.name} -> "
            f"{new_dtype.name}) is not supported")
    return ShapedArray(x.shape, new_dtype)


bitcast_convert_type_p = _std_prim(
    "bitcast_convert_type", _bitcast_convert_rule,
    impl=lambda x, *, new_dtype: np.asarray(jax.lax.bitcast_convert_type(x, new_dtype)))


# ---------------------------------------------------------------------------------------
# User-facing functions (the ``jax.lax`` API).

def _binary(p):
    def op(x, y):
        return p.bind(_scalar_like(x, y), _scalar_like(y, x))
    op.__name__ = p.name
    op.__doc__ = f"Elementwise ``{p.name}`` (``jax.lax.{p.name}``): equal shapes and dtypes, or a rank-0 operand."
    return op


def _unary(p):
    def op(x):
        return p.bind(x)
    op.__name__ = p.name
    op.__doc__ = f"Elementwise ``{p.name}`` (``jax.lax.{p.name}``)."
    return op


neg, abs, sign, floor, ceil = map(_unary, (neg_p, abs_p, sign_p, floor_p, ceil_p))
exp, log, tanh, logistic, sqrt, rsqrt = map(_unary, (exp_p, log_p, tanh_p, logistic_p, sqrt_p, rsqrt_p))
bitwise_not = _unary(not_p)
add, sub, mul, div, max, min = map(_binary, (add_p, sub_p, mul_p, div_p, max_p, min_p))
bitwise_and, bitwise_or = _binary(and_p), _binary(or_p)
eq, ne, lt, le, gt, ge = map(_binary, (eq_p, ne_p, lt_p, le_p, gt_p, ge_p))


def integer_pow(x, y: int):
    """``x ** y`` for a static Python int ``y`` (``jax.lax.integer_pow``)."""
    return integer_pow_p.bind(x, y=y)


def select_n(which, *cases):
    """``cases[which]`` elementwise (``jax.lax.select_n``): bool selector picks case 1 where True."""
    return select_n_p.bind(which, *cases)


def convert_element_type(operand, new_dtype):
    """Cast to ``new_dtype`` (``jax.lax.convert_element_type``): float->int truncates and saturates, NaN->0."""
    new_dtype = canonicalize_dtype(new_dtype)
    if get_aval(operand).dtype == new_dtype and isinstance(operand, Tracer) and not operand.weak_type:
        return operand
    return convert_element_type_p.bind(operand, new_dtype=new_dtype, weak_type=False)


def _convert_weak(operand, new_dtype, weak_type):
    """convert_element_type keeping a weak type (used by minixla.numpy's promotion)."""
    return convert_element_type_p.bind(operand, new_dtype=canonicalize_dtype(new_dtype), weak_type=weak_type)


exp2, expm1, log1p, cbrt = map(_unary, (exp2_p, expm1_p, log1p_p, cbrt_p))
sin, cos, tan, erf, erfc, is_finite = map(_unary, (sin_p, cos_p, tan_p, erf_p, erfc_p, is_finite_p))
asin, acos, atan, sinh, cosh, asinh, acosh, atanh = map(
    _unary, (asin_p, acos_p, atan_p, sinh_p, cosh_p, asinh_p, acosh_p, atanh_p))
rem, atan2 = map(_binary, (rem_p, atan2_p))


def pow(x, y):  # noqa: A001 (jax.lax's name)
    """``x ** y`` elementwise (``jax.lax.pow``): ``x`` floating; ``y`` of ``x``'s dtype or of any
    integer dtype (converted to ``x``'s dtype by the lowering, as XLA's ``power`` takes one
    dtype); equal shapes or a rank-0 operand; the result has ``x``'s dtype. Python scalars are
    not cast to the other operand's dtype (JAX's pow has no same-dtype rule to weaken): a
    Python int is a weak int32 (an integer exponent, or a DTypeError as a base), a Python float
    a weak float32. Raises DTypeError (a TypeError) for an integer or bool base, a bool
    exponent, or two different float dtypes (``pow(float16_array, 2.5)``, as in JAX)."""
    return pow_p.bind(_scalar_like(x, None), _scalar_like(y, None))
bitwise_xor = _binary(xor_p)
shift_left, shift_right_logical, shift_right_arithmetic = map(
    _binary, (shift_left_p, shift_right_logical_p, shift_right_arithmetic_p))


class RoundingMethod:
    """``jax.lax.RoundingMethod``: how ``round`` breaks ties."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):  # noqa: A001
    """Round to the nearest integer (``jax.lax.round``); ties away from zero (0) or to even (1)."""
    return round_p.bind(x, rounding_method=int(rounding_method))


def clamp(min, x, max):  # noqa: A002 (jax.lax's signature)
    """``min(max(x, min), max)`` elementwise (``jax.lax.clamp``); min/max may be scalars."""
    return clamp_p.bind(_scalar_like(min, x), x, _scalar_like(max, x))


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` else ``on_false`` (``jax.lax.select``)."""
    return select_n(pred, on_false, on_true)


def bitcast_convert_type(operand, new_dtype):
    """Reinterpret the bits as ``new_dtype`` of the same width (``jax.lax.bitcast_convert_type``)."""
    return bitcast_convert_type_p.bind(operand, new_dtype=np.dtype(new_dtype))


#: the identity with no derivative (JAX's ``stop_gradient`` equation); its JVP rule gives a
#: zero tangent, its batching rule keeps the batch dim, its lowering emits nothing
stop_gradient_p = _std_prim("stop_gradient", lambda x: x, impl=lambda x: x)


def stop_gradient(x):
    """``x`` (a pytree of arrays) with zero derivative at every level of differentiation, as
    ``jax.lax.stop_gradient``: each traced leaf becomes a ``stop_gradient`` equation (shape,
    dtype and weak type unchanged; ``vmap`` keeps its batch axis); concrete leaves are returned
    as they are (nothing to differentiate)."""
    from jax import tree_util
    return tree_util.tree_map(lambda v: stop_gradient_p.bind(v) if isinstance(v, Tracer) else v, x)
