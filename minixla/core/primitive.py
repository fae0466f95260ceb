"""Primitives and ``bind``, as in ``jax/_src/core.py``.

A ``Primitive`` is just a name. What each stage knows about it lives in that stage's rules
table, keyed by the primitive: here ``shape_rules`` (abstract evaluation: avals in, avals out)
and ``impl_rules`` (eager evaluation on concrete arrays). Lowering, evaluation, code
generation and the JAX hand-off keep their own tables in their own modules.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from minixla.core import errors
from minixla.core.avals import WeakArray, WeakScalar, get_aval, weak_array

#: primitive -> fn(*avals, **params) -> ShapedArray (or list of them if multiple_results)
shape_rules: dict = {}
#: primitive -> fn(*arrays, **params) -> array: eager (op-by-op) evaluation
impl_rules: dict = {}
#: every primitive ever created, by name (the coverage table enumerates it)
registry: dict = {}


class _Eager(threading.local):
    depth = 0


#: how many eager implementations this thread is inside (an operand-less primitive bound
#: there -- an ``iota`` in a loop body a constant loop runs eagerly -- is computed, not staged
#: into the trace around the loop, whose value it would otherwise leak into the eager loop)
_eager = _Eager()


class Primitive:
    """An operation of the jaxpr language (``jax.core.Primitive``)."""

    multiple_results = False

    def __init__(self, name: str):
        self.name = name
        registry[name] = self

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        """Apply the primitive: stage it out if any argument is a tracer, else run it eagerly."""
        from minixla.core.tracing import _trace_stack, current_jaxpr_trace, find_trace
        trace = find_trace(args)
        if trace is None and not _eager.depth and (not args or _trace_stack.stage_constant_ops):
            # an operand-less primitive (iota) is staged, as in JAX; so is every primitive in
            # ``tracing.staging_constant_ops`` (grad's backward pass under a trace) -- but not
            # inside an eager implementation (a constant loop's body), whose values are concrete
            trace = current_jaxpr_trace()
        if trace is not None:
            return trace.process_primitive(self, args, params)
        # Eager evaluation checks the operands with the shape rule first, as JAX's eager
        # ``bind`` does (a bad reshape is minixla's ShapeError naming the op, the shapes and the
        # user's line, never JAX's MLIR verifier text), and the result takes the rule's weak type
        # (``broadcast_in_dim(1.0, ...)`` stays weak and adds to a float16 array as float16).
        avals = _eager_avals(args)
        out_avals = None if avals is None else self.abstract_eval(*avals, **params)
        args = [np.asarray(a) if isinstance(a, (WeakScalar, WeakArray)) else a for a in args]
        _eager.depth += 1
        try:
            out = impl_rules[self](*args, **params)
        finally:
            _eager.depth -= 1
        if out_avals is None:
            return out
        if self.multiple_results:
            return type(out)(_with_weak_type(o, a) for o, a in zip(out, out_avals))
        return _with_weak_type(out, out_avals)

    def abstract_eval(self, *avals, **params):
        """Output aval(s) from input avals, with errors that name the op and the user's line."""
        try:
            rule = shape_rules[self]
        except KeyError:
            raise errors.UnsupportedError(f"primitive '{self.name}' has no shape rule") from None
        try:
            out = rule(*avals, **params)
            for aval in (out if isinstance(out, (list, tuple)) else [out]):
                _check_shape(aval)
            return out
        except errors.MinixlaError as e:
            shapes = ", ".join(a.str_short() for a in avals)
            what = e.args[0] if e.args[0].startswith((self.name + ":", self.name + " ")) else f"{self.name}: {e.args[0]}"
            msg = f"{what}\n  operands: ({shapes})\n  at: {errors.user_source_line()}"
            raise type(e)(msg) from None


def _eager_avals(args):
    """The avals of eager operands, or None where one is not a minixla array (a JAX typed key
    passed through an eager loop: its primitives' JAX implementations check it themselves)."""
    try:
        return [get_aval(a) for a in args]
    except (errors.DTypeError, errors.UnsupportedError):
        return None


def _with_weak_type(value, aval):
    """An eager result as its shape rule typed it: a ``WeakArray`` when the aval is weak."""
    weak = getattr(aval, "weak_type", False)
    if isinstance(value, (np.ndarray, np.generic)) and weak != isinstance(value, WeakArray):
        return weak_array(value, weak)
    return value


#: the largest array in bytes: past it, sizes overflow int64 offsets (XLA aborts the process)
MAX_ARRAY_BYTES = 2 ** 62


def _check_shape(aval) -> None:
    shape = getattr(aval, "shape", ())
    if any(d < 0 for d in shape):
        raise errors.ShapeError(f"negative dimension in result shape {tuple(shape)}")
    nbytes = math.prod(shape) * aval.dtype.itemsize
    if nbytes > MAX_ARRAY_BYTES:
        raise errors.ShapeError(f"result shape {tuple(shape)} has {nbytes} bytes, more than the "
                                f"{MAX_ARRAY_BYTES} an array can index")
