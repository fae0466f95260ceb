"""minixla's exceptions. They subclass the builtin JAX raises in the same situation
(``TypeError`` for dtype and tracer misuse, ``ValueError`` for shapes), so user code that
catches JAX's errors catches ours. Messages name the op, the shapes and the user's line::

    ShapeError: where: shapes (2, 3), (2, 3), (4,) cannot be broadcast together
      operands: (bool[2,3], f32[2,3], f32[4])
      at: model.py:12 (predict)

A shape rule's error gets them in ``Primitive.abstract_eval``; ``api_boundary`` (every public
function of ``minixla.numpy``/``lax``/``nn``) reports it as the function the user called."""
from __future__ import annotations

import ast
import functools
import linecache
import os
import re
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


class StaticArgumentError(MinixlaError, ValueError):
    """``static_argnums``/``static_argnames`` that do not fit the function (as ``jax.jit``'s ValueError)."""


class TransformTypeError(MinixlaError, TypeError):
    """A transformation (``grad``, ``jvp``, ``vjp``, ``vmap``, ...) called on arguments it cannot
    take: JAX's message and TypeError, plus the user's line."""


class TransformValueError(MinixlaError, ValueError):
    """A transformation's ValueError (``vmap`` axis sizes or ``in_axes``), with the user's line."""


class ScalarOverflowError(MinixlaError, OverflowError):
    """A Python int does not fit the integer dtype it must become: JAX first makes a Python int
    its default int (int32, int64 under ``jax_enable_x64``) and raises ``OverflowError`` when it
    does not fit (``x + 2**40``), rather than wrapping it silently."""


class UnsupportedError(MinixlaError, NotImplementedError):
    """The op or dtype exists in JAX but minixla's backend does not implement it yet."""


class JaxFunctionError(MinixlaError, TypeError):
    """A JAX function (``jax.numpy.sin``, ``jax.lax.add``, ``jax.random.normal``, ...) was called
    on a minixla traced value. JAX cannot trace minixla's values (it raises a bare "is not a
    valid JAX type"): call the ``minixla.numpy`` / ``minixla.lax`` / ``minixla.nn`` counterpart."""


def _is_internal(code) -> bool:
    return _is_internal_file(code.co_filename)


@functools.lru_cache(maxsize=4096)
def _is_internal_file(filename: str) -> bool:
    # (cached: every traced equation walks the stack for its user frame; abspath on each frame
    # was ~15% of tracing a large program such as an rbg gamma's loops)
    return os.path.abspath(filename).startswith(_INTERNAL_DIRS) or filename.startswith("<frozen")


def user_frame():
    """The innermost stack frame outside minixla's own package (and JAX's): the user's line."""
    f = sys._getframe(1)
    while f is not None:
        if not _is_internal(f.f_code):
            return f
        f = f.f_back
    return None


def user_source_line() -> str:
    """``'file.py:12 (fn)'`` for the user's line that is running now, or ``'<unknown>'``."""
    f = user_frame()
    if f is None:
        return "<unknown>"
    return f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})"


# ---------------------------------------------------------------------------------------
# API boundaries: every public function names itself in the errors that escape it.

#: the exceptions an API boundary completes with the op, the operands and the user's line
#: (builtin ones only by exact type: a subclass may take other constructor arguments)
_BUILTIN_ERRORS = (TypeError, ValueError, IndexError)


