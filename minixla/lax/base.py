"""What every ``minixla.lax`` family builds on: ``_std_prim`` (a primitive with its shape rule
and its eager implementation, ``jax.lax`` run op by op), the dtype-kind sets the rules check,
and the argument checks and Python-scalar handling the user-facing functions share.
"""
from __future__ import annotations

import numpy as np
import jax

from minixla.core import errors
from minixla.core.avals import WeakScalar, get_aval
from minixla.core.primitive import Primitive, impl_rules, shape_rules


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


_NUM = "fiu"          # numeric
_ANY = "fiub"         # numeric or bool
_FLT = "f"            # floating


def _check_dims(opname, dims, ndim):
    if len(set(dims)) != len(dims) or any(not 0 <= d < ndim for d in dims):
        raise errors.ShapeError(f"{opname} dimensions {tuple(dims)} are invalid for rank {ndim}")


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
            # weak, as JAX's Python scalars: ``lax.add(1.0, 1.0)`` is a weak f32
            return WeakScalar(np.asarray(np.asarray(x, own), dtype)[()])
    return x


def reduction_identity(opcode, dtype):
    """The identity of a reducer, by its HLO opcode, as a 0-d array of ``dtype``: 0 for add,
    -inf (or the dtype's min, False) for maximum, +inf (max, True) for minimum, 1 for multiply,
    all bits set for and, 0 for or. Reductions, reduce-windows and ``where=`` masks use it."""
    dtype = np.dtype(dtype)
    if opcode in ("add", "or"):
        return np.zeros((), dtype)
    if opcode in ("maximum", "minimum"):
        big = opcode == "minimum"
        if dtype == np.bool_:
            return np.asarray(big, dtype)
        if dtype.kind == "f" or dtype.name == "bfloat16":
            return np.asarray(np.inf if big else -np.inf, dtype)
        info = np.iinfo(dtype)
        return np.asarray(info.max if big else info.min, dtype)
    if opcode == "multiply":
        return np.ones((), dtype)
    if opcode == "and":  # True / all bits set
        return np.asarray(True if dtype == np.bool_ else -1).astype(dtype)
    raise ValueError(opcode)
