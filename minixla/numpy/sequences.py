"""Functions of sequences and samples in ``jax.numpy``: differences (``diff``, ``ediff1d``),
integration (``trapezoid``), ``cumulative_sum``/``cumulative_prod`` (the Array API's),
polynomials (``polyval``), 1-D ``convolve``/``correlate`` (one ``conv_general_dilated``, as
JAX lowers them), ``cov``/``corrcoef``, membership (``isin``) and counting (``bincount``, a
scatter-add). Mirrors ``jax/_src/numpy/lax_numpy.py``, ``polynomial.py`` and ``setops.py``.
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import canonicalize_dtype, get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import (
    _arr, _canon_axis1, _cast, _default_int, _promote_dtypes, _promote_inexact, _where_line,
    broadcast_shapes, broadcast_to)
from minixla.numpy.creation import asarray, full, zeros
from minixla.numpy.manipulation import atleast_2d, concatenate, flip, moveaxis, ravel, reshape
from minixla.numpy.elementwise import (
    abs, add, clip, equal, logical_not, multiply, not_equal, sqrt, subtract, true_divide)
from minixla.numpy.reductions import any, average, cumprod, cumsum, sum
from minixla.numpy.contractions import dot
from minixla.numpy.matrices import diag


def _array(x):
    return _arr(x) if isinstance(x, Tracer) else asarray(x)


def _static_int(value, what):
    if isinstance(value, Tracer):
        raise errors.ConcretizationTypeError(f"{what} must be static, not a traced value{_where_line()}")
    return operator.index(value)


# ---------------------------------------------------------------------------------------
# Differences and sums.

def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The ``n``-th discrete difference ``a[1:] - a[:-1]`` along ``axis`` (``jnp.diff``;
    ``!=`` for bools), after ``prepend``/``append`` (scalars broadcast to one slice)."""
    arr = _array(a)
    n = _static_int(n, "'n' argument of jnp.diff")
    if n == 0:
        return arr
    if n < 0:
        raise errors.ShapeError(f"order must be non-negative but got {n}")
    shape = get_aval(arr).shape
    if not shape:
        raise errors.ShapeError("diff requires input that is at least one dimensional")
    axis = _canon_axis1(_static_int(axis, "'axis' argument of jnp.diff"), len(shape))
    slab = tuple(1 if i == axis else d for i, d in enumerate(shape))
    def slab_of(extra):  # a scalar prepend/append is one slice along ``axis``
        extra = _array(extra)
        return broadcast_to(extra, slab) if get_aval(extra).ndim == 0 else extra

    parts = ([slab_of(prepend)] if prepend is not None else []) + [arr] + \
        ([slab_of(append)] if append is not None else [])
    if len(parts) > 1:
        arr = concatenate(parts, axis)
    later = tuple(slice(1, None) if i == axis else slice(None) for i in range(len(shape)))
    earlier = tuple(slice(None, -1) if i == axis else slice(None) for i in range(len(shape)))
    op = not_equal if get_aval(arr).dtype == np.bool_ else subtract
    for _ in range(n):
        arr = op(arr[later], arr[earlier])
    return arr


