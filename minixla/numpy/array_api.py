"""The Array API standard's names that ``jax.numpy`` adds next to NumPy's: dtype predicates
(``isdtype``, ``issubdtype`` and NumPy's abstract scalar classes), ``permute_dims``, ``concat``,
``bitwise_left_shift``/``bitwise_right_shift``, ``nextafter``, ``matvec``/``vecmat``, and the
small NumPy names beside them (``fabs``, ``iscomplexobj``/``isrealobj``, ``nancumsum``/
``nancumprod``). Each is a composition of minixla primitives, as in JAX's ``lax_numpy.py``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.contractions import matmul
from minixla.numpy.creation import asarray
from minixla.numpy.elementwise import isnan, left_shift, right_shift, where
from minixla.numpy.manipulation import concatenate, expand_dims, ravel, squeeze
from minixla.numpy.promotion import _arr, _full_shape, _promote_inexact, _where_line
from minixla.numpy.reductions import cumprod, cumsum

# NumPy's abstract scalar classes, the very objects jax.numpy exports (``jnp.floating is np.floating``)
generic, number, inexact, floating, complexfloating = np.generic, np.number, np.inexact, np.floating, np.complexfloating
integer, signedinteger, unsignedinteger = np.integer, np.signedinteger, np.unsignedinteger
flexible, character = np.flexible, np.character
euler_gamma = np.euler_gamma
__array_api_version__ = "2024.12"  # the standard's revision jax.numpy 0.10 implements

#: ml_dtypes' floats (bfloat16, float8_*, ...): NumPy files them under ``np.void``-like kinds,
#: JAX's dtype lattice under ``floating``
_ML_FLOATS = frozenset(np.dtype(getattr(ml_dtypes, n)) for n in dir(ml_dtypes)
                       if n.startswith(("bfloat16", "float8_", "float6_", "float4_")))
_ML_INTS = {np.dtype(getattr(ml_dtypes, n)): n.startswith("u") for n in ("int2", "int4", "uint2", "uint4")
            if hasattr(ml_dtypes, n)}

_KINDS = {
    "bool": lambda d: d == np.bool_,
    "signed integer": lambda d: d.kind == "i" or _ML_INTS.get(d) is False,
    "unsigned integer": lambda d: d.kind == "u" or _ML_INTS.get(d) is True,
    "integral": lambda d: d.kind in "iu" or d in _ML_INTS,
    "real floating": lambda d: d.kind == "f" or d in _ML_FLOATS,
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc" or d in _ML_INTS or d in _ML_FLOATS,
}


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is of ``kind`` (``jnp.isdtype``, the Array API's): ``kind`` is a dtype
    (equality), one of ``'bool'``, ``'signed integer'``, ``'unsigned integer'``, ``'integral'``,
    ``'real floating'`` (bfloat16 and the float8 types included), ``'complex floating'``,
    ``'numeric'``, or a tuple of these (any). Raises JAX's ``ValueError`` for an unknown kind
    string and ``TypeError`` for a kind that is neither."""
    d = np.dtype(dtype)
    for k in kind if isinstance(kind, tuple) else (kind,):
        if isinstance(k, str) and k in _KINDS:
            if _KINDS[k](d):
                return True
            continue
        try:
            other = np.dtype(k)
        except TypeError as e:
            if isinstance(k, str):
                raise ValueError(f"Unrecognized kind={k!r} expected one of {list(_KINDS)}, "
                                 "or a compatible input for jnp.dtype()") from None
            raise TypeError(f"Expected kind to be a dtype, string, or tuple; got kind={k!r}") from e
        if d == other:
            return True
    return False


def _scalar_type(x):
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    return np.dtype(x).type


def issubdtype(arg1, arg2) -> bool:
    """``np.issubdtype`` on JAX's dtype lattice (``jnp.issubdtype``): bfloat16 and the float8
    types are ``floating``, int4/uint4 ``signedinteger``/``unsignedinteger``. ``arg1``, ``arg2``:
    dtypes, dtype names, scalar types or NumPy's abstract classes (``jnp.floating`` ...)."""
    t1, t2 = _scalar_type(arg1), _scalar_type(arg2)
    d1 = np.dtype(t1)
    if d1 in _ML_FLOATS or d1 in _ML_INTS:
        if t1 is t2:
            return True
        if not (isinstance(arg2, type) and t2 in (np.generic, np.number, np.inexact, np.floating,
                                                   np.integer, np.signedinteger, np.unsignedinteger)):
            return False
        if d1 in _ML_FLOATS:
            return t2 in (np.generic, np.number, np.inexact, np.floating)
        return t2 in (np.generic, np.number, np.integer,
                      np.unsignedinteger if _ML_INTS[d1] else np.signedinteger)
    return bool(np.issubdtype(t1, t2))


