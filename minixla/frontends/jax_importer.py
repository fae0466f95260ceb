"""The JAX front end: import a jaxpr made by ``jax.make_jaxpr`` into minixla's jaxpr.

A function written with ``jax.numpy``/``jax.lax``/``jax.nn`` -- with ``jax.grad``, ``jax.vmap``
or ``jax.jit`` inside -- is traced by JAX itself; its jaxpr is then *interpreted* here, one
**import rule** per JAX primitive (``import_rules``, keyed by the primitive's name, like the other
stages' rules tables), each rule binding minixla primitives. Run under minixla's tracer this
builds a minixla jaxpr, which minixla's own passes and backends compile; run under ``grad`` or
``vmap`` it is transformed by minixla's transformations like any minixla code.

- Types follow JAX's jaxpr exactly: every imported equation's output must have the shape and
  dtype JAX gives its variable (else an ``ImportRuleError``: a bug of the rule), and takes JAX's
  weak type. Literals keep their dtype and weak type; a closed jaxpr's consts become constvars.
- Sub-jaxprs are inlined, recursively: ``jit`` (pjit), ``closed_call``, ``core_call``,
  ``checkpoint`` (remat). ``custom_jvp_call`` becomes a ``minixla.custom_jvp`` carrying JAX's
  rule (``jax_custom_jvp``), so minixla's AD gives JAX's values at the kinks and ties those
  rules choose (``jax.nn.relu`` at 0); ``custom_vjp_call`` a ``minixla.custom_vjp`` whose
  backward pass is JAX's ``bwd`` (``jax_custom_vjp``: a gradient-clipping identity clips).
- A primitive without a rule is an ``UnsupportedJaxPrimitiveError`` naming it, why it is missing
  (``UNSUPPORTED`` gives the reason for the known ones) and the user's line, as JAX recorded it.
- The rules live with their family: this module (elementwise, structural, reductions,
  contractions, indexing, calls), ``jax_control_flow`` (``cond``/``while``/``scan``),
  ``jax_random`` (typed PRNG keys and ``jax.random``'s primitives, bit for bit),
  ``jax_windows`` (pooling derivatives, ``reduce``/``reduce_window`` with a body jaxpr) and
  ``jax_bits`` (``population_count``, ``clz``, ``mulhi``, ``reduce_xor``, ``reduce_precision``).
- An equation of a cheap primitive whose operands are all constants is staged, as JAX stages
  it (``_STAGED``), not computed while importing; a ``jit`` of a JAX library function that XLA
  compiles with rewrites of its own (``xla_compiled``: ``jax.random``'s ``_uniform``) is
  imported with those rewrites (``fma`` contraction, division by a constant as a product).

Adding a primitive: one row ``import_rules[name] = rule`` (and its name out of ``UNSUPPORTED``;
``tests/test_jax_frontend_docs.py`` checks both and ``docs/frontend.md`` counts it). Control flow
(``cond``/``while``/``scan``) imports its branch and body jaxprs with ``import_jaxpr`` (the same
signature, minixla's types) once minixla has those primitives.

Entry points: ``import_jaxpr(closed_jaxpr)``, ``trace_with_jax(flat_fun, in_avals)`` (what
``minixla.jit(f, frontend="jax")`` uses) and ``call_with_jax(fun, args, kwargs)`` (the same
inside an outer minixla trace). Mirrors no single JAX file: it plays the part of
``jax/_src/interpreters/mlir.py`` (one lowering rule per primitive) with minixla's jaxpr as target.
"""
from __future__ import annotations

import threading

import numpy as np
import jax
from jax import tree_util
from jax._src import source_info_util
from jax.extend import core as jcore

from minixla import lax
from minixla.core import errors
from minixla.core.avals import ShapedArray, WeakScalar, canonicalize_dtype, get_aval
from minixla.core.jaxpr import SourceInfo
from minixla.core.primitive import registry
from minixla.core.tracing import Tracer, current_jaxpr_trace, trace_to_jaxpr
from minixla.random.keys import PRNGKeyArray


class UnsupportedJaxPrimitiveError(errors.UnsupportedError):
    """A JAX primitive that minixla's JAX front end cannot import (``NotImplementedError``)."""


class ImportRuleError(errors.MinixlaError, AssertionError):
    """An import rule produced a value whose shape or dtype differs from JAX's: a minixla bug."""


#: JAX primitive name -> rule(*minixla values, **JAX params) -> value (list of values when the
#: JAX primitive has multiple results). A rule may bind any number of minixla primitives.
import_rules: dict = {}

#: JAX primitive name -> rule for equations with typed PRNG keys among their operands
#: (``minixla.random.PRNGKeyArray`` values: ``jax_random`` fills it)
key_rules: dict = {}

#: the ``name`` of a ``jit`` of a JAX library function whose value is what XLA compiles, not
#: what the jaxpr says op by op: its equations (and its callees') are imported with XLA's
#: contraction of ``a * b + c`` into ``fma`` (the product used once) and ``x / c`` by a float
#: constant as ``x * (1 / c)`` (``jax_random`` fills it: ``jax.random``'s uniform)
xla_compiled: set = set()