def api_boundary(fun, op: str | None = None, operands=None):
    """``fun`` wrapped so that an error escaping it names ``op`` (default: ``fun.__name__``),
    its operands' shapes and dtypes, and the user's line, as ``jax._src.traceback_util``'s
    ``api_boundary`` marks where user code enters JAX.

    Only the outermost boundary, the function the user called, completes the message: a
    ``minixla.numpy.where`` that fails in ``broadcast_shapes`` reports ``where`` and the
    shapes it was given. The error keeps its class (``ShapeError``, ``IndexError``, ...).
    ``operands(*args, **kwargs) -> (args, kwargs)`` picks what to describe (default: the call's
    arguments; a method passes its array instead of ``self``).
    """
    op = op or fun.__name__

    @functools.wraps(fun)
    def boundary(*args, **kwargs):
        try:
            return fun(*args, **kwargs)
        except (MinixlaError,) + _BUILTIN_ERRORS as e:
            if (getattr(e, "minixla_op", None) is not None
                    or not (isinstance(e, MinixlaError) or type(e) in _BUILTIN_ERRORS)
                    or _inside_boundary(sys._getframe(1))):
                raise
            shown = operands(*args, **kwargs) if operands is not None else (args, kwargs)
            new = type(e)(_complete_message(_message(e), op, describe_operands(*shown)))
            new.minixla_op = op
            raise new.with_traceback(e.__traceback__) from e.__cause__
    return boundary


_BOUNDARY_CODE = api_boundary(lambda: None).__code__


def _inside_boundary(f) -> bool:
    """Whether a frame between ``f`` and the user's code is another API boundary."""
    while f is not None and _is_internal(f.f_code):
        if f.f_code is _BOUNDARY_CODE:
            return True
        f = f.f_back
    return False


def _message(e) -> str:
    return e.args[0] if len(e.args) == 1 and isinstance(e.args[0], str) else str(e)


def _complete_message(msg: str, op: str, operands: str) -> str:
    """``'op: what went wrong'`` + an ``operands:`` line + an ``at:`` line. The operands line
    of a primitive of another name (``where`` failing in ``select_n``) is replaced by the op's;
    a primitive's own (``lax.pad`` is ``pad``) is kept: it has the avals the scalars took."""
    lines = msg.split("\n")
    own = [line for line in lines if line.startswith("  operands: ")]
    body = "\n".join(line for line in lines if not line.startswith(("  operands: ", "  at: ")))
    named = (op + ":", op + " ", f"lax.{op}:")  # (a message that names the op already, as JAX's may)
    if body.startswith(named) and own:
        operands_line = own[0]
    else:
        operands_line = f"  operands: ({operands})" if operands else ""
        if not body.startswith(named):
            body = f"{op}: {body}"
    return body + (f"\n{operands_line}" if operands_line else "") + f"\n  at: {user_source_line()}"


def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, type)


def _describe(x):
    """``'f32[2,3]'`` for an array, the repr of a Python scalar, a list with an array in it
    (``concatenate``'s operands); None for anything else (a static parameter)."""
    from minixla.core.avals import short_dtype_name
    if isinstance(x, (bool, int, float, complex)):
        return repr(x)
    if _is_array(x):
        try:
            name = short_dtype_name(x.dtype)
        except (KeyError, TypeError):
            name = str(x.dtype)
        return f"{name}[{','.join(map(str, x.shape))}]"
    if isinstance(x, (list, tuple)) and any(_is_array(v) for v in x):
        return "[" + ", ".join(_describe(v) or "..." for v in x) + "]"
    return None


def describe_operands(args, kwargs) -> str:
    """The operands of a call, e.g. ``'f32[2,3], f32[4], 1.5'``: the positional arrays and
    scalars, the keyword arrays (a keyword scalar is a parameter such as ``axis=7``, which the
    message itself names); static parameters (shapes, axes tuples, dtypes) are left out."""
    out = [d for d in map(_describe, args) if d is not None]
    out += [f"{k}={_describe(v)}" for k, v in kwargs.items()
            if not isinstance(v, (bool, int, float, complex)) and _describe(v) is not None]
    return ", ".join(out)


def wrap_public_functions(namespace: dict, extra=()) -> None:
    """Make every public function defined in the module ``namespace`` (and the ``extra``
    private ones, ``(name, op)`` pairs) an ``api_boundary``. Called at the end of a module."""
    module = namespace["__name__"]
    for name, value in list(namespace.items()):
        if (not name.startswith("_") and callable(value) and not isinstance(value, type)
                and getattr(value, "__module__", None) == module
                and getattr(value, "__code__", None) is not None):
            namespace[name] = api_boundary(value, name)
    for name, op in extra:
        namespace[name] = api_boundary(namespace[name], op)


