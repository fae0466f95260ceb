"""``minixla.lax``: the primitives, with ``jax.lax``'s names, signatures and shape/dtype rules.

Each primitive is defined once here: a ``Primitive`` object, a shape rule (avals in, aval out)
registered in ``core.shape_rules``, an eager implementation in ``core.impl_rules`` (the
reference, ``jax.lax`` itself, run op by op) and the user-facing wrapper function that binds it.
Lowering to HLO, evaluation, LLVM code generation and the JAX hand-off keep their own tables.

Like ``jax.lax`` (and unlike ``minixla.numpy``) these functions do not promote dtypes or
broadcast, except that a rank-0 operand may be combined with an array of any shape.
"""
from __future__ import annotations

import enum
import warnings
from collections import namedtuple

import numpy as np
import jax
import jax.numpy as jnp

from minixla.core import errors
from minixla.core.avals import ShapedArray, WeakScalar, canonicalize_dtype, get_aval
from minixla.core.avals import canonicalize_shape
from minixla.core.primitive import Primitive, impl_rules, shape_rules
from minixla.core.tracing import Tracer

_float_kinds = "f"
_int_kinds = "iu"


def _is_float(dtype):
    return np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"


def _jax_impl(name):
    """Eager reference implementation: the ``jax.lax`` function of the same name."""
    fn = getattr(jax.lax, name)
    return lambda *args, **params: np.asarray(fn(*args, **params))


def _std_prim(name, rule, impl=None):
    p = Primitive(name)
    shape_rules[p] = rule
    impl_rules[p] = impl or _jax_impl(name)
    return p


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
        return ShapedArray(shape, dtype, weak_type=x.weak_type and y.weak_type and not out_dtype)
    return rule


_NUM = "fiu"          # numeric
_ANY = "fiub"         # numeric or bool
_FLT = "f"            # floating

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


# ---------------------------------------------------------------------------------------
# Structural primitives.

def _broadcast_in_dim_rule(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        raise errors.ShapeError(
            f"broadcast_dimensions {broadcast_dimensions} must have one entry per operand dim ({x.ndim})")
    if list(broadcast_dimensions) != sorted(set(broadcast_dimensions)) or any(
            d < 0 or d >= len(shape) for d in broadcast_dimensions):
        raise errors.ShapeError(f"broadcast_dimensions {broadcast_dimensions} must be strictly "
                                f"increasing and within the output rank {len(shape)}")
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] not in (1, shape[d]):
            raise errors.ShapeError(f"cannot broadcast operand dim {i} of size {x.shape[i]} "
                                    f"to output dim {d} of size {shape[d]} (target shape {shape})")
    return ShapedArray(shape, x.dtype, x.weak_type)


broadcast_in_dim_p = _std_prim("broadcast_in_dim", _broadcast_in_dim_rule,
                               impl=lambda x, *, shape, broadcast_dimensions: np.asarray(
                                   jax.lax.broadcast_in_dim(x, shape, broadcast_dimensions)))


def _reshape_rule(x, *, new_sizes, dimensions=None):
    if any(d < 0 for d in new_sizes):
        raise errors.ShapeError(f"reshape sizes must be non-negative, got {new_sizes}")
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise errors.ShapeError(f"cannot reshape array of shape {x.shape} (size {x.size}) "
                                f"into shape {tuple(new_sizes)} (size {int(np.prod(new_sizes))})")
    if dimensions is not None:
        raise errors.UnsupportedError("reshape with dimensions= is not supported; transpose first")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


reshape_p = _std_prim("reshape", _reshape_rule)