def ediff1d(ary, to_end=None, to_begin=None):
    """The differences of the flattened ``ary``, with ``to_begin``/``to_end`` around them
    (``jnp.ediff1d``)."""
    arr = ravel(_array(ary))
    result = lax.sub(arr[1:], arr[:-1])
    dt = get_aval(arr).dtype
    if to_begin is not None:
        result = concatenate([ravel(_cast(_array(to_begin), dt)), result])
    if to_end is not None:
        result = concatenate([result, ravel(_cast(_array(to_end), dt))])
    return result


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of ``y`` along ``axis`` by the trapezoidal rule (``jnp.trapezoid``), with
    sample points ``x`` or a constant spacing ``dx``."""
    if x is None:
        y_arr, = _promote_inexact(_array(y))
        dx_arr = _array(dx)
        if get_aval(dx_arr).ndim > 0:
            dx_arr = moveaxis(reshape(dx_arr, (1,) * (get_aval(y_arr).ndim - get_aval(dx_arr).ndim)
                                      + get_aval(dx_arr).shape), axis, -1)
    else:
        y_arr, x_arr = _promote_inexact(_array(y), _array(x))
        dx_arr = diff(x_arr) if get_aval(x_arr).ndim == 1 else moveaxis(diff(x_arr, axis=axis), axis, -1)
    y_arr = moveaxis(y_arr, axis, -1)
    dxs = get_aval(dx_arr).shape
    if not dxs or dxs[-1] == 1:
        step = dx_arr if not dxs else dx_arr[..., 0]
        ends = multiply(0.5, add(y_arr[..., 0], y_arr[..., -1]))
        return multiply(step, subtract(sum(y_arr, -1), ends))
    return sum(multiply(0.5, multiply(dx_arr, add(y_arr[..., 1:], y_arr[..., :-1]))), -1)


def _cumulative(name, scan, identity):
    def fn(x, /, *, axis=None, dtype=None, include_initial=False):
        x = _array(x)
        shape = get_aval(x).shape
        if not shape:
            raise errors.ShapeError(f"The input must be non-scalar to take a {name}, however a "
                                    "scalar value or scalar array was given.")
        if axis is None:
            if len(shape) > 1:
                raise errors.ShapeError(
                    f"The input array has rank {len(shape)}, however axis was not set to an explicit "
                    "value. The axis argument is only optional for one-dimensional arrays.")
            axis = 0
        axis = _canon_axis1(axis, len(shape))
        out = scan(x, axis, dtype=dtype)
        if include_initial:
            slab = tuple(1 if i == axis else d for i, d in enumerate(shape))
            out = concatenate([full(slab, identity, get_aval(out).dtype), out], axis)
        return out
    fn.__name__ = "cumulative_" + ("sum" if identity == 0 else "prod")
    fn.__doc__ = (f"``jnp.{fn.__name__}`` (Array API): the inclusive {name} along ``axis`` (needed "
                  f"above 1-D), with a leading {identity} when ``include_initial``.")
    return fn


cumulative_sum = _cumulative("cumulative sum", cumsum, 0)
cumulative_prod = _cumulative("cumulative product", cumprod, 1)


# ---------------------------------------------------------------------------------------
# Polynomials and 1-D convolution.

def polyval(p, x, *, unroll=16):
    """The polynomial with coefficients ``p`` (highest power first) at ``x`` by Horner's rule,
    ``y = y * x + p[i]`` (``jnp.polyval``; JAX scans over ``p``, here unrolled: ``p``'s length
    is static)."""
    p, x = _promote_dtypes(_array(p), _array(x))
    shape = broadcast_shapes(get_aval(p).shape[1:], get_aval(x).shape)
    y = zeros(shape, get_aval(x).dtype)
    if get_aval(p).shape[0] == 0 and (isinstance(x, Tracer) or isinstance(p, Tracer)):
        # (JAX's scan carries ``y * x + p``: its zeros are batched like ``x`` or ``p`` under vmap
        # even when it runs no step; a select on a predicate read from them, which is false)
        pred = lax.bitwise_or(any(not_equal(x, x)), any(not_equal(p, p)))
        return lax.select_n(pred, y, y)
    for i in range(get_aval(p).shape[0]):
        y = add(multiply(y, x), p[i])
    return y


def _conv(x, y, mode, op, precision, preferred_element_type):
    x, y = _array(x), _array(y)
    if get_aval(x).ndim != 1 or get_aval(y).ndim != 1:
        raise errors.ShapeError(f"{op}() only support 1-dimensional inputs.")
    x, y = (_promote_inexact(x, y) if preferred_element_type is None else _promote_dtypes(x, y))
    x, y = _array(x), _array(y)
    nx, ny = get_aval(x).shape[0], get_aval(y).shape[0]
    if nx == 0 or ny == 0:
        raise errors.ShapeError(f"{op}: inputs cannot be empty, got shapes {(nx,)} and {(ny,)}.")
    reverse_out = False
    if nx < ny:
        x, y = y, x
        reverse_out = op == "correlate"
    if op == "convolve":
        y = flip(y)
    n = get_aval(y).shape[0]
    padding = {"valid": [(0, 0)], "same": [(n // 2, n - n // 2 - 1)], "full": [(n - 1, n - 1)]}
    if mode not in padding:
        raise errors.ShapeError("mode must be one of ['full', 'same', 'valid']")
    out = lax.conv_general_dilated(reshape(x, (1, 1, -1)), reshape(y, (1, 1, -1)), (1,),
                                   padding[mode], precision=precision,
                                   preferred_element_type=preferred_element_type)[0, 0]
    return flip(out) if reverse_out else out


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """The discrete linear convolution of 1-D ``a`` and ``v`` (``jnp.convolve``), ``mode`` one
    of ``"full"``, ``"same"``, ``"valid"``: one ``conv_general_dilated`` with the kernel flipped."""
    return _conv(a, v, mode, "convolve", precision, preferred_element_type)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation of 1-D ``a`` and ``v`` (``jnp.correlate``)."""
    return _conv(a, v, mode, "correlate", precision, preferred_element_type)


