"""The tracer: run a Python function on abstract values and record a jaxpr.

This is the "staging" half of ``jax/_src/interpreters/partial_eval.py`` in its simplest form.
``make_jaxpr(f)(*args)`` replaces each argument by a ``Tracer`` carrying only an abstract
value; every ``lax`` call on a tracer ``bind``s a primitive, which appends one equation to the
current ``JaxprTrace`` instead of computing anything. Python scalars become ``Literal`` s and
closed-over arrays become constvars.
"""
from __future__ import annotations

import functools
import inspect
import threading

import numpy as np
from jax import tree_util

from minixla.core import errors
from minixla.core.avals import ShapedArray, WeakScalar, get_aval
from minixla.core import name_stack
from minixla.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, SourceInfo, Var

#: the active traces, outermost first; a trace's ``level`` is its index here. Jaxpr traces
#: (``JaxprTrace``) and the transformations' traces (``minixla.interpreters``: JVP, batching)
#: share this one stack, as JAX's trace levels do: a primitive is processed by the trace of
#: the highest level among its operands, which treats the others as constants.
class _ThreadLocalStack(threading.local):
    """A list per thread (JAX's trace state is thread-local too): a thread that traces must not
    see another thread's traces, or a jitted call made there would be inlined into them."""

    def __init__(self):
        self.items = []
        self.stage_constant_ops = 0  # (see ``staging_constant_ops``)
        self.compile_time_eval = 0  # (see ``ensure_compile_time_eval``)

    def append(self, x):
        self.items.append(x)

    def pop(self):
        return self.items.pop()

    def __len__(self):
        return len(self.items)

    def __bool__(self):
        return bool(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def __iter__(self):
        return iter(self.items)

    def __reversed__(self):
        return reversed(self.items)


_trace_stack = _ThreadLocalStack()


class new_trace:
    """``with new_trace(trace):`` pushes ``trace`` on the stack (giving it its level) and pops it."""

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.trace.level = len(_trace_stack)
        _trace_stack.append(self.trace)
        return self.trace

    def __exit__(self, exc_type, exc, tb):
        popped = _trace_stack.pop()
        assert popped is self.trace, "trace stack out of order"
        if isinstance(exc, (TypeError, ValueError)):
            # JAX's bare "is not a valid JAX type" for one of our tracers (a jax.numpy function
            # called inside jit, grad or vmap): say which JAX function it was and what to call
            # instead. Every trace (jaxpr, JVP, batching) ends here, so all of them say it.
            jax_error = errors.jax_function_error_from(exc)
            if jax_error is not None:
                raise jax_error.with_traceback(tb) from None
        return False


class ensure_compile_time_eval:
    """``with minixla.ensure_compile_time_eval():`` operations whose operands are all concrete
    -- constants, ``iota``, ``jnp.arange``, ``lax.full`` -- run now, even inside ``jit`` (their
    values are NumPy arrays the Python code can branch on), as ``jax.ensure_compile_time_eval``;
    an operation on a traced value is still staged. Nests; thread-local."""

    def __enter__(self):
        _trace_stack.compile_time_eval += 1
        return self

    def __exit__(self, *exc):
        _trace_stack.compile_time_eval -= 1
        return False


class staging_constant_ops:
    """``with staging_constant_ops():`` a primitive applied to constants only is staged into
    the current jaxpr trace (``current_jaxpr_trace``) rather than evaluated eagerly, as JAX
    stages every operation inside ``jit``. Used for the backward pass of ``grad`` under a trace:
    its seed cotangent is a constant, and each operation on it evaluated eagerly would be a JAX
    op, an XLA compile (~40 ms at a process's start). Outside a jaxpr trace, a no-op."""

    def __enter__(self):
        _trace_stack.stage_constant_ops += 1

    def __exit__(self, *exc):
        _trace_stack.stage_constant_ops -= 1
        return False


def current_jaxpr_trace():
    """The innermost active ``JaxprTrace`` (where operand-less values such as iota are staged), or None
    (always inside ``ensure_compile_time_eval``: such values are computed, not staged)."""
    if _trace_stack.compile_time_eval:
        return None
    for t in reversed(_trace_stack):
        if isinstance(t, JaxprTrace) and not getattr(t, "tangent_only", False):
            return t
    return None


def _is_active(trace) -> bool:
    level = getattr(trace, "level", None)
    return level is not None and level < len(_trace_stack) and _trace_stack[level] is trace


def find_trace(args):
    """The highest-level active trace among the tracer arguments (None if there is no tracer).

    Tracers of lower (outer) levels are legitimate: the chosen trace treats them as constants
    (closures over an outer ``jit``/``grad``/``vmap`` variable). A tracer whose trace has already
    finished (kept in a global or a list, then reused) is an ``UnexpectedTracerError``, as in JAX.
    """
    found = None
    for x in args:
        if isinstance(x, Tracer):
            if not _is_active(x._trace):
                raise errors.UnexpectedTracerError(
                    f"Encountered an unexpected tracer {x!r}: it belongs to a trace that has "
                    "already finished (it escaped make_jaxpr/jit/grad/vmap, e.g. through a global or "
                    "a list). Pass the value as an argument instead.\n"
                    f"  at: {errors.user_source_line()}")
            if found is None or x._trace.level > found.level:
                found = x._trace
    if found is not None:
        # Inside a control-flow body (``lax.cond``/``while_loop``/``scan``) every operation is
        # staged into the body, even one on values it closes over only: they become the body's
        # inputs (JAX's closure conversion), and the op runs only when the body does.
        for t in reversed(_trace_stack):
            if t.level <= found.level:
                break
            if getattr(t, "stage_everything", False):
                return t
    else:
        # A transformation rule re-tracing a loop or branch body (``stage_constants``) stages
        # even the equations whose operands are all literals: run eagerly, they would come back
        # as closed-over constants that the re-traced body may not have.
        for t in reversed(_trace_stack):
            if getattr(t, "stage_constants", False):
                return t
    return found


class Tracer:
    """A stand-in for an array during tracing: an aval plus the jaxpr variable it names.

    Supports the operators and methods of ``jax.Array`` by calling ``minixla.numpy``.
    """
    __array_priority__ = 1000  # numpy defers `ndarray + tracer` to Tracer.__radd__

    def __init__(self, trace: "JaxprTrace", var: Var):
        self._trace = trace
        self.jaxpr_var = var  # (not ``var``: that is the variance method, as on jax.Array)

    aval = property(lambda self: self.jaxpr_var.aval)
    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __repr__(self):
        return f"Traced<{self.aval}>"

    def __len__(self):
        if not self.shape:
            raise errors.ShapeError(f"len() of unsized object (a traced {self.aval.str_short()})\n"
                                    f"  at: {errors.user_source_line()}")
        return self.shape[0]

    # --- Python control flow on traced values is an error, as in JAX -------------------
    def __bool__(self):
        raise errors.TracerBoolConversionError(
            f"Attempted boolean conversion of traced array with shape {self.aval.str_short()}.\n"
            "The truth value of a traced array is unknown while tracing (its data does not exist yet).\n"
            "Use minixla.numpy.where(cond, x, y) or lax.select_n to choose between values.\n"
            f"  at: {errors.user_source_line()}")

    def _concrete_error(self, what, cls=errors.ConcretizationTypeError):
        raise cls(f"{what} of traced array with shape {self.aval.str_short()} is not possible "
                  f"while tracing: the value is not known yet.\n  at: {errors.user_source_line()}")

    def __index__(self):
        self._concrete_error("Integer conversion (__index__)", errors.TracerIntegerConversionError)

    def __int__(self):
        self._concrete_error("int()", errors.TracerIntegerConversionError)

    def __float__(self):
        self._concrete_error("float()")

    def __array__(self, *a, **k):
        jax_error = errors.jax_function_error_here()  # jnp.asarray(x) & co. convert with numpy
        if jax_error is not None:
            raise jax_error
        self._concrete_error("Conversion to a numpy array")

    # --- operators: delegate to minixla.numpy -----------------------------------------
    def _np(self):
        import minixla.numpy as mnp
        return mnp

    def __neg__(self): return self._np().negative(self)
    def __pos__(self): return self
    def __abs__(self): return self._np().abs(self)
    def __add__(self, o): return self._np().add(self, o)
    def __radd__(self, o): return self._np().add(o, self)
    def __sub__(self, o): return self._np().subtract(self, o)
    def __rsub__(self, o): return self._np().subtract(o, self)
    def __mul__(self, o): return self._np().multiply(self, o)
    def __rmul__(self, o): return self._np().multiply(o, self)
    def __truediv__(self, o): return self._np().true_divide(self, o)
    def __rtruediv__(self, o): return self._np().true_divide(o, self)
    def __pow__(self, o): return self._np().power(self, o)
    def __matmul__(self, o): return self._np().matmul(self, o)
    def __rmatmul__(self, o): return self._np().matmul(o, self)
    def __lt__(self, o): return self._np().less(self, o)
    def __le__(self, o): return self._np().less_equal(self, o)
    def __gt__(self, o): return self._np().greater(self, o)
    def __ge__(self, o): return self._np().greater_equal(self, o)
    def __eq__(self, o): return self._np().equal(self, o)
    def __ne__(self, o): return self._np().not_equal(self, o)
    def __getitem__(self, idx): return self._np()._getitem(self, idx)
    __hash__ = object.__hash__

    def __floordiv__(self, o): return self._np().floor_divide(self, o)
    def __rfloordiv__(self, o): return self._np().floor_divide(o, self)
    def __mod__(self, o): return self._np().remainder(self, o)
    def __rmod__(self, o): return self._np().remainder(o, self)
    def __divmod__(self, o): return self._np().divmod(self, o)
    def __rdivmod__(self, o): return self._np().divmod(o, self)
    def __rpow__(self, o): return self._np().power(o, self)
    def __and__(self, o): return self._np().bitwise_and(self, o)
    def __rand__(self, o): return self._np().bitwise_and(o, self)
    def __or__(self, o): return self._np().bitwise_or(self, o)
    def __ror__(self, o): return self._np().bitwise_or(o, self)
    def __xor__(self, o): return self._np().bitwise_xor(self, o)
    def __rxor__(self, o): return self._np().bitwise_xor(o, self)
    def __invert__(self): return self._np().invert(self)
    def __lshift__(self, o): return self._np().left_shift(self, o)
    def __rlshift__(self, o): return self._np().left_shift(o, self)
    def __rshift__(self, o): return self._np().right_shift(self, o)
    def __rrshift__(self, o): return self._np().right_shift(o, self)

    def __iter__(self):
        if not self.shape:
            raise errors.ShapeError(f"iteration over a 0-d array (a traced {self.aval.str_short()})\n"
                                    f"  at: {errors.user_source_line()}")
        return (self[i] for i in range(self.shape[0]))

    @property
    def at(self):
        """``x.at[idx].set(v)`` / ``.add`` / ``.multiply`` / ``.min`` / ``.max`` / ``.get`` (static idx)."""
        return self._np()._IndexUpdateHelper(self)

    @property
    def T(self): return self._np().transpose(self)
    @property
    def mT(self): return self._np().swapaxes(self, -1, -2)
    def astype(self, dtype): return self._np().astype(self, dtype)
    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return self._np().reshape(self, shape)
    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return self._np().transpose(self, axes or None)
    def flatten(self): return self._np().ravel(self)
    def ravel(self): return self._np().ravel(self)
    def squeeze(self, axis=None): return self._np().squeeze(self, axis)
    def swapaxes(self, a, b): return self._np().swapaxes(self, a, b)
    def sum(self, axis=None, dtype=None, keepdims=False): return self._np().sum(self, axis, dtype, keepdims=keepdims)
    def prod(self, axis=None, dtype=None, keepdims=False): return self._np().prod(self, axis, dtype, keepdims=keepdims)
    def max(self, axis=None, keepdims=False): return self._np().max(self, axis, keepdims=keepdims)
    def min(self, axis=None, keepdims=False): return self._np().min(self, axis, keepdims=keepdims)
    def mean(self, axis=None, dtype=None, keepdims=False): return self._np().mean(self, axis, dtype, keepdims=keepdims)
    def var(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return self._np().var(self, axis, dtype, ddof=ddof, keepdims=keepdims)
    def std(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return self._np().std(self, axis, dtype, ddof=ddof, keepdims=keepdims)
    def all(self, axis=None, keepdims=False): return self._np().all(self, axis, keepdims=keepdims)
    def any(self, axis=None, keepdims=False): return self._np().any(self, axis, keepdims=keepdims)
    def argmax(self, axis=None, keepdims=False): return self._np().argmax(self, axis, keepdims=keepdims)
    def argmin(self, axis=None, keepdims=False): return self._np().argmin(self, axis, keepdims=keepdims)
    def cumsum(self, axis=None, dtype=None): return self._np().cumsum(self, axis, dtype)
    def cumprod(self, axis=None, dtype=None): return self._np().cumprod(self, axis, dtype)
    def clip(self, min=None, max=None): return self._np().clip(self, min, max)  # noqa: A002
    def round(self, decimals=0): return self._np().round(self, decimals)
    def dot(self, other): return self._np().dot(self, other)


class JaxprTrace:
    """Collects equations while a function runs on tracers."""

    def __init__(self):
        self.eqns: list[JaxprEqn] = []
        self.constvars: dict[int, Var] = {}
        self.consts: dict[int, object] = {}

    def new_arg(self, aval: ShapedArray) -> Tracer:
        return Tracer(self, Var(aval))

    def to_atom(self, x):
        """A tracer's variable, a Python scalar's ``Literal``, or a constvar for an array or for
        a tracer of an outer (lower-level) trace, whose value the outer trace supplies."""
        if isinstance(x, Tracer) and x._trace is self:
            return x.jaxpr_var
        if isinstance(x, Tracer):
            find_trace([x])  # a finished trace's tracer is an error, not a constant
            key = id(x)
            if key not in self.constvars:
                self.constvars[key] = Var(x.aval)
                self.consts[key] = x
            return self.constvars[key]
        aval = get_aval(x)
        if isinstance(x, WeakScalar):
            return Literal(x.value, aval)
        if aval.shape == () and not isinstance(x, np.ndarray):
            return Literal(np.asarray(x, aval.dtype)[()], aval)
        key = id(x)
        if key not in self.constvars:
            self.constvars[key] = Var(aval)
            self.consts[key] = x
        return self.constvars[key]

    def process_primitive(self, prim, args, params):
        atoms = [self.to_atom(x) for x in args]
        out = prim.abstract_eval(*[a.aval for a in atoms], **params)
        out_avals = out if prim.multiple_results else [out]
        outvars = [Var(a) for a in out_avals]
        frame = errors.user_frame()
        src = SourceInfo(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name,
                         name_stack.current()) if frame else None
        self.eqns.append(JaxprEqn(prim, atoms, outvars, dict(params), src))
        tracers = [Tracer(self, v) for v in outvars]
        return tracers if prim.multiple_results else tracers[0]


def trace_to_jaxpr(fun, in_avals, trace=None):
    """Trace ``fun`` on flat abstract inputs into a ``ClosedJaxpr``.

    ``fun`` takes and returns flat lists; output pytrees are handled by the caller. ``trace``
    is the (fresh) ``JaxprTrace`` to record into; linearize passes its own kind.
    """
    trace = trace if trace is not None else JaxprTrace()
    with new_trace(trace):
        in_tracers = [trace.new_arg(a) for a in in_avals]
        outs = fun(*in_tracers)  # (a JAX function meeting a tracer is reported by new_trace)
        out_atoms = [trace.to_atom(o) for o in outs]
    # Outputs that are literals or inputs still need a variable of their own.
    outvars = []
    for atom in out_atoms:
        if isinstance(atom, Literal):  # a constant output needs a variable: make it a constvar
            value = np.asarray(atom.value, atom.aval.dtype)  # (of the literal's aval: a Python
            trace.constvars[id(value)] = atom = Var(atom.aval)  # scalar stays weakly typed, as
            trace.consts[id(value)] = value  # JAX's ``1.0:f32[]`` output of a cond branch)
        outvars.append(atom)
    keys = list(trace.constvars)
    jaxpr = Jaxpr([trace.constvars[k] for k in keys], [t.jaxpr_var for t in in_tracers], trace.eqns, outvars)
    return ClosedJaxpr(jaxpr, [trace.consts[k] for k in keys])


def flatten_fun(fun, in_tree):
    """Wrap a pytree function as a flat one; the output treedef is stored in ``store[0]``."""
    store = []

    @functools.wraps(fun)
    def flat_fun(*flat_args):
        args, kwargs = tree_util.tree_unflatten(in_tree, flat_args)
        out = fun(*args, **kwargs)
        flat_out, out_tree = tree_util.tree_flatten(out)
        store.append(out_tree)
        return flat_out
    return flat_fun, store


def _has_aval(x) -> bool:
    try:
        get_aval(x)
        return True
    except errors.MinixlaError:
        return False


def make_jaxpr(fun):
    """``make_jaxpr(f)(*args)`` -> ``ClosedJaxpr``, as ``jax.make_jaxpr``.

    Arguments may be arrays, scalars, ``jax.ShapeDtypeStruct``-likes (anything with
    ``shape``/``dtype``) or pytrees of them; only their avals are used.
    """
    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        from minixla.random.keys import jax_keys_to_minixla  # (JAX typed keys: as minixla's)
        args, kwargs = jax_keys_to_minixla((args, kwargs), "make_jaxpr")
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        flat_fun, _ = flatten_fun(fun, in_tree)
        try:
            in_avals = [get_aval(x) for x in flat]
        except errors.MinixlaError as e:
            try:  # the argument by its parameter name and pytree path, as jax's "at path s"
                names = [p.name for p in inspect.signature(fun).parameters.values()
                         if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            except (TypeError, ValueError):
                names = []
            named = [(names[i] if i < len(names) else f"args[{i}]", a) for i, a in enumerate(args)]
            bad = next(f"{n}{tree_util.keystr(p)}" for n, a in named + list(kwargs.items())
                       for p, x in tree_util.tree_flatten_with_path(a)[0] if not _has_aval(x))
            name = getattr(fun, "__name__", "fn")
            raise type(e)(f"make_jaxpr({name}): argument {bad}: {e.args[0]}\n"
                          f"  at: {errors.user_source_line()}") from None
        return trace_to_jaxpr(flat_fun, in_avals)
    return wrapped