def _transpose_rule(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise errors.ShapeError(f"transpose permutation {permutation} is not a permutation of "
                                f"the operand's {x.ndim} axes")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


transpose_p = _std_prim("transpose", _transpose_rule)


def _slice_rule(x, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        raise errors.ShapeError("slice start/limit/strides must each have one entry per dim")
    out = []
    for s, l, st, d in zip(start_indices, limit_indices, strides, x.shape):
        if not (0 <= s <= l <= d) or st < 1:
            raise errors.ShapeError(f"slice [{s}:{l}:{st}] is out of bounds for a dim of size {d}")
        out.append(max(0, -(-(l - s) // st)))
    return ShapedArray(out, x.dtype, x.weak_type)


slice_p = _std_prim("slice", _slice_rule)


def _iota_rule(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        raise errors.ShapeError(f"iota dimension {dimension} out of range for shape {shape}")
    return ShapedArray(shape, dtype)


iota_p = _std_prim("iota", _iota_rule,
                   impl=lambda *, dtype, shape, dimension: np.asarray(
                       jax.lax.broadcasted_iota(dtype, shape, dimension)))


# ---------------------------------------------------------------------------------------
# Reductions.

def _reduce_rule(opname, kinds):
    def rule(x, *, axes):
        if x.dtype.kind not in kinds and not _is_float(x.dtype):
            raise errors.DTypeError(f"{opname} does not accept dtype {x.dtype.name}")
        if len(set(axes)) != len(axes) or any(a < 0 or a >= x.ndim for a in axes):
            raise errors.ShapeError(f"{opname} axes {axes} are invalid for rank {x.ndim}")
        return ShapedArray([d for i, d in enumerate(x.shape) if i not in axes], x.dtype, x.weak_type)
    return rule


reduce_sum_p = _std_prim("reduce_sum", _reduce_rule("reduce_sum", _NUM))
reduce_max_p = _std_prim("reduce_max", _reduce_rule("reduce_max", _ANY))
reduce_min_p = _std_prim("reduce_min", _reduce_rule("reduce_min", _ANY))


# ---------------------------------------------------------------------------------------
# Contractions.

def _dot_general_rule(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    if lhs.dtype != rhs.dtype:
        raise errors.DTypeError(f"dot_general requires equal dtypes, got {lhs.dtype.name}, {rhs.dtype.name}")
    if lhs.dtype == np.bool_:
        raise errors.DTypeError("dot_general does not accept bool operands")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise errors.ShapeError(f"dot_general dimension_numbers {dimension_numbers} are unbalanced")
    for dims, aval in ((lc + lb, lhs), (rc + rb, rhs)):
        if len(set(dims)) != len(dims) or any(d < 0 or d >= aval.ndim for d in dims):
            raise errors.ShapeError(f"dot_general dimension_numbers {dimension_numbers} invalid for "
                                    f"shapes {lhs.shape} and {rhs.shape}")
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        if lhs.shape[a] != rhs.shape[b]:
            raise errors.ShapeError(
                f"dot_general contracting/batch dims must match: lhs dim {a} has size {lhs.shape[a]} "
                f"but rhs dim {b} has size {rhs.shape[b]} (shapes {lhs.shape} and {rhs.shape})")
    batch = [lhs.shape[d] for d in lb]
    lfree = [d for i, d in enumerate(lhs.shape) if i not in lc and i not in lb]
    rfree = [d for i, d in enumerate(rhs.shape) if i not in rc and i not in rb]
    dtype = np.dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    return ShapedArray(batch + lfree + rfree, dtype, lhs.weak_type and rhs.weak_type)


dot_general_p = _std_prim("dot_general", _dot_general_rule)


ConvDimensionNumbers = namedtuple("ConvDimensionNumbers", ["lhs_spec", "rhs_spec", "out_spec"])
ConvDimensionNumbers.__doc__ = """Conv layout as in ``jax.lax.ConvDimensionNumbers``.

``lhs_spec = (batch dim, feature dim, *spatial dims)``, ``rhs_spec = (out-feature dim,
in-feature dim, *spatial dims)``, ``out_spec = (batch dim, feature dim, *spatial dims)``."""


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """Canonicalize ``None``, ``('NCHW', 'OIHW', 'NCHW')``-style strings or a ConvDimensionNumbers."""
    nd = len(lhs_shape)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if dimension_numbers is None:
        iota = tuple(range(nd))
        return ConvDimensionNumbers(iota, iota, iota)
    lhs, rhs, out = dimension_numbers
    if not (len(lhs) == len(rhs) == len(out) == nd):
        raise errors.ShapeError(f"conv dimension_numbers {dimension_numbers} must each have {nd} letters")

    def spec(s, first, second):
        spatial = [c for c in s if c not in (first, second)]
        if first not in s or second not in s:
            raise errors.ShapeError(f"conv layout '{s}' must contain '{first}' and '{second}'")
        return (s.index(first), s.index(second)) + tuple(s.index(c) for c in spatial), spatial

    lhs_spec, lsp = spec(lhs, "N", "C")
    rhs_spec, rsp = spec(rhs, "O", "I")
    out_spec, osp = spec(out, "N", "C")
    # Spatial dims are matched by letter, in the order they appear in the rhs (kernel) spec.
    lhs_spec = lhs_spec[:2] + tuple(lhs.index(c) for c in rsp)
    out_spec = out_spec[:2] + tuple(out.index(c) for c in rsp)
    return ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec)


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """'SAME'/'VALID'/explicit pairs -> explicit ``(low, high)`` pairs (SAME puts the odd pad high)."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return tuple((0, 0) for _ in in_shape)
        if mode in ("SAME", "SAME_LOWER"):
            pads = []
            for d, k, s in zip(in_shape, window_shape, window_strides):
                out = -(-d // s)
                total = max((out - 1) * s + k - d, 0)
                lo = total // 2 if mode == "SAME" else total - total // 2
                pads.append((lo, total - lo))
            return tuple(pads)
        raise errors.ShapeError(f"unknown padding '{padding}' (expected 'SAME', 'VALID' or pairs)")
    return tuple((int(lo), int(hi)) for lo, hi in padding)


def _conv_rule(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
               feature_group_count=1, batch_group_count=1, precision=None, preferred_element_type=None):
    dn = dimension_numbers
    if lhs.dtype != rhs.dtype:
        raise errors.DTypeError(f"conv_general_dilated requires equal dtypes, got "
                                f"{lhs.dtype.name}, {rhs.dtype.name}")
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise errors.ShapeError(f"conv operands must have equal rank >= 2, got {lhs.shape}, {rhs.shape}")
    if batch_group_count != 1:
        raise errors.UnsupportedError("batch_group_count != 1 is not supported yet")
    nsp = lhs.ndim - 2
    if not (len(window_strides) == len(padding) == len(lhs_dilation) == len(rhs_dilation) == nsp):
        raise errors.ShapeError(f"conv strides/padding/dilations must each have {nsp} entries")
    cin = lhs.shape[dn.lhs_spec[1]]
    g = feature_group_count
    if cin != rhs.shape[dn.rhs_spec[1]] * g:
        raise errors.ShapeError(
            f"conv input features ({cin}) must equal kernel input features "
            f"({rhs.shape[dn.rhs_spec[1]]}) x feature_group_count ({g})")
    cout = rhs.shape[dn.rhs_spec[0]]
    if cout % g:
        raise errors.ShapeError(f"conv output features {cout} not divisible by feature_group_count {g}")
    out_sp = []
    for i in range(nsp):
        d = (lhs.shape[dn.lhs_spec[2 + i]] - 1) * lhs_dilation[i] + 1 if lhs.shape[dn.lhs_spec[2 + i]] else 0
        k = (rhs.shape[dn.rhs_spec[2 + i]] - 1) * rhs_dilation[i] + 1
        lo, hi = padding[i]
        padded = d + lo + hi
        if window_strides[i] < 1:
            raise errors.ShapeError(f"conv window stride must be >= 1, got {window_strides}")
        out_sp.append(max(0, (padded - k) // window_strides[i] + 1) if padded >= k else 0)
    out_shape = [0] * lhs.ndim
    out_shape[dn.out_spec[0]] = lhs.shape[dn.lhs_spec[0]]
    out_shape[dn.out_spec[1]] = cout
    for i in range(nsp):
        out_shape[dn.out_spec[2 + i]] = out_sp[i]
    dtype = np.dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    return ShapedArray(out_shape, dtype)


def _conv_impl(lhs, rhs, *, dimension_numbers, **params):
    dn = jax.lax.ConvDimensionNumbers(*dimension_numbers)
    return np.asarray(jax.lax.conv_general_dilated(lhs, rhs, dimension_numbers=dn, **params))


conv_general_dilated_p = _std_prim("conv_general_dilated", _conv_rule, impl=_conv_impl)


# ---------------------------------------------------------------------------------------
# User-facing functions (the ``jax.lax`` API).

def _scalar_like(x, like):
    """A Python scalar combined with an array takes the array's dtype (JAX's weak typing).

    A Python int must fit the default int (OverflowError otherwise, as ``jax.lax.add(x, 2**40)``)
    and the array's integer dtype: ``jax.lax`` does not promote, so ``lax.add(uint8_array, 300)``
    is a TypeError in JAX; here an int that fits is accepted and one that does not is a
    DTypeError, never wrapped silently (``minixla.numpy.add`` wraps it, as ``jnp.add``)."""
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        own = get_aval(x).dtype  # (raises ScalarOverflowError for an int beyond the default int)
        dtype = get_aval(like).dtype if like is not None and not isinstance(
            like, (bool, int, float)) else own
        if isinstance(x, int) and not isinstance(x, bool) and dtype.kind in "iu" and not (
                np.iinfo(dtype).min <= x <= np.iinfo(dtype).max):
            raise errors.DTypeError(
                f"{errors.api_name() or 'a jax.lax op'} requires arguments to have the same dtypes, "
                f"got {dtype.name} and the Python int {x}, which does not fit {dtype.name} "
                f"(minixla.numpy's functions promote and wrap it as jax.numpy's do)\n"
                f"  at: {errors.user_source_line()}")
        with np.errstate(over="ignore"):  # (a float beyond the dtype's range rounds to inf)
            return np.asarray(np.asarray(x, own), dtype)[()]
    return x


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


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """Broadcast ``operand`` to ``shape``, its dim i landing on ``broadcast_dimensions[i]``."""
    return broadcast_in_dim_p.bind(operand, shape=tuple(int(d) for d in shape),
                                   broadcast_dimensions=tuple(int(d) for d in broadcast_dimensions))


def broadcast(operand, sizes):
    """Prepend dims of ``sizes`` (``jax.lax.broadcast``)."""
    nd = get_aval(operand).ndim
    shape = tuple(sizes) + get_aval(operand).shape
    return broadcast_in_dim(operand, shape, tuple(range(len(sizes), len(sizes) + nd)))


def reshape(operand, new_sizes, dimensions=None):
    """Row-major reshape (``jax.lax.reshape``)."""
    new_sizes = tuple(int(d) for d in new_sizes)
    if isinstance(operand, Tracer) and operand.shape == new_sizes:
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes, dimensions=dimensions)


def transpose(operand, permutation):
    """Permute axes: output dim i is operand dim ``permutation[i]`` (``jax.lax.transpose``)."""
    permutation = tuple(int(p) for p in permutation)
    if isinstance(operand, Tracer) and permutation == tuple(range(operand.ndim)):
        return operand
    return transpose_p.bind(operand, permutation=permutation)


def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001 (jax.lax's name)
    """Static strided slice (``jax.lax.slice``)."""
    return slice_p.bind(operand, start_indices=tuple(start_indices), limit_indices=tuple(limit_indices),
                        strides=tuple(strides) if strides is not None else None)


def broadcasted_iota(dtype, shape, dimension):
    """Array of ``shape`` whose value is the index along ``dimension`` (``jax.lax.broadcasted_iota``)."""
    return iota_p.bind(dtype=canonicalize_dtype(dtype), shape=tuple(shape), dimension=int(dimension))


def iota(dtype, size):
    """``[0, 1, ..., size-1]`` (``jax.lax.iota``)."""
    return broadcasted_iota(dtype, (size,), 0)


def reduce_sum(operand, axes):
    """Sum over ``axes`` (``jax.lax.reduce_sum``); empty axes give 0."""
    return reduce_sum_p.bind(operand, axes=tuple(sorted(int(a) for a in axes)))


def reduce_max(operand, axes):
    """Max over ``axes`` (NaN-propagating; empty extents give -inf / the dtype's min)."""
    return reduce_max_p.bind(operand, axes=tuple(sorted(int(a) for a in axes)))


def reduce_min(operand, axes):
    """Min over ``axes`` (NaN-propagating; empty extents give +inf / the dtype's max)."""
    return reduce_min_p.bind(operand, axes=tuple(sorted(int(a) for a in axes)))


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """General contraction (``jax.lax.dot_general``).

    ``dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
    Output dims: batch dims, then lhs free dims, then rhs free dims.
    """
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    pet = canonicalize_dtype(preferred_element_type) if preferred_element_type is not None else None
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=precision,
                              preferred_element_type=pet)


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector/matrix product contracting the last dim of ``lhs`` with the first of ``rhs``."""
    la, ra = get_aval(lhs), get_aval(rhs)
    if la.ndim not in (1, 2) or ra.ndim not in (1, 2):
        raise errors.ShapeError(f"lax.dot takes rank 1 or 2 operands, got {la.shape} and {ra.shape}")
    return dot_general(lhs, rhs, (((la.ndim - 1,), (0,)), ((), ())), precision, preferred_element_type)


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                         precision=None, preferred_element_type=None):
    """N-d convolution (cross-correlation), as ``jax.lax.conv_general_dilated``.

    Args:
      lhs: input, e.g. NCHW ``[N, C, H, W]``; rhs: kernel, e.g. OIHW ``[O, I, kh, kw]``.
      window_strides: one int per spatial dim. padding: ``'SAME'``, ``'VALID'`` or
        ``[(low, high), ...]``; SAME puts the odd pad at the end.
      dimension_numbers: ``None`` (NCHW/OIHW/NCHW), strings like ``('NHWC', 'HWIO', 'NHWC')``
        or a ``ConvDimensionNumbers``.
    Raises:
      ShapeError / DTypeError naming the shapes and the caller's line.
    """
    la, ra = get_aval(lhs), get_aval(rhs)
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    nsp = la.ndim - 2
    window_strides = tuple(int(s) for s in window_strides)
    lhs_dilation = tuple(lhs_dilation) if lhs_dilation is not None else (1,) * nsp
    rhs_dilation = tuple(rhs_dilation) if rhs_dilation is not None else (1,) * nsp
    if isinstance(padding, str) and any(d != 1 for d in lhs_dilation):
        raise errors.ShapeError(
            f"conv_general_dilated: string padding '{padding}' is not defined with lhs_dilation "
            f"{lhs_dilation} (as in JAX); give explicit (low, high) pairs\n  at: {errors.user_source_line()}")
    if isinstance(padding, str):
        in_sp = [(la.shape[dn.lhs_spec[2 + i]] - 1) * lhs_dilation[i] + 1 for i in range(nsp)]
        k_sp = [(ra.shape[dn.rhs_spec[2 + i]] - 1) * rhs_dilation[i] + 1 for i in range(nsp)]
        padding = padtype_to_pads(in_sp, k_sp, window_strides, padding)
    else:
        padding = padtype_to_pads(None, None, None, padding)
    pet = canonicalize_dtype(preferred_element_type) if preferred_element_type is not None else None
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dn, feature_group_count=feature_group_count,
        batch_group_count=batch_group_count, precision=precision, preferred_element_type=pet)


# =======================================================================================
# The rest of the ``jax.lax`` surface (issue 3): more elementwise ops, structural ops,
# gather/scatter, reductions, cumulative reductions.

exp2_p = _std_prim("exp2", _unary_rule(_FLT, "exp2"))
expm1_p = _std_prim("expm1", _unary_rule(_FLT, "expm1"))
log1p_p = _std_prim("log1p", _unary_rule(_FLT, "log1p"))
cbrt_p = _std_prim("cbrt", _unary_rule(_FLT, "cbrt"))
sin_p = _std_prim("sin", _unary_rule(_FLT, "sin"))
cos_p = _std_prim("cos", _unary_rule(_FLT, "cos"))
tan_p = _std_prim("tan", _unary_rule(_FLT, "tan"))
erf_p = _std_prim("erf", _unary_rule(_FLT, "erf"))
erfc_p = _std_prim("erfc", _unary_rule(_FLT, "erfc"))


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
pow_p = _std_prim("pow", _binary_rule(_FLT, "pow"))
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


# --- structural --------------------------------------------------------------------------

def _check_dims(opname, dims, ndim):
    if len(set(dims)) != len(dims) or any(not 0 <= d < ndim for d in dims):
        raise errors.ShapeError(f"{opname} dimensions {tuple(dims)} are invalid for rank {ndim}")


def _squeeze_rule(x, *, dimensions):
    _check_dims("squeeze", dimensions, x.ndim)
    for d in dimensions:
        if x.shape[d] != 1:
            raise errors.ShapeError(f"squeeze: dimension {d} has size {x.shape[d]}, not 1")
    return ShapedArray([n for i, n in enumerate(x.shape) if i not in dimensions], x.dtype, x.weak_type)


squeeze_p = _std_prim("squeeze", _squeeze_rule)


def _rev_rule(x, *, dimensions):
    _check_dims("rev", dimensions, x.ndim)
    return x


rev_p = _std_prim("rev", _rev_rule)


def _pad_rule(x, padding_value, *, padding_config):
    if x.dtype != padding_value.dtype:
        raise errors.DTypeError(f"pad: operand dtype {x.dtype.name} and padding value dtype "
                                f"{padding_value.dtype.name} differ")
    if padding_value.shape != ():
        raise errors.ShapeError(f"pad: padding value must be a scalar, got shape {padding_value.shape}")
    if len(padding_config) != x.ndim:
        raise errors.ShapeError(f"pad: padding_config needs one (low, high, interior) per dim "
                                f"({x.ndim}), got {len(padding_config)}")
    out = []
    for n, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise errors.ShapeError(f"pad: interior padding must be >= 0, got {interior}")
        size = lo + hi + n + max(n - 1, 0) * interior
        if size < 0:
            raise errors.ShapeError(f"pad: padding {(lo, hi, interior)} makes a negative size "
                                    f"for a dim of size {n}")
        out.append(size)
    return ShapedArray(out, x.dtype, x.weak_type)


pad_p = _std_prim("pad", _pad_rule)


def _concatenate_rule(*xs, dimension):
    if not xs:
        raise errors.ShapeError("concatenate needs at least one operand")
    x0 = xs[0]
    if not 0 <= dimension < builtins_max(x0.ndim, 1) or x0.ndim == 0:
        raise errors.ShapeError(f"concatenate dimension {dimension} is invalid for rank {x0.ndim}")
    for x in xs:
        if x.dtype != x0.dtype:
            raise errors.DTypeError("concatenate operands must have one dtype, got "
                                    + ", ".join(a.dtype.name for a in xs))
        if x.ndim != x0.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, x0.shape))
                                    if i != dimension):
            raise errors.ShapeError("concatenate operands must have equal shapes except along "
                                    f"dimension {dimension}, got " + ", ".join(str(a.shape) for a in xs))
    shape = list(x0.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, x0.dtype, all(x.weak_type for x in xs))


def builtins_max(a, b):
    return a if a > b else b


concatenate_p = _std_prim("concatenate", _concatenate_rule,
                          impl=lambda *xs, dimension: np.asarray(jax.lax.concatenate(xs, dimension)))


def _check_scalar_indices(opname, idx, ndim):
    if len(idx) != ndim:
        raise errors.ShapeError(f"{opname} needs one start index per operand dim ({ndim}), got {len(idx)}")
    for i in idx:
        if i.shape != () or i.dtype.kind not in _int_kinds:
            raise errors.DTypeError(f"{opname} start indices must be integer scalars, got {i.str_short()}")


def _dynamic_slice_rule(x, *idx, slice_sizes):
    _check_scalar_indices("dynamic_slice", idx, x.ndim)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= n for s, n in zip(slice_sizes, x.shape)):
        raise errors.ShapeError(f"dynamic_slice slice_sizes {tuple(slice_sizes)} must be within "
                                f"the operand shape {x.shape}")
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


dynamic_slice_p = _std_prim(
    "dynamic_slice", _dynamic_slice_rule,
    impl=lambda x, *idx, slice_sizes: np.asarray(jax.lax.dynamic_slice(x, idx, slice_sizes)))


def _dynamic_update_slice_rule(x, update, *idx):
    _check_scalar_indices("dynamic_update_slice", idx, x.ndim)
    if update.dtype != x.dtype:
        raise errors.DTypeError(f"dynamic_update_slice update dtype {update.dtype.name} differs "
                                f"from the operand's {x.dtype.name}")
    if update.ndim != x.ndim or any(u > n for u, n in zip(update.shape, x.shape)):
        raise errors.ShapeError(f"dynamic_update_slice update shape {update.shape} must fit in "
                                f"the operand shape {x.shape}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


dynamic_update_slice_p = _std_prim(
    "dynamic_update_slice", _dynamic_update_slice_rule,
    impl=lambda x, u, *idx: np.asarray(jax.lax.dynamic_update_slice(x, u, idx)))


GatherDimensionNumbers = namedtuple("GatherDimensionNumbers",
                                    ["offset_dims", "collapsed_slice_dims", "start_index_map"])
GatherDimensionNumbers.__doc__ = """XLA gather dimension numbers (``jax.lax.GatherDimensionNumbers``
without batching dims). The start indices' last dim is the index vector."""
ScatterDimensionNumbers = namedtuple("ScatterDimensionNumbers",
                                     ["update_window_dims", "inserted_window_dims",
                                      "scatter_dims_to_operand_dims"])
ScatterDimensionNumbers.__doc__ = """XLA scatter dimension numbers (``jax.lax.ScatterDimensionNumbers``
without batching dims). The scatter indices' last dim is the index vector."""


class GatherScatterMode(enum.Enum):
    """How a gather or scatter treats out-of-bounds indices (``jax.lax.GatherScatterMode``).

    ``CLIP``: each start index is clamped so the whole window is inside the operand.
    ``FILL_OR_DROP``: a gather returns ``fill_value`` for a window that is not wholly inside the
    operand; a scatter skips such a window. ``PROMISE_IN_BOUNDS``: the caller promises in-bounds
    indices; what happens otherwise is XLA's native behavior (a gather clamps, a scatter drops).
    HLO's gather and scatter have no mode: a mode is lowered to clamps, compares and selects
    around the native op, as JAX lowers it (so every backend sees plain XLA semantics).
    """
    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"

    @staticmethod
    def from_any(s):
        """``"clip"``, ``"fill"``/``"drop"``/``None`` (FILL_OR_DROP), ``"promise_in_bounds"`` or
        a ``GatherScatterMode`` (ours or ``jax.lax``'s); else ``ValueError``."""
        if isinstance(s, GatherScatterMode):
            return s
        if isinstance(s, jax.lax.GatherScatterMode):
            s = s.name
        key = {"clip": "CLIP", "fill": "FILL_OR_DROP", "drop": "FILL_OR_DROP", None: "FILL_OR_DROP",
               "promise_in_bounds": "PROMISE_IN_BOUNDS"}.get(s, s)
        if key not in GatherScatterMode.__members__:
            raise ValueError(f'Unknown gather mode "{s}"')
        return GatherScatterMode[key]

    def __repr__(self):  # as the jaxpr printer shows params
        return f"GatherScatterMode.{self.name}"


def _jax_mode(mode, default=None):
    return getattr(jax.lax.GatherScatterMode, (mode or default or GatherScatterMode.FILL_OR_DROP).name)


def gather_fill_value(fill_value, dtype):
    """The fill of a FILL_OR_DROP gather as a scalar of ``dtype`` (``jax.lax.gather``'s default:
    NaN for inexact dtypes, the minimum of a signed and the maximum of an unsigned integer, True
    for bool); a given value is cast as NumPy casts it (JAX builds the fill with ``np.array``)."""
    dtype = np.dtype(dtype)
    if fill_value is None:
        if _is_float(dtype) or dtype.kind == "c":
            fill_value = np.nan
        elif dtype.kind in "iu":
            fill_value = np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max
        elif dtype == np.bool_:
            fill_value = True
        else:
            raise errors.DTypeError(f"gather: no default fill_value for dtype {dtype.name}")
    if np.ndim(fill_value) != 0:
        raise ValueError("fill_value argument to indexed get() must be a scalar")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(fill_value).astype(dtype)[()]


def _gather_rule(x, indices, *, dimension_numbers, slice_sizes, mode=None, fill_value=None):
    dn = dimension_numbers
    if indices.dtype.kind not in _int_kinds:
        raise errors.DTypeError(f"gather indices must be integers, got {indices.dtype.name}")
    if indices.ndim < 1 or indices.shape[-1] != len(dn.start_index_map):
        raise errors.ShapeError(f"gather indices' last dim ({indices.shape}) must have "
                                f"len(start_index_map) = {len(dn.start_index_map)} entries")
    _check_dims("gather start_index_map", dn.start_index_map, x.ndim)
    _check_dims("gather collapsed_slice_dims", dn.collapsed_slice_dims, x.ndim)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= n for s, n in zip(slice_sizes, x.shape)):
        raise errors.ShapeError(f"gather slice_sizes {tuple(slice_sizes)} must be within the operand "
                                f"shape {x.shape}")
    if any(slice_sizes[d] != 1 for d in dn.collapsed_slice_dims):
        raise errors.ShapeError("gather collapsed_slice_dims must have slice size 1")
    window = [slice_sizes[d] for d in range(x.ndim) if d not in dn.collapsed_slice_dims]
    out_rank = indices.ndim - 1 + len(window)
    if (len(dn.offset_dims) != len(window) or list(dn.offset_dims) != sorted(set(dn.offset_dims))
            or any(not 0 <= d < out_rank for d in dn.offset_dims)):
        raise errors.ShapeError(f"gather offset_dims {tuple(dn.offset_dims)} are invalid")
    batch = iter(indices.shape[:-1])
    win = iter(window)
    shape = [next(win) if d in dn.offset_dims else next(batch) for d in range(out_rank)]
    return ShapedArray(shape, x.dtype, x.weak_type)


def _gather_impl(x, indices, *, dimension_numbers, slice_sizes, mode=None, fill_value=None):
    dn = jax.lax.GatherDimensionNumbers(tuple(dimension_numbers.offset_dims),
                                        tuple(dimension_numbers.collapsed_slice_dims),
                                        tuple(dimension_numbers.start_index_map))
    mode = _jax_mode(mode, GatherScatterMode.PROMISE_IN_BOUNDS)
    return np.asarray(jax.lax.gather(x, indices, dn, tuple(slice_sizes), mode=mode, fill_value=fill_value))


gather_p = _std_prim("gather", _gather_rule, impl=_gather_impl)


def _scatter_rule(x, indices, updates, *, dimension_numbers, **_):
    dn = dimension_numbers
    if indices.dtype.kind not in _int_kinds:
        raise errors.DTypeError(f"scatter indices must be integers, got {indices.dtype.name}")
    if updates.dtype != x.dtype:
        raise errors.DTypeError(f"scatter updates dtype {updates.dtype.name} differs from the "
                                f"operand's {x.dtype.name}")
    if indices.ndim < 1 or indices.shape[-1] != len(dn.scatter_dims_to_operand_dims):
        raise errors.ShapeError(f"scatter indices' last dim ({indices.shape}) must have "
                                f"{len(dn.scatter_dims_to_operand_dims)} entries")
    _check_dims("scatter inserted_window_dims", dn.inserted_window_dims, x.ndim)
    _check_dims("scatter scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims, x.ndim)
    if len(dn.update_window_dims) + len(dn.inserted_window_dims) != x.ndim:
        raise errors.ShapeError("scatter: update_window_dims and inserted_window_dims must cover "
                                "the operand's dims")
    if updates.ndim != indices.ndim - 1 + len(dn.update_window_dims):
        raise errors.ShapeError(f"scatter updates rank {updates.ndim} must be "
                                f"{indices.ndim - 1 + len(dn.update_window_dims)}")
    _check_dims("scatter update_window_dims", dn.update_window_dims, updates.ndim)
    scatter_sizes = [n for d, n in enumerate(updates.shape) if d not in dn.update_window_dims]
    if tuple(scatter_sizes) != indices.shape[:-1]:
        raise errors.ShapeError(f"scatter updates shape {updates.shape} does not match the "
                                f"indices' batch shape {indices.shape[:-1]}")
    op_window = [d for d in range(x.ndim) if d not in dn.inserted_window_dims]
    for od, ud in zip(op_window, dn.update_window_dims):
        if updates.shape[ud] > x.shape[od]:
            raise errors.ShapeError(f"scatter update window {updates.shape} larger than operand {x.shape}")
    return x


def _scatter_impl(name):
    fn = {"scatter": jax.lax.scatter, "scatter-add": jax.lax.scatter_add,
          "scatter-mul": jax.lax.scatter_mul, "scatter-min": jax.lax.scatter_min,
          "scatter-max": jax.lax.scatter_max}[name]

    def impl(x, indices, updates, *, dimension_numbers, indices_are_sorted=False, unique_indices=False,
             mode=None):
        dn = jax.lax.ScatterDimensionNumbers(*map(tuple, dimension_numbers))
        return np.asarray(fn(x, indices, updates, dn, indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices, mode=_jax_mode(mode)))
    return impl


scatter_p = _std_prim("scatter", _scatter_rule, impl=_scatter_impl("scatter"))
scatter_add_p = _std_prim("scatter-add", _scatter_rule, impl=_scatter_impl("scatter-add"))
scatter_mul_p = _std_prim("scatter-mul", _scatter_rule, impl=_scatter_impl("scatter-mul"))
scatter_min_p = _std_prim("scatter-min", _scatter_rule, impl=_scatter_impl("scatter-min"))
scatter_max_p = _std_prim("scatter-max", _scatter_rule, impl=_scatter_impl("scatter-max"))


# --- reductions ----------------------------------------------------------------------------

reduce_prod_p = _std_prim("reduce_prod", _reduce_rule("reduce_prod", _NUM))
reduce_and_p = _std_prim("reduce_and", _reduce_rule("reduce_and", "iub"))
reduce_or_p = _std_prim("reduce_or", _reduce_rule("reduce_or", "iub"))


def _argminmax_rule(opname):
    def rule(x, *, axes, index_dtype):
        if len(axes) != 1 or not 0 <= axes[0] < x.ndim:
            raise errors.ShapeError(f"{opname} axes {axes} are invalid for rank {x.ndim}")
        if np.dtype(index_dtype).kind not in _int_kinds:
            raise errors.DTypeError(f"{opname} index_dtype must be an integer type, got {index_dtype}")
        if x.shape[axes[0]] == 0:
            raise errors.ShapeError(f"{opname} requires a non-empty reduced dimension: "
                                    f"operand shape {x.shape}, axis {axes[0]}")
        return ShapedArray([n for i, n in enumerate(x.shape) if i != axes[0]], index_dtype)
    return rule


argmax_p = _std_prim("argmax", _argminmax_rule("argmax"),
                     impl=lambda x, *, axes, index_dtype: np.asarray(jax.lax.argmax(x, axes[0], index_dtype)))
argmin_p = _std_prim("argmin", _argminmax_rule("argmin"),
                     impl=lambda x, *, axes, index_dtype: np.asarray(jax.lax.argmin(x, axes[0], index_dtype)))


def _cumulative_rule(opname, kinds):
    def rule(x, *, axis, reverse):
        if x.dtype.kind not in kinds and not _is_float(x.dtype):
            raise errors.DTypeError(f"{opname} does not accept dtype {x.dtype.name}")
        if not 0 <= axis < x.ndim:
            raise errors.ShapeError(f"{opname} axis {axis} is invalid for rank {x.ndim}")
        return x
    return rule


cumsum_p = _std_prim("cumsum", _cumulative_rule("cumsum", _NUM))
cumprod_p = _std_prim("cumprod", _cumulative_rule("cumprod", _NUM))
cummax_p = _std_prim("cummax", _cumulative_rule("cummax", _NUM))
cummin_p = _std_prim("cummin", _cumulative_rule("cummin", _NUM))


# --- user-facing functions -----------------------------------------------------------------

exp2, expm1, log1p, cbrt = map(_unary, (exp2_p, expm1_p, log1p_p, cbrt_p))
sin, cos, tan, erf, erfc, is_finite = map(_unary, (sin_p, cos_p, tan_p, erf_p, erfc_p, is_finite_p))
rem, pow, atan2 = map(_binary, (rem_p, pow_p, atan2_p))  # noqa: A001 (jax.lax's names)
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


def squeeze(array, dimensions):
    """Remove the size-1 ``dimensions`` (``jax.lax.squeeze``)."""
    nd = get_aval(array).ndim
    dims = tuple(sorted(int(d) % nd if nd else int(d) for d in dimensions))
    return squeeze_p.bind(array, dimensions=dims)


def expand_dims(array, dimensions):
    """Insert size-1 dims at ``dimensions`` of the result (``jax.lax.expand_dims``)."""
    shape = list(get_aval(array).shape)
    nd = len(shape) + len(dimensions)
    for d in sorted(int(d) % nd for d in dimensions):
        shape.insert(d, 1)
    return reshape(array, shape)


def rev(operand, dimensions):
    """Reverse the order of elements along ``dimensions`` (``jax.lax.rev``)."""
    return rev_p.bind(operand, dimensions=tuple(int(d) for d in dimensions))


def pad(operand, padding_value, padding_config):
    """Pad with ``(low, high, interior)`` per dim (``jax.lax.pad``); negative low/high crop."""
    config = tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config)
    return pad_p.bind(operand, _scalar_like(padding_value, operand), padding_config=config)


def concatenate(operands, dimension):
    """Join ``operands`` along ``dimension`` (``jax.lax.concatenate``)."""
    return concatenate_p.bind(*operands, dimension=int(dimension))


def _index_scalars(indices, shape, opname="dynamic_slice"):
    """Start indices as integer scalars of one dtype (the traced ones', or int32), with negative
    indices counted from the end of their dim, as ``jax.lax.dynamic_slice`` does before binding."""
    traced = [get_aval(i).dtype for i in indices if isinstance(i, Tracer)]
    dtype = traced[0] if traced else np.dtype(np.int32)
    out = []
    for i, n in zip(indices, shape):
        if not isinstance(i, Tracer):
            if np.asarray(i).dtype.kind not in "iub":  # (int() would truncate 0.5 to 0)
                raise errors.DTypeError(f"{opname}: start indices must be integers, got {i!r}\n"
                                        f"  at: {errors.user_source_line()}")
            v = int(i)
            out.append(np.asarray(v + n if v < 0 else v).astype(dtype)[()])
        elif get_aval(i).dtype.kind == "i":
            out.append(select_n(lt(i, np.asarray(0, dtype)[()]), i, add(i, np.asarray(n).astype(dtype)[()])))
        else:
            out.append(i)
    return out + list(indices[len(shape):])


def dynamic_slice(operand, start_indices, slice_sizes):
    """Slice of ``slice_sizes`` at traced ``start_indices`` (``jax.lax.dynamic_slice``): negative
    starts count from the end, then starts are clamped so the slice lies inside the operand."""
    return dynamic_slice_p.bind(operand, *_index_scalars(start_indices, get_aval(operand).shape),
                                slice_sizes=tuple(int(s) for s in slice_sizes))


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0):
    """``dynamic_slice`` along one ``axis`` (``jax.lax.dynamic_slice_in_dim``)."""
    shape = get_aval(operand).shape
    axis = axis + len(shape) if axis < 0 else axis
    starts = [np.int32(0)] * len(shape)
    starts[axis] = start_index
    sizes = list(shape)
    sizes[axis] = slice_size
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True):
    """The slice at ``index`` of ``axis`` (``jax.lax.dynamic_index_in_dim``), that dim kept or dropped."""
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    if keepdims:
        return out
    shape = get_aval(operand).shape
    axis = axis + len(shape) if axis < 0 else axis
    return reshape(out, shape[:axis] + shape[axis + 1:])


def dynamic_update_slice(operand, update, start_indices):
    """``operand`` with ``update`` written at (clamped) ``start_indices`` (``jax.lax.dynamic_update_slice``)."""
    return dynamic_update_slice_p.bind(operand, update, *_index_scalars(start_indices, get_aval(operand).shape,
                                                                        "dynamic_update_slice"))


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """XLA gather (``jax.lax.gather``): for each index vector (the last dim of ``start_indices``,
    an integer array) a window of ``slice_sizes`` starting there. ``dimension_numbers`` is a
    ``GatherDimensionNumbers``. ``mode`` (a ``GatherScatterMode`` or its string) says what an
    out-of-bounds window gives; ``None`` means ``PROMISE_IN_BOUNDS`` as in JAX (in practice the
    start is clamped, as ``CLIP``); ``FILL_OR_DROP`` gives ``fill_value`` (see
    ``gather_fill_value``) for the whole window. ``unique_indices``/``indices_are_sorted`` are
    accepted for JAX's signature and do not change the result."""
    dn = GatherDimensionNumbers(*(tuple(int(d) for d in x) for x in dimension_numbers[:3]))
    mode = GatherScatterMode.from_any(GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode)
    fill = (gather_fill_value(fill_value, get_aval(operand).dtype)
            if mode is GatherScatterMode.FILL_OR_DROP else None)
    return gather_p.bind(operand, start_indices, dimension_numbers=dn,
                         slice_sizes=tuple(int(s) for s in slice_sizes), mode=mode, fill_value=fill)


def _scatter_fn(p, doc):
    def fn(operand, scatter_indices, updates, dimension_numbers, indices_are_sorted=False,
           unique_indices=False, mode=None):
        dn = ScatterDimensionNumbers(*(tuple(int(d) for d in x) for x in dimension_numbers[:3]))
        return p.bind(operand, scatter_indices, updates, dimension_numbers=dn,
                      indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices),
                      mode=GatherScatterMode.from_any(mode))
    fn.__name__ = p.name.replace("-", "_")
    fn.__doc__ = (f"XLA scatter that {doc} (``jax.lax.{fn.__name__}``). ``mode``: ``None`` or "
                  "``FILL_OR_DROP`` (JAX's default) skips an update window that is not wholly inside "
                  "the operand, ``CLIP`` clamps its start indices first, ``PROMISE_IN_BOUNDS`` leaves "
                  "XLA's native behavior (skipped).")
    return fn


scatter = _scatter_fn(scatter_p, "replaces the operand's elements")
scatter_add = _scatter_fn(scatter_add_p, "adds into the operand")
scatter_mul = _scatter_fn(scatter_mul_p, "multiplies into the operand")
scatter_min = _scatter_fn(scatter_min_p, "takes the minimum with the operand")
scatter_max = _scatter_fn(scatter_max_p, "takes the maximum with the operand")


def _axes(axes):
    return tuple(sorted(int(a) for a in axes))


def reduce_prod(operand, axes):
    """Product over ``axes`` (``jax.lax.reduce_prod``); empty extents give 1."""
    return reduce_prod_p.bind(operand, axes=_axes(axes))


def reduce_and(operand, axes):
    """Logical/bitwise and over ``axes`` (``jax.lax.reduce_and``); empty extents give True / all ones."""
    return reduce_and_p.bind(operand, axes=_axes(axes))


def reduce_or(operand, axes):
    """Logical/bitwise or over ``axes`` (``jax.lax.reduce_or``); empty extents give False / 0."""
    return reduce_or_p.bind(operand, axes=_axes(axes))


def argmax(operand, axis, index_dtype):
    """Index of the maximum along ``axis`` (``jax.lax.argmax``): the first maximum; a NaN counts
    as the maximum (the first NaN wins). Raises ShapeError for an empty axis, as JAX does."""
    return argmax_p.bind(operand, axes=(int(axis),), index_dtype=canonicalize_dtype(index_dtype))


def argmin(operand, axis, index_dtype):
    """Index of the minimum along ``axis`` (``jax.lax.argmin``); NaN and ties as ``argmax``."""
    return argmin_p.bind(operand, axes=(int(axis),), index_dtype=canonicalize_dtype(index_dtype))


def _cumulative(p):
    def fn(operand, axis=0, reverse=False):
        nd = get_aval(operand).ndim
        return p.bind(operand, axis=int(axis) % nd if nd else int(axis), reverse=bool(reverse))
    fn.__name__ = p.name
    fn.__doc__ = (f"Inclusive cumulative ``{p.name[3:]}`` along ``axis`` (``jax.lax.{p.name}``); "
                  "``reverse`` scans from the end.")
    return fn


cumsum, cumprod, cummax, cummin = map(_cumulative, (cumsum_p, cumprod_p, cummax_p, cummin_p))


def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with ``fill_value`` (``jax.lax.full``). Inside a trace it is
    staged (a ``broadcast_in_dim`` of the scalar), so the result is a tracer like any other
    value of the traced function; outside, a numpy array."""
    from minixla.core.tracing import current_jaxpr_trace
    # As jax.lax.full: weakly typed when the dtype comes from a Python scalar (``full(2, 1)``
    # adds to an int8 array as int8), and a Python int wraps into the default int here.
    weak = dtype is None and isinstance(fill_value, (int, float)) and not isinstance(fill_value, (bool, np.generic))
    dtype = canonicalize_dtype(dtype if dtype is not None else np.asarray(fill_value).dtype)
    value = np.asarray(fill_value).astype(dtype)[()] if not isinstance(fill_value, Tracer) else fill_value
    shape = canonicalize_shape(shape)
    if isinstance(value, Tracer):
        return broadcast_in_dim(convert_element_type(value, dtype), shape, ())
    trace = current_jaxpr_trace()
    if trace is None:
        return np.full(shape, value, dtype)
    return trace.process_primitive(broadcast_in_dim_p, [WeakScalar(value) if weak else value],
                                   dict(shape=shape, broadcast_dimensions=()))


def stage_constant(x):
    """``x`` (a numpy array) as a value of the current trace if one is active (a constvar), else
    ``x`` itself: what ``jnp.arange`` & co. give inside ``jit``."""
    from minixla.core.tracing import current_jaxpr_trace
    trace = current_jaxpr_trace()
    if trace is None or isinstance(x, Tracer):
        return x
    x = np.asarray(x)
    return trace.process_primitive(convert_element_type_p, [x], dict(new_dtype=x.dtype, weak_type=False))


def stop_gradient(x):
    """``x`` (a pytree) with zero derivative at every level of differentiation, as
    ``jax.lax.stop_gradient``; ``vmap`` batching passes through it."""
    from minixla.interpreters.api import stop_gradient as _stop_gradient
    return _stop_gradient(x)


# Every public function is an API boundary: an error escaping it names the function, the
# shapes it was given and the user's line (``errors.api_boundary``). Keep this at the end.
errors.wrap_public_functions(globals())