#: JAX primitives minixla knows it lacks, with why (the error message says it)
UNSUPPORTED = {
    "custom_linear_solve": "no minixla primitive yet (it needs a linear solve)",
    "approx_top_k": "approximate top-k (TPU): use lax.top_k",
    "rng_uniform": "XLA's stateful Rng (lax.rng_uniform): use lax.rng_bit_generator or jax.random",
    **{p: "complex numbers: minixla has no complex dtypes" for p in ("complex", "conj", "real", "imag", "fft")},
    **{p: "tokens and effects: minixla programs are pure" for p in ("after_all", "create_token", "dce_sink")},
    "select_and_scatter": "the gradient of a window selection: compute it with minixla.grad instead",
    **{p: "collective / SPMD primitive: minixla compiles for one device"
       for p in ("psum", "pmax", "pmin", "ppermute", "all_gather", "all_to_all", "ragged_all_to_all",
                 "axis_index")},
}


# ---------------------------------------------------------------------------------------
# The interpreter.

def _user_line(eqn, outer=None) -> str:
    """``file:line (function)`` of the user's code that made ``eqn``, as JAX recorded it (or, for
    an equation of a sub-jaxpr JAX traced once and cached, such as ``jnp.sort``'s, the line of
    the call that holds it: ``outer``)."""
    try:
        line = source_info_util.summarize(eqn.source_info)
    except Exception:  # (a jaxpr built by hand has no traceback)
        line = ""
    return line or (outer.line if outer is not None else "") or errors.user_source_line()


class _Where:
    """Where the equation being imported comes from (its sub-jaxpr's equations fall back on it),
    worked out only when asked: JAX's tracebacks are slow to summarize."""

    def __init__(self, eqn, outer):
        self.eqn, self.outer = eqn, outer

    @property
    def line(self):
        return _user_line(self.eqn, self.outer)

    @property
    def source_info(self):
        return _source_info(self.eqn, self.outer)


def _source_info(eqn, outer=None):
    frame = None
    if eqn.source_info is not None and eqn.source_info.traceback is not None:
        frame = source_info_util.user_frame(eqn.source_info.traceback)
    if frame is None:
        return outer.source_info if outer is not None else None
    return SourceInfo(frame.file_name, frame.start_line, frame.function_name,
                      str(getattr(eqn.source_info, "name_stack", "") or ""))


def _read_literal(lit):
    """A JAX ``Literal`` as the minixla value that gives the same jaxpr atom: a weakly typed
    scalar stays weak (``WeakScalar``), a strongly typed one is a NumPy scalar of its dtype,
    anything larger an array (a constvar)."""
    aval = lit.aval
    dtype = canonicalize_dtype(aval.dtype)
    value = np.asarray(lit.val, dtype)
    if value.shape == ():
        return WeakScalar(value[()]) if aval.weak_type else value[()]
    return value


def _check_aval(name, jvar, value, in_ids):
    """Hold the imported value to JAX's type for ``jvar``; give it JAX's weak type."""
    want = jvar.aval
    if _is_key(want) or isinstance(value, PRNGKeyArray):
        if not (_is_key(want) and isinstance(value, PRNGKeyArray) and value.shape == tuple(want.shape)
                and value.impl.name == want.dtype._impl.name):
            got = f"{value.dtype}{list(value.shape)}" if isinstance(value, PRNGKeyArray) else type(value).__name__
            raise ImportRuleError(f"import rule of jax primitive '{name}' gave {got} where JAX's jaxpr "
                                  f"has {want.str_short()} (a bug in minixla's JAX front end)")
        return
    if type(value) is not Tracer:
        # a value computed eagerly (all its operands were constants): held to the same shape and
        # dtype; a transformation's tracer (grad, vmap) has its own avals and is left alone
        if isinstance(value, (np.ndarray, np.generic)) and (
                np.shape(value) != tuple(want.shape) or value.dtype != canonicalize_dtype(want.dtype)):
            raise ImportRuleError(f"import rule of jax primitive '{name}' gave {value.dtype}"
                                  f"{list(np.shape(value))} where JAX's jaxpr has {want.str_short()} "
                                  "(a bug in minixla's JAX front end)")
        return
    got = value.aval
    if tuple(got.shape) != tuple(want.shape) or got.dtype != canonicalize_dtype(want.dtype):
        raise ImportRuleError(f"import rule of jax primitive '{name}' gave {got.str_short()} where "
                              f"JAX's jaxpr has {want.str_short()} (a bug in minixla's JAX front end)")
    if got.weak_type != bool(want.weak_type) and value.jaxpr_var.id not in in_ids:
        value.jaxpr_var.aval = got.update(weak_type=bool(want.weak_type))


