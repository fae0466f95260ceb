"""Abstract values: what the tracer knows about an array without its data.

Mirrors ``jax/_src/core.py``'s ``ShapedArray``: a shape, a dtype and a ``weak_type`` flag.
A weak type marks a value that came from a Python scalar (``x + 1.0``); it takes the
dtype of whatever it is combined with, exactly as in JAX.
"""
from __future__ import annotations

from dataclasses import dataclass

import operator

import numpy as np
from jax import dtypes as jax_dtypes

from minixla.core import errors

#: JAX's short dtype names, used by the jaxpr printer.
_SHORT_NAMES = {
    "float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8",
    "uint64": "u64", "uint32": "u32", "uint16": "u16", "uint8": "u8",
    "bool": "bool", "complex64": "c64", "complex128": "c128",
}


def short_dtype_name(dtype) -> str:
    """``float32 -> 'f32'`` as JAX prints it in a jaxpr."""
    return _SHORT_NAMES[np.dtype(dtype).name]


def canonicalize_dtype(dtype) -> np.dtype:
    """The dtype JAX would really use (float64 -> float32 unless x64 is enabled).

    Raises ``DTypeError`` (a ``TypeError``, as JAX's) for a name NumPy does not know or a
    non-numeric dtype (str, object, datetime), ``UnsupportedError`` for a complex dtype (JAX
    has them; minixla's backends do not)."""
    try:
        dt = np.dtype(jax_dtypes.canonicalize_dtype(dtype))
    except TypeError:
        raise errors.DTypeError(f"data type {dtype!r} not understood") from None
    if dt.kind == "c":
        raise errors.UnsupportedError(f"minixla does not support complex dtypes ({dt.name}): "
                                      "JAX does, minixla's backends do not yet")
    if dt.kind in "OSUMm":
        raise errors.DTypeError(f"dtype {dt} is not a valid minixla (or JAX) array dtype")
    return dt


def canonicalize_shape(shape) -> tuple:
    """``shape`` (an int or a sequence of ints) as a tuple of Python ints, as
    ``jax.core.canonicalize_shape``. A shape is static: a traced value in it raises
    ``ConcretizationTypeError``; a non-integer raises ``ShapeError`` (both ``TypeError`` s,
    as JAX's)."""
    from minixla.core.tracing import Tracer  # local: tracing imports this module
    dims = shape if isinstance(shape, (tuple, list)) or np.ndim(shape) == 1 else (shape,)
    if isinstance(shape, Tracer) or any(isinstance(d, Tracer) for d in dims):
        raise errors.ConcretizationTypeError(
            f"shapes must be sequences of concrete integers, got {shape!r}: a traced value's data "
            "is not known while tracing. Pass it as a static argument (jit's static_argnums) or "
            "use a shape known in Python (x.shape)")
    try:
        return tuple(operator.index(d) for d in dims)
    except TypeError:
        raise errors.ShapeError(f"shapes must be sequences of integers, got {shape!r}") from None


@dataclass(frozen=True)
class ShapedArray:
    """Abstract value of an array: ``shape`` (tuple of ints), ``dtype`` (numpy dtype), ``weak_type``.

    Mirrors ``jax.core.ShapedArray``. Printed as JAX does: ``f32[8,3]``.
    """
    shape: tuple
    dtype: np.dtype
    weak_type: bool = False

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def str_short(self) -> str:
        return f"{short_dtype_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def update(self, **kw) -> "ShapedArray":
        fields = dict(shape=self.shape, dtype=self.dtype, weak_type=self.weak_type)
        fields.update(kw)
        return ShapedArray(**fields)

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short()}{weak})"