def wrap_package_functions(namespace: dict, modules, extra=()) -> None:
    """``wrap_public_functions`` for a package split into ``modules`` (``minixla.numpy``'s and
    ``minixla.lax``'s families), called at the end of its ``__init__``: every public function
    defined in the package becomes an ``api_boundary`` named after the name it is bound to (an
    alias, ``divide = true_divide``, gets its own), once, and every binding of it, in the
    package ``namespace`` and in each module's, is replaced by that boundary, so calls from one
    family to another cross it as calls inside one module do. The boundaries carry the
    package's name as ``__module__`` (``minixla.numpy.where.__module__ == 'minixla.numpy'``)."""
    package = namespace["__name__"]
    defined_here = {package} | {m.__name__ for m in modules}
    boundaries = {}

    def boundary(name, fun, op):
        if (name, fun) not in boundaries:
            boundaries[name, fun] = api_boundary(fun, op)
            boundaries[name, fun].__module__ = package
        return boundaries[name, fun]

    for ns in [namespace] + [vars(m) for m in modules]:
        for name, value in list(ns.items()):
            if (not name.startswith("_") and callable(value) and not isinstance(value, type)
                    and getattr(value, "__module__", None) in defined_here
                    and getattr(value, "__code__", None) not in (None, _BOUNDARY_CODE)):
                ns[name] = boundary(name, value, name)
        for name, op in extra:
            if name in ns and ns[name].__code__ is not _BOUNDARY_CODE:
                ns[name] = boundary(name, ns[name], op)


# ---------------------------------------------------------------------------------------
# A JAX function called on a minixla traced value.

_JAX_FAMILIES = {"jax.numpy": "minixla.numpy", "jax.lax": "minixla.lax", "jax.nn": "minixla.nn",
                 "jax.random": "minixla.random"}


def _call_at(frame, lasti):
    """The function called by the instruction at ``lasti`` of ``frame`` (a Python 3.11 code
    position spans the whole call expression): ``(source text of the callee, the object)``."""
    try:
        line, end_line, col, end_col = list(frame.f_code.co_positions())[lasti // 2]
        lines = [linecache.getline(frame.f_code.co_filename, n).encode() for n in range(line, end_line + 1)]
        if line == end_line:
            text = lines[0][col:end_col]
        else:
            text = lines[0][col:] + b"".join(lines[1:-1]) + lines[-1][:end_col]
        node = ast.parse(text.decode().strip(), mode="eval").body
    except (AttributeError, TypeError, ValueError, IndexError, SyntaxError):  # (no co_positions before 3.11)
        return None, None
    if not isinstance(node, ast.Call):
        return None, None
    path, func = [], node.func
    while isinstance(func, ast.Attribute):
        path.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return ast.unparse(node.func), None
    scope = {**frame.f_builtins, **frame.f_globals, **frame.f_locals}
    obj = scope.get(func.id)
    for attr in reversed(path):
        obj = getattr(obj, attr, None)
    return ast.unparse(node.func), obj


def _jax_function_message(frame, lasti, jax_said: str = "") -> str:
    text, fn = _call_at(frame, lasti) if frame is not None else (None, None)
    module = (getattr(fn, "__module__", None) or "").replace("jax._src.", "jax.")
    name = getattr(fn, "__name__", None)
    if not module.startswith("jax") or name is None:
        what = f"{text} is a JAX function" if text else "a JAX function was called on a minixla traced value"
        advice = "call minixla.numpy / minixla.lax / minixla.nn / minixla.random functions on traced values"
    else:
        family = next((f for f in ("jax.random", "jax.lax", "jax.nn") if module.startswith(f)), module)
        public = f"{family}.{name}"
        what = f"{text} ({public}) is a JAX function" if text and text != public else f"{public} is a JAX function"
        target = _JAX_FAMILIES.get(family) or _minixla_module(family)
        if target is None:
            advice = f"minixla has no counterpart of {family} yet"
        else:
            import importlib
            has = hasattr(importlib.import_module(target), name)
            advice = f"use {target}.{name} instead" if has else f"{target} has no {name} yet"
    msg = f"{what}: it cannot take minixla's traced values; {advice}"
    if jax_said:
        msg += f"\n  JAX said: {jax_said.splitlines()[0][:300]}"
    where = f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})" if frame else "<unknown>"
    return msg + f"\n  at: {where}"