def _is_key(aval) -> bool:
    dtype = getattr(aval, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _read_const(x):
    if isinstance(x, jax.Array):
        if _is_key(x):
            from minixla.frontends.jax_random import import_key_const
            return import_key_const(x)
        return np.asarray(x)
    return x


def eval_jax_jaxpr(jaxpr, consts, args, _outer=None):
    """Interpret a JAX ``Jaxpr`` on minixla values (tracers under a trace): its outputs, a list.

    ``consts`` are the values of ``jaxpr.constvars``, ``args`` of ``jaxpr.invars``. Raises
    ``UnsupportedJaxPrimitiveError`` for a primitive without an import rule.
    """
    env = {}
    stack = _where_stack()
    stack.append(_outer)
    try:
        return _eval(jaxpr, consts, args, env, _outer, stack)
    finally:
        stack.pop()


_local = threading.local()


def _first_unsupported(eqn):
    """The name of the first primitive of ``UNSUPPORTED`` (without an import rule) in the
    sub-jaxprs of ``eqn`` (a ``jit``'s, a ``cond``'s branches, ...), recursively, or None:
    ``jnp.fft.fft`` is a ``jit`` whose jaxpr converts to complex64 and calls ``fft``."""
    todo = list(eqn.params.values())
    while todo:
        p = todo.pop(0)
        if isinstance(p, (tuple, list)):
            todo[:0] = list(p)
            continue
        jaxpr = getattr(p, "jaxpr", p)
        if not isinstance(jaxpr, jcore.Jaxpr):
            continue
        for e in jaxpr.eqns:
            if e.primitive.name in UNSUPPORTED and e.primitive.name not in import_rules:
                return e.primitive.name
            found = _first_unsupported(e)
            if found is not None:
                return found
    return None


def _divides_by_a_broadcast(eqn) -> bool:
    """A float ``div`` whose divisor JAX broadcasts (a scalar, a row or a column of a larger
    result): XLA's algebraic simplifier rewrites it into ``x * broadcast(1 / y)``, in
    ``jax.jit`` and in JAX eager alike (``jnp.true_divide`` is jitted), so the import does too."""
    out, divisor = eqn.outvars[0].aval, eqn.invars[1].aval
    return (np.dtype(out.dtype).kind == "f" or out.dtype == jax.numpy.bfloat16) and \
        tuple(divisor.shape) != tuple(out.shape) and int(np.prod(out.shape)) > 1


def _reciprocal_divide(x, y):
    from minixla.numpy.elementwise import true_divide  # (its rewrite is XLA's, bf16 included)
    return true_divide(x, y)


def _where_stack() -> list:
    """The ``_Where`` of each jaxpr this thread is interpreting, innermost last (a call rule
    reads the top to give its sub-jaxpr the call's line)."""
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def _makes_complex(eqn) -> bool:
    """Whether ``eqn`` computes a complex array itself (not through a sub-jaxpr, whose own
    equations say which primitive does)."""
    if any(isinstance(v, (jcore.Jaxpr, jcore.ClosedJaxpr)) or isinstance(v, tuple) and v
           and isinstance(v[0], (jcore.Jaxpr, jcore.ClosedJaxpr)) for v in eqn.params.values()):
        return False
    return any(np.issubdtype(getattr(v.aval, "dtype", np.float32), np.complexfloating)
               for v in eqn.outvars if isinstance(getattr(v.aval, "dtype", None), np.dtype))


def _eval(jaxpr, consts, args, env, outer, stack):

    def read(atom):
        if isinstance(atom, jcore.Literal):
            return _read_literal(atom)
        return env[atom]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = _read_const(x)
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    contracted = _contractions(jaxpr) if getattr(_local, "contract", False) else {}
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        invals = [read(a) for a in eqn.invars]
        if contracted:
            if id(eqn) in contracted:  # (a product kept for the add that uses it)
                env[eqn.outvars[0]] = _Product(invals)
                continue
            if name == "div" and isinstance(eqn.invars[1], jcore.Literal) and np.shape(invals[1]) == ():
                c = np.asarray(eqn.invars[1].val, canonicalize_dtype(eqn.invars[1].aval.dtype))
                if c.dtype.kind == "f" or c.dtype.name == "bfloat16":
                    recip = (np.asarray(1, c.dtype) / c).astype(c.dtype)[()]
                    name = "mul"
                    invals = [invals[0], WeakScalar(recip) if eqn.invars[1].aval.weak_type else recip]
        rule = import_rules.get(name)
        if name == "div" and _divides_by_a_broadcast(eqn):
            rule = _reciprocal_divide
        if contracted and name == "add" and any(type(x) is _Product for x in invals):
            rule = _fma_rule(eqn.outvars[0].aval)
        if name in key_rules and any(type(x) is PRNGKeyArray for x in invals):
            rule = key_rules[name]
        if rule is None:
            why = UNSUPPORTED.get(name, "no import rule yet")
            raise UnsupportedJaxPrimitiveError(
                f"jax primitive '{name}' cannot be imported by minixla's JAX front end: {why}\n"
                f"  at: {_user_line(eqn, outer)}")
        if _makes_complex(eqn):  # name the complex primitive (jnp.fft.fft's 'fft'), not the convert
            cause = next((e for e in jaxpr.eqns if e.primitive.name in UNSUPPORTED), eqn)
            raise UnsupportedJaxPrimitiveError(
                f"jax primitive '{cause.primitive.name}' cannot be imported by minixla's JAX front end: "
                f"{UNSUPPORTED.get(cause.primitive.name, UNSUPPORTED['complex'])} ('{name}' gives "
                f"{eqn.outvars[0].aval.str_short()})\n  at: {_user_line(cause, outer)}")
        trace = current_jaxpr_trace()
        if trace is not None and name in _STAGED and invals and all(type(x) in _CONSTANT for x in invals):
            invals[0] = _stage(trace, invals[0])
        in_ids = {x.jaxpr_var.id for x in invals if type(x) is Tracer}
        n0 = len(trace.eqns) if trace is not None else 0
        stack[-1] = _Where(eqn, outer)
        try:
            out = rule(*invals, **eqn.params)
        except UnsupportedJaxPrimitiveError as e:
            if "\n  at: " in e.args[0]:
                raise
            raise type(e)(f"{e.args[0]}\n  at: {_user_line(eqn, outer)}") from None
        except ImportRuleError:
            raise
        except errors.MinixlaError as e:
            inner = _first_unsupported(eqn)  # (a call's jaxpr: name what it holds, not 'jit')
            if inner is not None:
                raise UnsupportedJaxPrimitiveError(
                    f"jax primitive '{inner}' cannot be imported by minixla's JAX front end: "
                    f"{UNSUPPORTED[inner]}\n  at: {_user_line(eqn, outer)}") from None
            raise type(e)(f"importing jax primitive '{name}': {e.args[0]}\n  at: {_user_line(eqn, outer)}") from None
        outs = out if eqn.primitive.multiple_results else [out]
        if len(outs) != len(eqn.outvars):
            raise ImportRuleError(f"import rule of jax primitive '{name}' gave {len(outs)} results, "
                                  f"JAX's jaxpr has {len(eqn.outvars)}")
        for jvar, value in zip(eqn.outvars, outs):
            _check_aval(name, jvar, value, in_ids)
            env[jvar] = value
        if trace is not None and len(trace.eqns) > n0:
            src = stack[-1].source_info  # the user's line, not JAX's internals
            for e in trace.eqns[n0:]:
                e.source_info = src or e.source_info
    return [read(a) for a in jaxpr.outvars]


#: cheap primitives whose equations of constant operands are staged into the program (as JAX
#: stages every equation) rather than computed while importing: minixla computes a constant
#: equation eagerly with JAX, one XLA compile per op and shape -- dozens for a
#: ``jax.random.randint`` of a constant key -- where the program's constant folding and fusion
#: do it for free
_STAGED = {"broadcast_in_dim", "convert_element_type", "reshape", "squeeze", "select_n", "add", "sub",
           "mul", "div", "rem", "max", "min", "neg", "and", "or", "xor", "not", "eq", "ne", "lt", "le",
           "gt", "ge", "bitcast_convert_type", "shift_left", "shift_right_logical",
           "shift_right_arithmetic", "erf", "concatenate", "slice", "transpose", "iota"}
_CONSTANT = (np.ndarray, WeakScalar, *{type(np.dtype(t).type(0)) for t in np.typecodes["All"] if t not in "OSUVMm"})


def _stage(trace, x):
    """A constant as a tracer of ``trace`` (a constvar; a weakly typed scalar stays weak)."""
    if isinstance(x, WeakScalar):
        value = np.asarray(x.value, get_aval(x).dtype)
        t = Tracer(trace, trace.to_atom(value))
        t.jaxpr_var.aval = t.jaxpr_var.aval.update(weak_type=True)
        return t
    return Tracer(trace, trace.to_atom(np.asarray(x)))


class _Product:
    """A float ``mul`` of an ``xla_compiled`` function held for the ``add`` that uses it."""

    def __init__(self, operands):
        self.operands = operands


def _contractions(jaxpr) -> set:
    """The ``id`` of each float ``mul`` equation whose result is used once, by an ``add``:
    the products XLA contracts into an ``fma``."""
    uses, consumer = {}, {}
    for eqn in jaxpr.eqns:
        for a in eqn.invars:
            if not isinstance(a, jcore.Literal):
                uses[a] = uses.get(a, 0) + 1
                consumer[a] = eqn
    for a in jaxpr.outvars:
        if not isinstance(a, jcore.Literal):
            uses[a] = uses.get(a, 0) + 2
    out = set()
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "mul":
            v = eqn.outvars[0]
            if (np.dtype(v.aval.dtype).kind == "f" and uses.get(v) == 1
                    and consumer[v].primitive.name == "add"
                    and not all(a is v for a in consumer[v].invars)):
                out.add(id(eqn))
    return out


def _fma_rule(aval):
    """The rule of an ``add`` of a held product and another value: one ``fma`` (operands
    broadcast to the result's shape, as the implicit size-1 broadcasting of JAX's jaxprs)."""
    return lambda *invals: _fma(invals, tuple(aval.shape))


def _fma(invals, shape):
    prod = next(x for x in invals if type(x) is _Product)
    other = next(x for x in invals if x is not prod)
    if type(other) is _Product:
        other = import_rules["mul"](*other.operands)

    def full(x):
        s = _shape(x)
        if s == shape or not s:
            return x
        keep = tuple(i for i, d in enumerate(s) if d != 1)
        x = registry["reshape"].bind(x, new_sizes=tuple(s[i] for i in keep), dimensions=None)
        return registry["broadcast_in_dim"].bind(x, shape=shape, broadcast_dimensions=keep)
    a, b = (full(x) for x in prod.operands)
    return lax.fma(a, b, full(other))


def _jaxpr_in_avals(closed):
    avals = []
    for v in closed.jaxpr.invars:
        a = v.aval
        if _is_key(a):  # a typed key comes in as its uint32 data
            from minixla.frontends.jax_random import _check_impl
            size = _check_impl(a.dtype._impl, "a typed key input").key_size
            avals.append(ShapedArray(tuple(a.shape) + (size,), np.dtype(np.uint32), False))
            continue
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            raise UnsupportedJaxPrimitiveError(f"jaxpr input {v} has the abstract value {a}, which minixla "
                                               "does not have (only arrays)")
        try:
            dtype = canonicalize_dtype(a.dtype)
        except errors.MinixlaError as e:
            raise UnsupportedJaxPrimitiveError(f"jaxpr input of type {a.str_short()}: {e.args[0]} "
                                               "(typed PRNG keys: pass jax.random.key_data(key))") from None
        avals.append(ShapedArray(a.shape, dtype, bool(getattr(a, "weak_type", False))))
    return avals


def import_jaxpr(closed_jaxpr):
    """Import a JAX ``ClosedJaxpr`` (from ``jax.make_jaxpr``) as a minixla ``ClosedJaxpr``.

    Args:
      closed_jaxpr: ``jax.make_jaxpr(f)(*args)``: its inputs arrays of minixla's dtypes (f32, f16,
        bf16, f64/int64 under ``jax_enable_x64``, int8-64, uint8-64, bool).
    Returns:
      A minixla ``ClosedJaxpr`` with the same inputs and outputs (shapes, dtypes, weak types), which
      ``minixla.hlo.lower_jaxpr`` lowers (``.source_jaxpr`` is JAX's); ``minixla.jit(f,
      frontend="jax")`` does all of it.
    Raises:
      UnsupportedJaxPrimitiveError (a ``NotImplementedError``): a primitive without an import rule,
      naming it and the user's line. Any minixla error of a rule, prefixed with the JAX primitive.
    """
    closed = closed_jaxpr
    in_avals = _jaxpr_in_avals(closed)
    keys = [_is_key(v.aval) for v in closed.jaxpr.invars]

    def run(*xs):
        from minixla.frontends.jax_random import key_of
        xs = [key_of(v.aval, x) if k else x for x, k, v in zip(xs, keys, closed.jaxpr.invars)]
        outs = eval_jax_jaxpr(closed.jaxpr, closed.consts, xs)
        return [o._base if type(o) is PRNGKeyArray else o for o in outs]
    imported = trace_to_jaxpr(run, in_avals)
    imported.source_jaxpr = closed  # (JAX's jaxpr, for a reader comparing the two)
    return imported


def _shape_dtype_structs(avals):
    return [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in avals]


def trace_with_jax(flat_fun, in_avals):
    """Trace the flat function ``flat_fun`` with ``jax.make_jaxpr`` on ``in_avals`` (minixla
    avals) and import the result: ``minixla.jit(f, frontend="jax")``'s tracing step."""
    closed = jax.make_jaxpr(flat_fun)(*_shape_dtype_structs(in_avals))
    return import_jaxpr(closed)


def call_with_jax(fun, args, kwargs):
    """``fun(*args, **kwargs)`` for a JAX function called on minixla values (tracers of an outer
    ``minixla.jit``/``grad``/``vmap``): JAX traces ``fun`` on their avals and the jaxpr is
    interpreted on the values themselves, so the outer minixla trace records (or transforms) it."""
    from minixla.core.avals import get_aval
    flat, in_tree = tree_util.tree_flatten((args, kwargs))
    out_tree = []

    def flat_fun(*leaves):
        a, k = tree_util.tree_unflatten(in_tree, leaves)
        out, tree = tree_util.tree_flatten(fun(*a, **k))
        out_tree.append(tree)
        return out
    closed = jax.make_jaxpr(flat_fun)(*_shape_dtype_structs([get_aval(x) for x in flat]))
    outs = eval_jax_jaxpr(closed.jaxpr, closed.consts, flat)
    return tree_util.tree_unflatten(out_tree[-1], outs)


# ---------------------------------------------------------------------------------------
# Import rules.

def _norm(v):
    """JAX's params as minixla's: tuples of Python ints (JAX keeps lists and NumPy ints)."""
    if type(v) in (tuple, list):
        return tuple(_norm(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    return v


#: JAX params that say where a value lives, not what it is: minixla compiles for one device
_PLACEMENT = ("sharding", "out_sharding")
#: JAX params minixla accepts only at their default
_DEFAULT_ONLY = {"accuracy": None, "out_dtype": None}


def _plain_params(name, params):
    out = {}
    for k, v in params.items():
        if k in _PLACEMENT:
            continue
        if k in _DEFAULT_ONLY:
            if v is not _DEFAULT_ONLY[k]:
                raise UnsupportedJaxPrimitiveError(f"jax primitive '{name}' with {k}={v!r}: minixla "
                                                   f"supports only {k}={_DEFAULT_ONLY[k]!r}")
            continue
        out[k] = _norm(v)
    return out


def _same(name, mx_name=None):
    """The minixla primitive of the same meaning (and params), bound as it is."""
    prim = registry[mx_name or name]

    def rule(*args, **params):
        return prim.bind(*args, **_plain_params(name, params))
    rule.__name__ = f"import_{name}"
    return rule


def _broadcast_size1(*args):
    """Operands of an elementwise JAX primitive with JAX's implicit broadcasting of size-1
    dims made explicit (rank-0 operands are left as they are)."""
    shapes = [tuple(np.shape(a)) for a in args]
    ranked = [s for s in shapes if s]
    if ranked and any(s != ranked[0] for s in ranked):
        out = tuple(max(ds) if 0 not in ds else 0 for ds in zip(*ranked))
        args = [registry["broadcast_in_dim"].bind(a, shape=out, broadcast_dimensions=tuple(range(len(out))))
                if s and s != out else a for a, s in zip(args, shapes)]
    return list(args)


def _elementwise(name, mx_name=None):
    """An n-ary elementwise primitive. JAX's jaxprs broadcast size-1 dims implicitly
    (``add f32[5,8] f32[1,8]``, what ``jnp.add`` binds after a ``broadcast_in_dim`` to rank 2);
    minixla's lax ops take equal shapes or rank-0 operands, so the import broadcasts the
    size-1 dims explicitly first (the same values: a size-1 dim is read at index 0 throughout)."""
    prim = registry[mx_name or name]

    def rule(*args, **params):
        return prim.bind(*_broadcast_size1(*args), **_plain_params(name, params))
    rule.__name__ = f"import_{name}"
    return rule


_ELEMENTWISE = {
    "add", "sub", "mul", "div", "rem", "max", "min", "pow", "atan2", "and", "or", "xor", "shift_left",
    "shift_right_logical", "shift_right_arithmetic", "eq", "ne", "lt", "le", "gt", "ge", "select_n", "clamp",
    "polygamma", "zeta", "igamma", "igammac", "igamma_grad_a", "regularized_incomplete_beta"}
_SAME_NAME = [
    # elementwise
    "neg", "abs", "sign", "floor", "ceil", "exp", "exp2", "expm1", "log", "log1p", "sqrt", "rsqrt",
    "cbrt", "tanh", "logistic", "sin", "cos", "tan", "erf", "erfc", "is_finite", "not",
    "add", "sub", "mul", "div", "rem", "max", "min", "pow", "atan2", "and", "or", "xor",
    "shift_left", "shift_right_logical", "shift_right_arithmetic",
    "eq", "ne", "lt", "le", "gt", "ge", "select_n", "clamp", "integer_pow", "convert_element_type",
    "bitcast_convert_type",
    # structural
    "broadcast_in_dim", "reshape", "transpose", "squeeze", "rev", "pad", "concatenate", "slice",
    "iota", "dynamic_slice", "dynamic_update_slice",
    # reductions
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and", "reduce_or",
    "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin",
    # windows (pooling)
    "reduce_window_sum", "reduce_window_max", "reduce_window_min",
    # inverse trigonometric and hyperbolic functions (lowered to XLA's own decompositions),
    # the special functions minixla.random needs, sorting
    "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf_inv", "sort",
    # the gamma, zeta, Bessel and incomplete beta family (issue 14)
    "lgamma", "digamma", "bessel_i0e", "bessel_i1e", "polygamma", "zeta", "igamma", "igammac",
    "igamma_grad_a", "regularized_incomplete_beta",
]
for _name in _SAME_NAME:
    import_rules[_name] = _elementwise(_name) if _name in _ELEMENTWISE else _same(_name)


def _reshape(x, *, new_sizes, dimensions=None, **params):
    """JAX's ``reshape[dimensions=perm]`` (``jax.vmap`` of a convolution binds one) as a
    ``transpose`` by ``perm``, then the plain ``reshape``."""
    if dimensions is not None:
        x = registry["transpose"].bind(x, permutation=tuple(int(d) for d in dimensions))
    return registry["reshape"].bind(x, **_plain_params("reshape", dict(params, new_sizes=new_sizes, dimensions=None)))


import_rules["reshape"] = _reshape


def _round(x, *, rounding_method):
    return registry["round"].bind(x, rounding_method=int(rounding_method))


def _square(x, **params):
    return import_rules["mul"](x, x, **params)  # (XLA lowers square to multiply: the same bits)


def _identity(x, **params):
    # copy, sharding_constraint: the value is unchanged
    return x


def _sharding_constraint(x, *, sharding=None, unconstrained_dims=(), **_):
    """JAX's ``with_sharding_constraint`` as minixla's (issue 17), when its sharding is a
    ``NamedSharding`` with every dim constrained; otherwise the identity (the value is unchanged)."""
    import jax.sharding as js
    if isinstance(sharding, js.NamedSharding) and not unconstrained_dims:
        return lax.with_sharding_constraint(x, sharding)
    return x


def _split(x, *, sizes, axis):
    return lax.split(x, _norm(sizes), int(axis))


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _tile(x, *, reps):
    # jnp.tile's reps may be longer than the rank: the operand gets leading dims of 1 first
    reps, shape = _norm(reps), _shape(x)
    if len(reps) > len(shape):
        shape = (1,) * (len(reps) - len(shape)) + shape
        x = registry["reshape"].bind(x, new_sizes=shape, dimensions=None)
    return lax.tile(x, (1,) * (len(shape) - len(reps)) + tuple(reps))


def _dot_general(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None, **rest):
    _plain_params("dot_general", rest)
    pet = canonicalize_dtype(preferred_element_type) if preferred_element_type is not None else None
    ldt, rdt = lhs.dtype, rhs.dtype
    if ldt == rdt == np.bool_:
        # a bool product (XLA's dot on predicates: an "or" of "and"s): in int32, then != 0, as
        # minixla.numpy.matmul computes it
        i32 = np.dtype(np.int32)
        lhs, rhs = (registry["convert_element_type"].bind(a, new_dtype=i32, weak_type=False) for a in (lhs, rhs))
        out = _dot_general(lhs, rhs, dimension_numbers=dimension_numbers, precision=precision,
                           preferred_element_type=i32)
        return registry["convert_element_type"].bind(out, new_dtype=np.dtype(np.bool_), weak_type=False)
    if (np.bool_ in (ldt, rdt) and _shape(lhs) == _shape(rhs) == (1,)
            and _norm(dimension_numbers) == (((0,), (0,)), ((), ()))):
        # the one-term dot of a bool and a number: XLA makes it ``x * convert(p)``, then
        # ``select(p, x, 0)`` (+0.0 where the product gives -0.0; 0 for inf * False), as
        # minixla.numpy.matmul does it
        from minixla import numpy as mnp
        return mnp.matmul(lhs, rhs)
    if ldt != rdt:
        # JAX's dot_general takes mixed dtypes (jnp.matmul of f32 and i32); its CPU/GPU lowering
        # converts both operands to the result's dtype first, and so does this import
        out = pet if pet is not None else canonicalize_dtype(jax.numpy.promote_types(ldt, rdt))
        lhs, rhs = (registry["convert_element_type"].bind(a, new_dtype=out, weak_type=False)
                    if a.dtype != out else a for a in (lhs, rhs))
    return registry["dot_general"].bind(lhs, rhs, dimension_numbers=_norm(dimension_numbers),
                                        precision=precision, preferred_element_type=pet)


def _conv(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
          feature_group_count, batch_group_count, precision=None, preferred_element_type=None, **rest):
    _plain_params("conv_general_dilated", rest)
    dn = lax.ConvDimensionNumbers(*(_norm(s) for s in dimension_numbers))
    pet = canonicalize_dtype(preferred_element_type) if preferred_element_type is not None else None
    return lax.contractions._conv_batch_groups(
        lhs, rhs, window_strides=_norm(window_strides), padding=_norm(padding),
        lhs_dilation=_norm(lhs_dilation), rhs_dilation=_norm(rhs_dilation), dimension_numbers=dn,
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        precision=precision, preferred_element_type=pet)


def _with_batching_indices(indices, operand_batching_dims, indices_batching_dims):
    """XLA's batching dims of gather/scatter as plain index columns: for each operand batching
    dim, an iota along the matching indices dim is appended to the index vectors (the last dim),
    so the batch dims become ordinary collapsed dims indexed by their own position."""
    if not operand_batching_dims:
        return indices
    shape = tuple(indices.shape)
    dtype = indices.dtype
    cols = [indices]
    for d in indices_batching_dims:
        cols.append(registry["iota"].bind(dtype=canonicalize_dtype(dtype), shape=shape[:-1] + (1,),
                                          dimension=int(d)))
    return registry["concatenate"].bind(*cols, dimension=len(shape) - 1)


def _gather(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted=False,
            unique_indices=False, mode=None, fill_value=None):
    dn = dimension_numbers
    obd = _norm(dn.operand_batching_dims)
    indices = _with_batching_indices(indices, obd, _norm(dn.start_indices_batching_dims))
    collapsed = tuple(sorted(_norm(dn.collapsed_slice_dims) + obd))
    start_index_map = _norm(dn.start_index_map) + obd
    gdn = lax.GatherDimensionNumbers(_norm(dn.offset_dims), collapsed, start_index_map)
    return lax.gather(operand, indices, gdn, _norm(slice_sizes), mode=mode, fill_value=fill_value)


def _scatter(mx_fn):
    def rule(operand, indices, updates, *, dimension_numbers, indices_are_sorted=False,
             unique_indices=False, mode=None, update_jaxpr=None, update_consts=()):
        dn = dimension_numbers
        obd = _norm(dn.operand_batching_dims)
        indices = _with_batching_indices(indices, obd, _norm(dn.scatter_indices_batching_dims))
        inserted = tuple(sorted(_norm(dn.inserted_window_dims) + obd))
        sdn = lax.ScatterDimensionNumbers(_norm(dn.update_window_dims), inserted,
                                          _norm(dn.scatter_dims_to_operand_dims) + obd)
        return mx_fn(operand, indices, updates, sdn, mode=mode)
    return rule


def _inline(param, closed=True):
    """A call primitive: its sub-jaxpr (``params[param]``) interpreted in place, recursively
    (a ``jit`` named in ``xla_compiled`` with XLA's rewrites)."""
    def rule(*args, **params):
        sub = params[param]
        stack = _where_stack()
        where = stack[-1] if stack else None
        before = getattr(_local, "contract", False)
        _local.contract = before or params.get("name") in xla_compiled
        try:
            if closed:
                return eval_jax_jaxpr(sub.jaxpr, sub.consts, args, where)
            return eval_jax_jaxpr(sub, (), args, where)
        finally:
            _local.contract = before
    return rule


import_rules.update({
    "round": _round, "square": _square, "add_any": _elementwise("add_any", "add"),
    "stop_gradient": lambda x: lax.stop_gradient(x),
    "copy": _identity, "copy_p": _identity, "optimization_barrier": lambda *xs: lax.optimization_barrier_p.bind(*xs),
    "sharding_constraint": lambda x, **params: _sharding_constraint(x, **params),
    "device_put": lambda *xs, **_: list(xs),
    "split": _split, "dot_general": _dot_general, "conv_general_dilated": _conv, "gather": _gather,
    "scatter": _scatter(lax.scatter), "scatter-add": _scatter(lax.scatter_add),
    "scatter-mul": _scatter(lax.scatter_mul), "scatter-min": _scatter(lax.scatter_min),
    "scatter-max": _scatter(lax.scatter_max),
    # (x - u is x + (-u) exactly, in IEEE arithmetic and in wrapping integers)
    "scatter-sub": _scatter(lambda x, i, u, dn, mode: lax.scatter_add(x, i, registry["neg"].bind(u), dn,
                                                                      mode=mode)),
    "stack": lambda *xs, axis: lax.stack(xs, int(axis)),
    "unstack": lambda x, *, axis: list(lax.unstack(x, int(axis))), "tile": _tile,
    # compositions of minixla.lax (no primitive of their own in minixla)
    "nextafter": lambda x1, x2: lax.nextafter(*_broadcast_size1(x1, x2)),
    "cumlogsumexp": lambda x, *, axis, reverse: lax.cumlogsumexp(x, axis=int(axis), reverse=bool(reverse)),
    # calls, inlined: jit (pjit), closed_call, core_call, checkpoint (remat) (custom_jvp_call and
    # custom_vjp_call, with their rules: jax_custom_jvp, jax_custom_vjp)
    "jit": _inline("jaxpr"), "pjit": _inline("jaxpr"), "closed_call": _inline("call_jaxpr"),
    "core_call": _inline("call_jaxpr", closed=False), "remat2": _inline("jaxpr", closed=False),
    "checkpoint": _inline("jaxpr", closed=False),
})

from minixla.frontends import jax_control_flow  # noqa: E402,F401 (cond, while, scan, top_k)
from minixla.frontends import jax_random  # noqa: E402,F401 (jax.random's keys and bits)
from minixla.frontends import jax_windows  # noqa: E402,F401 (pooling derivatives, reduce bodies)
from minixla.frontends import jax_bits  # noqa: E402,F401 (population_count, clz, mulhi, eq_to, ...)
from minixla.frontends import jax_custom_jvp  # noqa: E402,F401 (custom_jvp_call with JAX's rule)
from minixla.frontends import jax_custom_vjp  # noqa: E402,F401 (custom_vjp_call with JAX's bwd)