def iscomplexobj(x) -> bool:
    """Whether ``x`` has a complex dtype (``jnp.iscomplexobj``; ``None`` is not): minixla has no
    complex dtypes, so only a complex Python or NumPy value is."""
    if x is None:
        return False
    dt = getattr(x, "dtype", None)
    if dt is None:
        dt = get_aval(x).dtype if isinstance(x, Tracer) else np.asarray(x).dtype
    return bool(np.issubdtype(np.dtype(dt), np.complexfloating))


def isrealobj(x) -> bool:
    """``not iscomplexobj(x)`` (``jnp.isrealobj``)."""
    return not iscomplexobj(x)


def permute_dims(a, /, axes):
    """``a`` with its axes permuted to ``axes`` (``jnp.permute_dims``, the Array API's
    ``transpose``): one ``transpose`` primitive; ``axes`` a permutation of ``range(a.ndim)``."""
    return lax.transpose(_arr(a) if isinstance(a, Tracer) else asarray(a), tuple(axes))


def concat(arrays, /, *, axis=0):
    """``concatenate(arrays, axis)`` (``jnp.concat``, the Array API's name); ``axis=None``
    flattens each array first."""
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    return concatenate(arrays, axis=axis)


def bitwise_left_shift(x1, x2, /):
    """``jnp.bitwise_left_shift``, the Array API's ``left_shift``."""
    return left_shift(x1, x2)


def bitwise_right_shift(x1, x2, /):
    """``jnp.bitwise_right_shift``, the Array API's ``right_shift``."""
    return right_shift(x1, x2)


def nextafter(x1, x2, /):
    """The next float after ``x1`` towards ``x2`` (``jnp.nextafter``): both promoted to one
    inexact dtype (integers become the default float), broadcast, then ``lax.nextafter``."""
    x1, x2 = _promote_inexact(_arr(x1), _arr(x2))
    return lax.nextafter(*_full_shape(x1, x2))


def fabs(x, /):
    """``|x|`` as a float (``jnp.fabs``): integers and bools become the default float first."""
    (x,) = _promote_inexact(_arr(x))
    return lax.abs(x)


def _check_vec(name, v, m, v_axis, m_axis):
    sv, sm = get_aval(v).shape, get_aval(m).shape
    if len(sv) < 1 or len(sm) < 2 or sv[-1] != sm[m_axis]:
        raise errors.ShapeError(f"{name}: the vector's last axis must match the matrix's axis "
                                f"{m_axis}; got shapes {sv} and {sm}{_where_line()}")


def matvec(x1, x2, /):
    """Batched matrix-vector product (``jnp.matvec``): ``x1`` ``(..., M, N)``, ``x2`` ``(..., N)``,
    leading axes broadcast, result ``(..., M)``; ``matmul`` of ``x1`` with ``x2[..., None]``."""
    x1, x2 = (asarray(x) if not isinstance(x, Tracer) else x for x in (x1, x2))
    _check_vec("matvec", x2, x1, -1, -1)
    return squeeze(matmul(x1, expand_dims(x2, -1)), -1)


def vecmat(x1, x2, /):
    """Batched vector-matrix product (``jnp.vecmat``; the conjugate is the identity without
    complex dtypes): ``x1`` ``(..., M)``, ``x2`` ``(..., M, N)``, result ``(..., N)``."""
    x1, x2 = (asarray(x) if not isinstance(x, Tracer) else x for x in (x1, x2))
    _check_vec("vecmat", x1, x2, -1, -2)
    return squeeze(matmul(expand_dims(x1, -2), x2), -2)


def _nan_cumulative(scan, fill, name):
    def fn(a, axis=None, dtype=None, out=None):
        a = _arr(a) if isinstance(a, Tracer) else asarray(a)
        if get_aval(a).dtype.kind == "f" or get_aval(a).dtype in _ML_FLOATS:
            a = where(isnan(a), np.asarray(fill, get_aval(a).dtype), a)
        return scan(a, axis=axis, dtype=dtype)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``jnp.{name}(a, axis=None, dtype=None)``: ``{name[3:]}`` with each NaN read as "
                  f"{fill} (flattened if axis is None).")
    return fn


nancumsum = _nan_cumulative(cumsum, 0, "nancumsum")
nancumprod = _nan_cumulative(cumprod, 1, "nancumprod")

__all__ = ["__array_api_version__", "generic", "number", "inexact", "floating", "complexfloating", "integer", "signedinteger",
           "unsignedinteger", "flexible", "character", "euler_gamma", "isdtype", "issubdtype",
           "iscomplexobj", "isrealobj", "permute_dims", "concat", "bitwise_left_shift",
           "bitwise_right_shift", "nextafter", "fabs", "matvec", "vecmat", "nancumsum", "nancumprod"]