def _minixla_module(family: str):
    """minixla's module of the same path as the JAX module ``family`` (``jax.numpy.linalg`` ->
    ``minixla.numpy.linalg``), or None where there is none."""
    import importlib.util
    if not family.startswith("jax."):
        return None
    name = "minixla" + family[3:]
    try:
        return name if importlib.util.find_spec(name) is not None else None
    except (ImportError, ValueError):
        return None


def jax_function_error_from(e: BaseException):
    """If ``e`` is JAX's complaint about a minixla tracer passed to one of its functions (JAX
    names the offending type: ``minixla.core.tracing.Tracer``, a JVP or a batching tracer, or
    a ``minixla.random.PRNGKeyArray`` typed key), a ``JaxFunctionError`` naming
    that function, its minixla counterpart and the user's line; else None."""
    # (a minixla typed key reaching jax.random: JAX names its class, "unexpected PRNG key type")
    if isinstance(e, MinixlaError) or not re.search(r"minixla\.[\w.]*(Tracer|PRNGKeyArray)\b", str(e)):
        return None
    tb, user = e.__traceback__, None
    while tb is not None:
        if not _is_internal(tb.tb_frame.f_code):
            user = tb
        tb = tb.tb_next
    if user is None:
        # the traced function is JAX's own (``minixla.jit(jnp.sin)``, ``minixla.jit(jax.grad(f))``):
        # no frame of the user's in the traceback; the user's line is the one running now
        msg = _jax_function_message(None, None, _message(e))
        return JaxFunctionError(msg.replace("at: <unknown>", f"at: {user_source_line()}"))
    return JaxFunctionError(_jax_function_message(user.tb_frame, user.tb_lasti, _message(e)))


def jax_function_error_here():
    """A ``JaxFunctionError`` for a JAX function running now on a traced value (JAX converting
    it with ``np.asarray``), or None if no JAX code is on the stack below the user's line."""
    f = sys._getframe(1)
    saw_jax = False
    while f is not None and _is_internal(f.f_code):
        saw_jax = saw_jax or not os.path.abspath(f.f_code.co_filename).startswith(_PKG_DIR + os.sep)
        f = f.f_back
    if not saw_jax or f is None:
        return None
    return JaxFunctionError(_jax_function_message(f, f.f_lasti))

def api_name():
    """The name of the minixla function the user's line called (``'minixla.numpy.add'`` for
    ``x + 2**40``): the outermost public ``minixla.numpy``/``minixla.lax`` function below the
    user's frame, for error messages that name the op. ``None`` when there is none."""
    packages = {os.path.join(_PKG_DIR, "numpy") + os.sep: "minixla.numpy",
                os.path.join(_PKG_DIR, "lax") + os.sep: "minixla.lax"}
    f, found = sys._getframe(1), None
    while f is not None:
        fname = os.path.abspath(f.f_code.co_filename)
        if not (fname.startswith(_INTERNAL_DIRS) or f.f_code.co_filename.startswith("<frozen")):
            break
        package = next((p for d, p in packages.items() if fname.startswith(d)), None)
        if package is not None:
            name = f.f_code.co_name
            if name == "fn":  # a function made by a factory (``_binary``) knows its public name
                name = f.f_locals.get("name", "_")
            if not name.startswith(("_", "<")):
                found = f"{package}.{name}"
        f = f.f_back
    return found