class WeakScalar:
    """A concrete scalar that keeps JAX's weak type after promotion (``int32_array + 1.5``
    promotes 1.5 to a *weak* f32). Becomes a weakly-typed ``Literal`` in the jaxpr."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value  # a numpy scalar of the promoted dtype

    @property
    def shape(self):
        return ()

    @property
    def dtype(self):
        return self.value.dtype

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.value, dtype)


class WeakArray(np.ndarray):
    """An eager (op-by-op) result that JAX types weakly: a NumPy array whose ``weak_type`` is
    True, as ``jax.Array.weak_type`` of ``jnp.asarray(1.0)``, ``lax.broadcast_in_dim(1.0, ...)``
    or ``lax.neg(1.0)``. ``minixla.numpy`` and ``minixla.lax`` read the flag through
    ``get_aval``, so such a value meets another array in JAX's order (``weak_f32 + f16_array`` is
    float16, as in JAX eager). Its operators are ``minixla.numpy``'s (JAX's promotion); NumPy's
    own functions and ufuncs see a plain array (NumPy has no weak types) and return one, as
    does ``astype`` (a strong result, as ``jax.Array.astype``). Indexing and views keep the
    flag, as JAX's slices of a weak array are weak."""

    weak_type = True

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(_strong(x) for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(_strong(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from jax import tree_util
        args, kwargs = tree_util.tree_map(_strong, (args, kwargs))
        return func(*args, **kwargs)

    def __getitem__(self, idx):  # (JAX's indexing: a weak result, clamped gathers)
        import minixla.numpy as mnp
        return mnp._getitem(self, idx)

    def astype(self, dtype, *args, **kwargs):
        return np.asarray(self).astype(dtype, *args, **kwargs)

    def __repr__(self):
        return np.asarray(self).__repr__()[:-1] + ", weak_type=True)"

    def __reduce__(self):  # (pickles as a plain array plus the flag)
        return (weak_array, (np.asarray(self),))


def _strong(x):
    return x.view(np.ndarray) if isinstance(x, WeakArray) else x


def _mnp_method(name, reflected=False):
    def method(self, other):
        import minixla.numpy as mnp
        fn = getattr(mnp, name)
        return fn(other, self) if reflected else fn(self, other)
    method.__name__ = name
    return method


for _op, _name in [("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                   ("truediv", "true_divide"), ("floordiv", "floor_divide"), ("mod", "remainder"),
                   ("pow", "power"), ("matmul", "matmul"), ("and", "bitwise_and"),
                   ("or", "bitwise_or"), ("xor", "bitwise_xor"), ("lshift", "left_shift"),
                   ("rshift", "right_shift"), ("divmod", "divmod")]:
    setattr(WeakArray, f"__{_op}__", _mnp_method(_name))
    setattr(WeakArray, f"__r{_op}__", _mnp_method(_name, reflected=True))
for _op, _name in [("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                   ("ge", "greater_equal"), ("eq", "equal"), ("ne", "not_equal")]:
    setattr(WeakArray, f"__{_op}__", _mnp_method(_name))
for _op, _name in [("neg", "negative"), ("abs", "abs"), ("invert", "invert")]:
    setattr(WeakArray, f"__{_op}__", lambda self, _n=_name: getattr(
        __import__("minixla.numpy", fromlist=[_n]), _n)(self))
WeakArray.__hash__ = None


def weak_array(x, weak=True):
    """``x`` (a NumPy array) marked weakly typed when ``weak`` (a ``WeakArray`` view), else a
    plain array: how an eager result carries the weak type its shape rule gave it."""
    x = np.asarray(x)
    return x.view(WeakArray) if weak else x


def check_python_int(x: int, dtype) -> None:
    """Raise ``ScalarOverflowError`` (an ``OverflowError``) when the Python int ``x`` does not fit
    ``dtype``. JAX makes a Python int its default int (int32; int64 under ``jax_enable_x64``)
    before it takes the dtype of the array it meets, and raises there instead of wrapping
    (``int32_array + 2**40``); a value that fits then wraps into a narrower dtype as
    ``convert_element_type`` does (``uint8_array + 300`` adds 44)."""
    info = np.iinfo(dtype)
    if not info.min <= x <= info.max:
        from minixla.core import errors  # local: errors imports the package
        op = errors.api_name()
        raise errors.ScalarOverflowError(
            f"Python int {x} too large to convert to {np.dtype(dtype).name}"
            f"{f' (an operand of {op})' if op else ''}: a Python int becomes the default int "
            f"({np.dtype(dtype).name}) before it meets the other operand, as in JAX"
            f"{'; jax_enable_x64 makes it int64' if np.dtype(dtype).itemsize < 8 else ''}."
            f"\n  at: {errors.user_source_line()}")


def get_aval(x) -> ShapedArray:
    """Abstract value of a concrete Python/numpy/JAX value (Python scalars are weakly typed)."""
    from minixla.core.tracing import Tracer  # local: tracing imports this module
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        dtype = canonicalize_dtype(jax_dtypes.result_type(type(x)))
        if isinstance(x, int) and not isinstance(x, bool):
            check_python_int(x, dtype)
        return ShapedArray((), dtype, weak_type=not isinstance(x, bool))
    if isinstance(x, WeakScalar):
        return ShapedArray((), x.value.dtype, weak_type=True)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        weak = bool(getattr(x, "weak_type", False))
        return ShapedArray(tuple(x.shape), canonicalize_dtype(x.dtype), weak)
    raise errors.DTypeError(f"Value {x!r} of type {type(x).__name__} is not a valid minixla type: "
                            "not an array, a Python scalar or a pytree of them")


def promote_types(*avals: ShapedArray):
    """JAX's type promotion over avals: returns ``(dtype, weak_type)``.

    Delegates to ``jax.dtypes.result_type`` so the lattice (weak types included) is JAX's own.
    A weakly-typed aval is passed to JAX as its Python type (``int``, ``float``, ...).
    """
    args = []
    for a in avals:
        if a.weak_type:
            kind = a.dtype.kind
            args.append({"b": bool, "i": int, "u": int, "f": float, "c": complex}.get(kind, a.dtype))
        else:
            args.append(a.dtype)
    dtype, weak = jax_dtypes.result_type(*args, return_weak_type_flag=True)
    return canonicalize_dtype(dtype), bool(weak)
