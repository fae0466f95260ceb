"""``minixla.lax``: the primitives, with ``jax.lax``'s names, signatures and shape/dtype rules.

Each primitive is defined once here: a ``Primitive`` object, a shape rule (avals in, aval out)
registered in ``core.shape_rules``, an eager implementation in ``core.impl_rules`` (the
reference, ``jax.lax`` itself, run op by op) and the user-facing wrapper function that binds it.
Lowering to HLO, evaluation, LLVM code generation and the JAX hand-off keep their own tables.

Like ``jax.lax`` (and unlike ``minixla.numpy``) these functions do not promote dtypes or
broadcast, except that a rank-0 operand may be combined with an array of any shape.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import jax
import jax.numpy as jnp

from minixla.core import errors
from minixla.core.avals import ShapedArray, canonicalize_dtype, get_aval
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
    """A Python scalar combined with an array takes the array's dtype (JAX's weak typing)."""
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        dtype = get_aval(like).dtype if like is not None and not isinstance(
            like, (bool, int, float)) else get_aval(x).dtype
        return np.asarray(x, dtype)[()]
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