# ---------------------------------------------------------------------------------------
# Covariance.

def _sample_weights(weights, samples, name):
    weights = _array(weights)
    if get_aval(weights).ndim > 1:
        raise errors.ShapeError(f"cannot handle multidimensional {name}")
    if get_aval(weights).shape[0] != samples:
        raise errors.ShapeError(f"incompatible numbers of samples and {name}")
    return abs(weights)


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, dtype=None):
    """The covariance matrix of the variables in the rows of ``m`` (columns if not ``rowvar``)
    (``jnp.cov``), with frequency and analytic weights as NumPy defines them."""
    if y is not None:
        m, y = _promote_inexact(_array(m), _array(y))
        if get_aval(y).ndim > 2:
            raise errors.ShapeError("y has more than 2 dimensions")
    else:
        m, = _promote_inexact(_array(m))
    m = _array(m)
    if get_aval(m).ndim > 2:
        raise errors.ShapeError("m has more than 2 dimensions")
    if dtype is not None and not np.issubdtype(np.dtype(dtype), np.inexact):
        raise errors.DTypeError(f"cov: dtype must be a subclass of float or complex; got dtype={dtype!r}")
    X = atleast_2d(m)
    if not rowvar and get_aval(m).ndim != 1:
        X = X.T
    if get_aval(X).shape[0] == 0:
        return reshape(asarray(np.zeros(0, get_aval(X).dtype)), (0, 0))
    if y is not None:
        y2 = atleast_2d(_array(y))
        if not rowvar and get_aval(y2).shape[0] != 1:
            y2 = y2.T
        X = concatenate([X, y2], axis=0)
    rows, samples = get_aval(X).shape
    if samples == 0:
        return full(() if rows == 1 else (rows, rows), np.nan, get_aval(X).dtype)
    if ddof is None:
        ddof = 1 if not bias else 0
    w = None
    if fweights is not None:
        fweights = _sample_weights(fweights, samples, "fweights")
        if get_aval(fweights).dtype.kind not in "iu":
            raise errors.DTypeError("fweights must be integer.")
        w = fweights
    if aweights is not None:
        aweights = _sample_weights(aweights, samples, "aweights")
        w = aweights if w is None else multiply(w, aweights)
    if dtype is not None:
        X = _cast(X, canonicalize_dtype(dtype))
        w = _cast(w, canonicalize_dtype(dtype)) if w is not None else w
    avg, w_sum = average(X, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        f = samples - ddof
    elif ddof == 0:
        f = w_sum
    elif aweights is None:
        f = subtract(w_sum, ddof)
    else:
        f = subtract(w_sum, true_divide(multiply(ddof, sum(multiply(w, aweights))), w_sum))
    X = subtract(X, reshape(avg, (-1, 1)))
    X_T = X.T if w is None else multiply(X, reshape(w, (1, -1))).T
    out = true_divide(dot(X, X_T), f)
    return reshape(out, ()) if rows == 1 else out


def corrcoef(x, y=None, rowvar=True, dtype=None):
    """Pearson correlation coefficients, ``cov / (std_i std_j)`` clipped to [-1, 1]
    (``jnp.corrcoef``)."""
    if dtype is not None and not np.issubdtype(np.dtype(dtype), np.inexact):
        raise errors.DTypeError(f"corrcoef: dtype must be a subclass of float or complex; got dtype={dtype!r}")
    c = cov(x, y, rowvar, dtype=dtype)
    if get_aval(c).ndim == 0:
        return true_divide(c, c)
    stddev = sqrt(diag(c))
    c = true_divide(true_divide(c, reshape(stddev, (-1, 1))), reshape(stddev, (1, -1)))
    return clip(c, -1, 1)


# ---------------------------------------------------------------------------------------
# Membership and counting.

def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """True where an element of ``element`` occurs in ``test_elements`` (``jnp.isin``), of
    ``element``'s shape: every pair compared (JAX's ``"compare_all"`` method; the others give
    the same values)."""
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise errors.ShapeError(f"isin: unknown method {method!r}")
    element, test_elements = _array(element), _array(test_elements)
    if math.prod(get_aval(element).shape) == 0 or math.prod(get_aval(test_elements).shape) == 0:
        # (as JAX: a constant of ``element``'s shape, so unbatched under vmap)
        return full(get_aval(element).shape, bool(invert), np.bool_)
    flat = reshape(element, (-1, 1))
    tests = reshape(test_elements, (1, -1))
    found = any(equal(flat, tests), axis=1)
    found = logical_not(found) if invert else found
    return reshape(found, get_aval(element).shape)


def bincount(x, weights=None, minlength=0, *, length=None):
    """How often each value ``0 .. length-1`` occurs in the 1-D integer ``x`` (``jnp.bincount``),
    or the sum of ``weights`` per value: a scatter-add into zeros. Negative values count as 0;
    values ``>= length`` are dropped. Under jit ``length`` must be given (the output shape
    cannot depend on the data: ConcretizationTypeError otherwise)."""
    x = _array(x)
    if get_aval(x).dtype == np.bool_:
        x = _cast(x, np.int32)
    if get_aval(x).dtype.kind not in "iu":
        raise errors.DTypeError(f"x argument to bincount must have an integer type; got {get_aval(x).dtype}")
    if get_aval(x).ndim != 1:
        raise errors.ShapeError("only 1-dimensional input supported.")
    minlength = _static_int(minlength, "The argument 'minlength' of jnp.bincount")
    if length is None:
        if isinstance(x, Tracer):
            raise errors.ConcretizationTypeError(
                "bincount: the output length depends on the values of x; pass a static `length` "
                f"argument{_where_line()}")
        values = np.asarray(x)
        length = builtins.max(minlength, values.size and int(builtins.max(0, values.max())) + 1)
    else:
        length = _static_int(length, "The argument 'length' of jnp.bincount")
    if weights is None:
        weights = np.array(1, dtype=_default_int())
    else:
        weights = _array(weights)
        if get_aval(weights).shape != get_aval(x).shape:
            raise errors.ShapeError(f"type of weights must match type of x. Got x of shape "
                                    f"{get_aval(x).shape} and weights of shape {get_aval(weights).shape}")
    weights = broadcast_to(_array(weights), get_aval(x).shape)
    counts = zeros(length, get_aval(weights).dtype)
    # one scatter-add of each weight into its bin; a bin past the end is dropped
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    return lax.scatter_add(counts, reshape(clip(x, 0), (-1, 1)), weights, dnums,
                           mode=lax.GatherScatterMode.FILL_OR_DROP)
