"""minixla's exceptions. They subclass the builtin JAX raises in the same situation
(``TypeError`` for dtype and tracer misuse, ``ValueError`` for shapes), so user code that
catches JAX's errors catches ours. Messages name the op, the shapes and the user's line."""
from __future__ import annotations

import os
import sys

import jax

import minixla

_PKG_DIR = os.path.dirname(os.path.abspath(minixla.__file__))
#: frames inside these packages are never "the user's line"
_INTERNAL_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (minixla, jax))


class MinixlaError(Exception):
    """Base class of every error minixla raises on purpose."""


class ShapeError(MinixlaError, TypeError, ValueError):
    """Operand shapes do not fit the op.

    JAX raises ``TypeError`` for a shape mismatch inside a ``lax`` op and ``ValueError`` for
    NumPy-style broadcasting failures; a ``ShapeError`` is both, so either ``except`` catches it."""


class DTypeError(MinixlaError, TypeError):
    """Operand dtypes do not fit the op, or a dtype is not supported."""


class ConcretizationTypeError(MinixlaError, TypeError):
    """A traced value was used where a concrete Python value is needed (``jax.errors``)."""


class TracerBoolConversionError(ConcretizationTypeError):
    """``if x > 0:`` on a traced value (``jax.errors.TracerBoolConversionError``)."""


class TracerIntegerConversionError(ConcretizationTypeError):
    """``int(x)`` or ``range(x)`` on a traced value (``jax.errors.TracerIntegerConversionError``)."""


class UnexpectedTracerError(MinixlaError, TypeError):
    """A tracer from a finished or outer trace was used (``jax.errors.UnexpectedTracerError``)."""


class ScalarOverflowError(MinixlaError, OverflowError):
    """A Python int does not fit the integer dtype it must become: JAX first makes a Python int
    its default int (int32, int64 under ``jax_enable_x64``) and raises ``OverflowError`` when it
    does not fit (``x + 2**40``), rather than wrapping it silently."""


class UnsupportedError(MinixlaError, NotImplementedError):
    """The op or dtype exists in JAX but minixla's backend does not implement it yet."""


def user_frame():
    """The innermost stack frame outside minixla's own package: the user's line."""
    f = sys._getframe(1)
    while f is not None:
        fname = os.path.abspath(f.f_code.co_filename)
        internal = fname.startswith(_INTERNAL_DIRS) or f.f_code.co_filename.startswith("<frozen")
        if not internal:
            return f
        f = f.f_back
    return None


def user_source_line() -> str:
    """``'file.py:12 (fn)'`` for the user's line that is running now, or ``'<unknown>'``."""
    f = user_frame()
    if f is None:
        return "<unknown>"
    return f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})"


def api_name():
    """The name of the minixla function the user's line called (``'minixla.numpy.add'`` for
    ``x + 2**40``): the outermost public ``minixla.numpy``/``minixla.lax`` function below the
    user's frame, for error messages that name the op. ``None`` when there is none."""
    modules = {os.path.join(_PKG_DIR, "numpy.py"): "minixla.numpy", os.path.join(_PKG_DIR, "lax.py"): "minixla.lax"}
    f, found = sys._getframe(1), None
    while f is not None:
        fname = os.path.abspath(f.f_code.co_filename)
        if not (fname.startswith(_INTERNAL_DIRS) or f.f_code.co_filename.startswith("<frozen")):
            break
        if fname in modules:
            name = f.f_code.co_name
            if name == "fn":  # a function made by a factory (``_binary``) knows its public name
                name = f.f_locals.get("name", "_")
            if not name.startswith(("_", "<")):
                found = f"{modules[fname]}.{name}"
        f = f.f_back
    return found
