"""``minixla.jit`` (``jax/_src/pjit.py``): trace, cache, dispatch.

    jit(f).lower(*args)      trace -> jaxpr -> HLO            Lowered.as_text(): HLO before passes
          .compile()         passes -> buffers -> backend     Compiled.as_text(): optimized HLO
    jit(f)(*args)            the same, cached on the arguments' pytree structure and avals

``Lowered``, ``Compiled`` and the pass pipeline ``Lowered.compile`` runs are in
``minixla/stages.py`` (``jax/_src/stages.py``); this module makes them from a Python function
and calls them.

The cache key is the input pytree structure plus each leaf's (shape, dtype, weak_type), the
static arguments' values and ``jax_enable_x64``, as JAX keys its own cache; a new shape or
dtype traces and compiles again. The cache is a bounded LRU (``minixla_jit_cache_size``);
``minixla_log_compiles``, ``minixla_explain_cache_misses`` and the recompile warning report
what compiles and why (``jit_diagnostics.py``); with ``minixla_compilation_cache_dir`` set a
compile first looks the optimized program up on disk (``minixla/cache``). Options:
``minixla.config``.
"""
from __future__ import annotations

import collections
import functools
import itertools
import inspect
import logging
import threading
import time
import weakref

import numpy as np
from jax import Array as _JaxArray
from jax import tree_util

from minixla import debug_nans as _debug_nans
from minixla import cache as persistent_cache
from minixla.config import config
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.tracing import Tracer, _trace_stack, flatten_fun, trace_to_jaxpr
from minixla import jit_diagnostics as diagnostics
from minixla.hlo.lowering import lower_jaxpr
from minixla.runtime_api import jit_state as _jit_state
from minixla.stages import (BACKENDS, Compiled, Lowered, _gc_paused, _jax_keys_to_minixla, _mark_weak,  # noqa: F401
                            _weak_outputs, backend_passes, loop_passes, optimization_pipeline, verify_enabled)

#: who traces ``fun``: minixla's tracer (switching to JAX's when ``fun`` calls JAX: None, the
#: default), minixla's only ("minixla"), or JAX's (``jax.make_jaxpr``, then ``minixla.frontends``)
FRONTENDS = (None, "minixla", "jax")
logger = logging.getLogger(__name__)


#: every live ``Jitted`` (``minixla.clear_caches`` empties their caches)
live_jitted: "weakref.WeakSet[Jitted]" = weakref.WeakSet()


class Jitted:
    """The object ``minixla.jit(f)`` returns: callable, with ``.lower(*args)`` like ``jax.jit``."""

    def __init__(self, fun, backend: str = "llvm", donate_argnums=(), static_argnums=(), static_argnames=(),
                 frontend=None, in_shardings=None, out_shardings=None, donate_argnames=()):
        from minixla.sharding.api import UNSPECIFIED
        # (None given explicitly is JAX's "unconstrained", the same as not given)
        self.in_shardings = UNSPECIFIED if in_shardings is None else in_shardings
        self.out_shardings = UNSPECIFIED if out_shardings is None else out_shardings
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
        if frontend not in FRONTENDS:
            raise ValueError(f"unknown frontend {frontend!r}; choose one of {FRONTENDS}")
        # First, so that what ``fun.__dict__`` holds never overwrites the Jitted's own fields: a
        # ``custom_jvp`` (minixla's or JAX's) and ``jax.grad`` of one carry ``fun`` (the primal).
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.backend = backend
        self.frontend = frontend
        as_tuple = lambda x: (x,) if isinstance(x, (int, str)) else tuple(x)
        self.donate_argnums = as_tuple(donate_argnums)
        self.static_argnums = as_tuple(static_argnums)
        self.static_argnames = as_tuple(static_argnames)
        # As jax.jit: a static argument may be passed either way, so each of static_argnums and
        # static_argnames implies the other through the function's signature.
        try:
            params = [p for p in inspect.signature(fun).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):  # builtins without a signature
            params = []
        names = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        try:
            has_varargs = any(p.kind is p.VAR_POSITIONAL for p in inspect.signature(fun).parameters.values())
            known = True
        except (TypeError, ValueError):
            known = False
        bad = [i for i in self.static_argnums if not -len(params) <= i < len(params)]
        if known and not has_varargs and bad:
            # as jax.jit, at decoration time: a static argnum the function cannot receive
            raise errors.StaticArgumentError(
                f"Jitted function has static_argnums={self.static_argnums}, but only accepts "
                f"{len(params)} positional arguments.\n  at: {errors.user_source_line()}")
        self.static_argnames += tuple(params[i].name for i in self.static_argnums
                                      if -len(params) <= i < len(params) and params[i].name in names
                                      and params[i].name not in self.static_argnames)
        self.static_argnums += tuple(names.index(n) for n in self.static_argnames
                                     if n in names and names.index(n) not in self.static_argnums)
        self._has_static = bool(self.static_argnums or self.static_argnames)
        # donate_argnames likewise: a donated argument passed by keyword is donated too
        self.donate_argnames = as_tuple(donate_argnames)
        try:  # as jax.jit, at decoration: names the function cannot take (no **kwargs)
            sig = inspect.signature(fun).parameters.values()
            takes = None if any(p.kind is p.VAR_KEYWORD for p in sig) else {
                p.name for p in sig if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        except (TypeError, ValueError):
            takes = None
        for what, given in (("static_argnames", self.static_argnames), ("donate_argnames", self.donate_argnames)):
            if takes is not None and set(given) - takes:
                raise ValueError(f"Jitted function has invalid argnames {set(given) - takes} in {what}. "
                                 f"Function does not take these args.\n  at: {errors.user_source_line()}")
        bad = [i for i in self.donate_argnums if not -len(params) <= i < len(params)]
        if known and not has_varargs and bad:
            raise ValueError(
                f"Jitted function has donate_argnums={self.donate_argnums}, but only accepts "
                f"{len(params)} positional arguments.\n  at: {errors.user_source_line()}")
        # (an argument donated by number but passed by keyword is donated by its name)
        self._donate_by_keyword = known and not has_varargs
        self.donate_argnums += tuple(names.index(n) for n in self.donate_argnames
                                     if n in names and names.index(n) not in self.donate_argnums)
        self.donate_argnames += tuple(params[i].name for i in self.donate_argnums
                                      if -len(params) <= i < len(params) and params[i].name in names
                                      and params[i].name not in self.donate_argnames)
        live_jitted.add(self)
        # Compiled signatures (bounded: minixla_jit_cache_size; the least recently used, by
        # each Compiled's ``_last_use`` stamp, is evicted first).
        self._cache: dict = {}
        self._compiling: dict = {}  # key -> lock held while that signature compiles
        self._compiling_lock = threading.Lock()
        # Descriptions of the signatures compiled so far (for the diagnostics; bounded).
        self._history: collections.OrderedDict = collections.OrderedDict()
        self._warned_recompiles = False

    def _split_static(self, args, kwargs):
        """Separate static arguments (compile-time Python values, part of the cache key) from
        the dynamic ones (traced). Returns ``(fun of the dynamic args, args, kwargs, static key)``."""
        if not self.static_argnums and not self.static_argnames:
            return self.fun, args, kwargs, ()
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n}
        static = tuple((i, args[i]) for i in sorted(static_pos))
        static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
        for where, value in static + static_kw:
            try:
                hash(value)
            except TypeError as e:  # (JAX's message)
                what = f"argument {where}" if isinstance(where, str) else f"positional argument {where}"
                raise ValueError(
                    "Non-hashable static arguments are not supported. An error occurred while trying "
                    f"to hash an object of type {type(value)}, {value!r} (static {what}). The error "
                    f"was:\n{type(e).__name__}: {e}\n  at: {errors.user_source_line()}") from None
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}

        def fun(*dargs, **dkwargs):
            it = iter(dargs)
            full = [dict(static)[i] if i in static_pos else next(it) for i in range(n)]
            return self.fun(*full, **dkwargs, **dict(static_kw))
        functools.update_wrapper(fun, self.fun)
        return fun, dyn_args, dyn_kwargs, (static, static_kw)

    def _dynamic_donations(self, args):
        """``donate_argnums`` renumbered among the dynamic (non-static) positional arguments."""
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n}
        out = []
        for i in self.donate_argnums:
            if not -n <= i < n and self._donate_by_keyword and i >= 0:
                continue  # passed by keyword: donate_argnames has its name
            if not -n <= i < n:
                raise ValueError(f"donate_argnums={i} but the function was called with {n} positional arguments")
            if i % n in static_pos:
                raise ValueError(f"argument {i % n} cannot be both static and donated")
            out.append(i % n - sum(1 for s in static_pos if s < i % n))
        return tuple(out)

    @_gc_paused
    def lower(self, *args, **kwargs) -> Lowered:
        """Trace with the avals of ``args`` and lower to HLO (no optimization yet). A JAX typed
        key (``jax.random.key``) is passed as minixla's ``PRNGKeyArray`` of its data (a JAX
        front end sees a JAX typed key again)."""
        args, kwargs = _jax_keys_to_minixla(args, kwargs)
        fun, dyn_args, dyn_kwargs, _ = self._split_static(args, kwargs)
        if self.frontend != "minixla":
            fun = _keys_for_jax_tracer(fun)
        flat, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        try:
            in_avals = [get_aval(x) for x in flat]
        except errors.MinixlaError as e:
            self._argument_error(args, kwargs, e)
        flat_fun, out_store = flatten_fun(fun, in_tree)
        t0 = time.perf_counter()
        with persistent_cache.jax_cache():  # (tracing may compile eager ops with XLA)
            closed = self._trace(flat_fun, in_avals)
        t1 = time.perf_counter()
        name = f"jit_{getattr(self.fun, '__name__', 'fn')}".replace("<", "").replace(">", "")
        module = lower_jaxpr(closed, name=name)
        if self.in_shardings is not _NO_SHARDING or self.out_shardings is not _NO_SHARDING:
            self._annotate(module, args, dyn_args, dyn_kwargs, out_store[-1])
        lowered = Lowered(closed, module, in_tree, out_store[-1], in_avals, self.backend)
        lowered.donated = _donated_leaves(dyn_args, self._dynamic_donations(args), dyn_kwargs,
                                          self.donate_argnames)
        lowered.trace_ms = (t1 - t0) * 1e3
        lowered.lower_ms = (time.perf_counter() - t1) * 1e3
        return lowered

    def _annotate(self, module, args, dyn_args, dyn_kwargs, out_tree):
        """``in_shardings``/``out_shardings`` onto the lowered module (``minixla.sharding.api``),
        errors naming the argument and the user's line."""
        from minixla.sharding.api import ShardingError, annotate_module
        try:
            names = list(inspect.signature(self.fun).parameters)
        except (TypeError, ValueError):
            names = []
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n}
        names = [nm for i, nm in enumerate(names[:n]) if i not in static_pos] + names[n:]
        try:
            annotate_module(module, self.in_shardings, self.out_shardings, dyn_args, names, out_tree,
                            self.backend, bool(dyn_kwargs))
        except ShardingError as e:
            raise ShardingError(f"{e.args[0]}\n  at: {errors.user_source_line()}") from None

    def _trace(self, flat_fun, in_avals):
        """The jaxpr of ``flat_fun``, traced by the front end ``frontend=`` names. With the
        default (None) a function that calls JAX (``jnp.sin`` on a minixla tracer) is traced again
        by JAX and imported (``minixla.frontends.jax_importer``), and a log line says so."""
        if self.frontend == "jax":
            from minixla.frontends import jax_importer
            return jax_importer.trace_with_jax(flat_fun, in_avals)
        try:
            return trace_to_jaxpr(flat_fun, in_avals)
        except errors.JaxFunctionError as e:
            if self.frontend == "minixla":
                raise
            from minixla.frontends import jax_importer  # (only when needed: it imports jax.extend)
            name = getattr(self.fun, "__name__", "fn")
            where = [ln.strip()[4:] for ln in e.args[0].splitlines() if ln.strip().startswith("at: ")]
            try:
                closed = jax_importer.trace_with_jax(flat_fun, in_avals)
            except jax_importer.UnsupportedJaxPrimitiveError:
                raise
            except Exception:
                # JAX cannot trace it either (minixla code mixed in: a minixla.grad around jnp
                # calls): minixla's error is the one that says what to change
                raise e from None
            logger.warning("jit(%s) calls a JAX function on a traced value (at %s): traced again with "
                           "JAX's tracer and its jaxpr imported (minixla.jit(%s, frontend=\"jax\") does "
                           "this directly)", name, where[-1] if where else "?", name)
            self.frontend = "jax"
            return closed

    def __call__(self, *args, **kwargs):
        # The dispatch path (a cached call): flatten, key, look up, run. Every step here costs
        # on each call of a small jitted function, so the signature doubles as the argument
        # check (the executable found under it was compiled for exactly these avals).
        if _jit_state.disabled:  # (minixla.disable_jit: the Python body, op by op)
            return self.fun(*args, **kwargs)
        if self._has_static:
            fun, dyn_args, dyn_kwargs, static_key = self._split_static(args, kwargs)
        else:
            fun, dyn_args, dyn_kwargs, static_key = self.fun, args, kwargs, ()
        flat, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        if _trace_stack:
            return self._call_nested(fun, dyn_args, dyn_kwargs)  # (see _signature)
        try:
            key = (in_tree, tuple([(x.shape, x.dtype) if type(x) is np.ndarray else _signature(x)
                                   for x in flat]), static_key, _x64_enabled())
        except _Inline:
            return self._call_nested(fun, dyn_args, dyn_kwargs)
        except _JaxKey:  # (off the fast path: each such call converts its keys first)
            args, kwargs = _jax_keys_to_minixla(args, kwargs)
            return self(*args, **kwargs)
        except errors.MinixlaError as e:
            self._argument_error(args, kwargs, e)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._compile_once(key, args, kwargs)
        # (the LRU order: a stamp, not OrderedDict.move_to_end, which hashes the key again --
        # ~60 us for 100 leaves)
        compiled._last_use = next(_use_clock)
        if compiled._run_trusted is None:
            outs = compiled._call_matching(flat)
        else:  # (Compiled._call_matching, inlined)
            # (a numpy array keyed by its own dtype, e.g. int64 under x32, still converts)
            outs = compiled._run_trusted([x if type(x) is np.ndarray and x.dtype == aval.dtype
                                          and x.flags.c_contiguous
                                          else np.asarray(x, dtype=aval.dtype, order="C")
                                          for x, aval in zip(flat, compiled.in_avals)])
            if compiled._weak_outs:
                outs = _mark_weak(outs, compiled._weak_outs)
        if _debug_nans.active():  # (minixla.debug_nans / debug_infs: JAX's FloatingPointError)
            _debug_nans.check(compiled, flat, outs)
        if compiled._single_output:
            return outs[0]
        return tree_util.tree_unflatten(compiled.lowered.out_tree, outs)

    def _call_nested(self, fun, dyn_args, dyn_kwargs):
        """jit inside a traced or transformed function (make_jaxpr, jit, grad, vmap): one `jit`
        equation carrying its jaxpr, inlined when lowered (JAX's pjit equation); a JAX function is
        traced by JAX and its jaxpr interpreted on the outer trace's values. Its
        ``in_shardings``/``out_shardings`` constrain its arguments and results there, as in JAX."""
        if self.in_shardings is not _NO_SHARDING or self.out_shardings is not _NO_SHARDING:
            from minixla.sharding.api import constrain_call
            fun = constrain_call(fun, self.in_shardings, self.out_shardings)
        if self.frontend == "jax":
            from minixla.frontends.jax_importer import call_with_jax
            return call_with_jax(fun, dyn_args, dyn_kwargs)
        from minixla.interpreters.jit_call import call_jitted
        return call_jitted(getattr(self.fun, "__name__", "fn"), fun, dyn_args, dyn_kwargs)

    def clear_cache(self) -> None:
        """Forget every compiled signature of this function (``jax.jit(f).clear_cache()``);
        the next call traces and compiles again (the persistent cache may still serve it)."""
        with self._compiling_lock:
            self._cache.clear()
            self._history.clear()
            self._warned_recompiles = False

    def _cache_size(self) -> int:
        """How many compiled signatures the in-memory cache holds (``jax.jit(f)._cache_size()``)."""
        return len(self._cache)

    cache_size = _cache_size

    def _compile_once(self, key, args, kwargs) -> "Compiled":
        """Compile the signature ``key`` once however many threads call it first: the others
        wait for that compile (as jax.jit does) instead of compiling it again. (If it raises,
        each waiter tries, and raises, in turn.) Reentrant: a function that calls itself while
        being traced still recurses as it would without the lock."""
        with self._compiling_lock:
            lock = self._compiling.setdefault(key, threading.RLock())
        try:
            with lock:
                compiled = self._cache.get(key)
                if compiled is None:
                    compiled = self._compile_new(key, args, kwargs)
                return compiled
        finally:
            with self._compiling_lock:
                if key in self._cache:
                    self._compiling.pop(key, None)

    def _compile_new(self, key, args, kwargs) -> "Compiled":
        """Trace, lower and compile a signature not in the cache; enter it (evicting the least
        recently used past ``minixla_jit_cache_size``) and report it as configured."""
        log, explain = config.read("minixla_log_compiles"), config.read("minixla_explain_cache_misses")
        threshold = config.read("minixla_recompile_warning_threshold")
        desc = None
        if log or explain or threshold > 0:
            desc = diagnostics.describe_signature(self.fun, args, kwargs, self.static_argnums,
                                                  self.static_argnames, key[-1])
        if explain:
            diagnostics.explain_miss(self.fun, errors.user_source_line(), desc, list(self._history.values()))
        compiled = self.lower(*args, **kwargs).compile()
        if log:
            diagnostics.log_compile(self.fun, desc, compiled, persistent_cache.directory() is not None)
        with self._compiling_lock:
            self._cache[key] = compiled
            compiled._last_use = next(_use_clock)
            limit = config.read("minixla_jit_cache_size")
            while 0 <= limit < len(self._cache):  # (O(size) per eviction: only on a compile)
                oldest = min(self._cache, key=lambda k: self._cache[k]._last_use)
                del self._cache[oldest]
            if desc is not None:
                self._history[key] = desc
                while len(self._history) > _HISTORY:
                    self._history.popitem(last=False)
            distinct = len(self._history)
        if 0 < threshold < distinct and not self._warned_recompiles:
            self._warned_recompiles = True
            diagnostics.warn_recompiles(self.fun, list(self._history.values()), threshold)
        return compiled

    def _argument_error(self, args, kwargs, e):
        """Raise ``e`` (an argument that is not an array) naming the argument, as ``jax.jit``
        does ("at path self"), and the user's line."""
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n}
        try:
            names = list(inspect.signature(self.fun).parameters)
        except (TypeError, ValueError):
            names = []
        where = "an argument"
        leaves = [(names[i] if i < len(names) else f"args[{i}]", a) for i, a in enumerate(args)
                  if i not in static_pos]
        leaves += [(k, v) for k, v in kwargs.items() if k not in self.static_argnames]
        for name, value in leaves:
            for path, leaf in tree_util.tree_flatten_with_path(value)[0]:
                try:
                    get_aval(leaf)
                except errors.MinixlaError:
                    where = f"argument {name}{tree_util.keystr(path)}"
                    break
            else:
                continue
            break
        fname = getattr(self.fun, "__qualname__", getattr(self.fun, "__name__", "fn")).rsplit(".<locals>.", 1)[-1]
        hint = ("; mark it static (static_argnums / static_argnames) or make it a pytree of arrays"
                if isinstance(e, errors.DTypeError) and "valid minixla type" in e.args[0] else "")
        raise type(e)(f"jit({fname}): {where}: {e.args[0]}{hint}\n  at: {errors.user_source_line()}") from None

    def __get__(self, instance, owner=None):
        """A jitted function in a class body is a method, as with ``jax.jit``: ``obj.method``
        passes ``obj`` as the first argument. ``@functools.partial(jit, static_argnums=0)``
        makes ``self`` static (hashable; equal instances share compiled code); without it
        ``self`` must be a pytree of arrays."""
        if instance is None:
            return self
        return BoundJitted(self, instance)


class BoundJitted:
    """``obj.method`` for a ``jit``-decorated method: the ``Jitted`` with ``obj`` bound as the
    first argument of calls and of ``lower(...)`` (a bound method's ``__func__``/``__self__``)."""
    __slots__ = ("__func__", "__self__")

    def __init__(self, jitted: Jitted, instance):
        self.__func__, self.__self__ = jitted, instance

    def __call__(self, *args, **kwargs):
        return self.__func__(self.__self__, *args, **kwargs)

    def lower(self, *args, **kwargs) -> Lowered:
        """``Jitted.lower`` with ``self`` bound."""
        return self.__func__.lower(self.__self__, *args, **kwargs)

    def __getattr__(self, name):  # fun, backend, __name__, __wrapped__, ... of the Jitted
        if name in ("__func__", "__self__"):  # (not set yet: copy, pickle)
            raise AttributeError(name)
        return getattr(self.__func__, name)

    def __eq__(self, other):  # as bound methods: the same function bound to the same object
        return (isinstance(other, BoundJitted) and self.__func__ is other.__func__
                and self.__self__ is other.__self__)

    def __hash__(self):
        return hash((id(self.__func__), id(self.__self__)))

    def __repr__(self):
        return f"<bound jitted method {getattr(self.__func__, '__qualname__', '?')} of {self.__self__!r}>"


#: "in_shardings/out_shardings not given" (``minixla.sharding.api.UNSPECIFIED``)
from minixla.sharding.api import UNSPECIFIED as _NO_SHARDING  # noqa: E402

#: signature descriptions kept per function for the diagnostics
_HISTORY = 256
#: stamps the last use of a compiled signature (``next`` of an itertools.count is atomic)
_use_clock = itertools.count()


class _Inline(Exception):
    """A tracer among the arguments: the call is inlined into the trace it belongs to."""


def _signature(x):
    """The cache-key part of one argument: its aval, or just (shape, dtype) for a numpy array
    (a cheap, equivalent key: numpy arrays are never weakly typed; a float64 array that JAX
    would narrow to float32 merely gets its own cache entry). A tracer raises ``_Inline``: jit
    inside a traced or transformed function (make_jaxpr, jit, grad, vmap) is inlined, so the
    outer trace sees its primitives (and closed-over outer tracers stay legal)."""
    if type(x) is np.ndarray:
        return (x.shape, x.dtype)
    if isinstance(x, Tracer):
        raise _Inline
    if isinstance(x, _JaxArray) and not getattr(x, "weak_type", False):
        # (the key of a numpy array of its aval: a jax.Array result fed back -- a training
        # step's parameters -- finds the executable its numpy first call compiled)
        try:
            return (tuple(x.shape), np.dtype(x.dtype))
        except TypeError:  # (an extended dtype: a JAX typed key, jax.random.key)
            raise _JaxKey from None
    return get_aval(x)


class _JaxKey(Exception):
    """A JAX typed key among the arguments: passed as minixla's ``PRNGKeyArray`` of its data."""


def _keys_for_jax_tracer(fun):
    """``fun`` taking JAX typed keys where it is given minixla ``PRNGKeyArray`` s around JAX's
    tracers (JAX's front end traces it: ``frontend="jax"``, or the switch to JAX's tracer), so
    a JAX program given ``jax.random.key(..)`` sees one (``jax.random.wrap_key_data``; the
    importer maps the typed key back, ``frontends/jax_random.py``)."""
    from minixla.random.keys import PRNGKeyArray
    is_key = lambda x: isinstance(x, PRNGKeyArray)  # noqa: E731

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        import jax

        def rewrap(x):
            if is_key(x) and isinstance(x._base, jax.core.Tracer):
                return jax.random.wrap_key_data(x._base, impl=x._impl)
            return x
        def unwrap(x):  # (a typed key JAX returns: minixla's typed key of its data, as the importer's)
            if (isinstance(x, jax.core.Tracer) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
                    and str(jax.random.key_impl(x)) in ("threefry2x32", "rbg", "unsafe_rbg")):
                return PRNGKeyArray.tree_unflatten(str(jax.random.key_impl(x)), [jax.random.key_data(x)])
            return x
        args, kwargs = tree_util.tree_map(rewrap, (args, kwargs), is_leaf=is_key)
        return tree_util.tree_map(unwrap, fun(*args, **kwargs))
    return wrapped


try:  # (the flag's holder: reading it costs ~50 ns, ``jax.config.jax_enable_x64`` ~1 us)
    from jax._src.config import enable_x64 as _x64_flag

    def _x64_enabled() -> bool:
        return _x64_flag.value
except ImportError:  # pragma: no cover - another JAX layout
    import jax as _jax

    def _x64_enabled() -> bool:
        return bool(_jax.config.jax_enable_x64)


def _donated_leaves(args, donate_argnums, kwargs=None, donate_argnames=()) -> tuple:
    """Flat parameter numbers of the leaves of the positional arguments in ``donate_argnums``
    and of the keyword arguments in ``donate_argnames`` (flattened after the positional ones, in
    ``tree_flatten``'s sorted key order)."""
    starts, n = [], 0
    for a in args:
        starts.append(n)
        n += len(tree_util.tree_leaves(a))
    donated = []
    for i in donate_argnums:
        if not -len(args) <= i < len(args):
            raise ValueError(f"donate_argnums={i} but the function was called with {len(args)} positional arguments")
        i %= len(args)
        donated.extend(range(starts[i], starts[i] + len(tree_util.tree_leaves(args[i]))))
    for k in sorted(kwargs or {}):
        m = len(tree_util.tree_leaves(kwargs[k]))
        if k in donate_argnames:
            donated.extend(range(n, n + m))
        n += m
    return tuple(sorted(set(donated)))


def jit(fun=None, *, backend: str = "llvm", donate_argnums=(), static_argnums=(), static_argnames=(),
        frontend=None, in_shardings=None, out_shardings=None, mesh=None, spmd_partitioner=None,
        donate_argnames=()):
    """Compile ``fun`` with minixla (``jax.jit``'s counterpart).

    Args:
      fun: a function of arrays (numpy arrays, Python scalars or pytrees of them) returning
        arrays or a pytree of arrays. It must be traceable: no Python control flow on values.
      backend: ``"llvm"`` (minixla's own code generator, default) or ``"jax"`` (hand the
        optimized HLO to XLA through ``jax.jit``; runs on CPU, GPU or TPU).
      donate_argnums: positional arguments (int or tuple) whose arrays the program may
        overwrite, as in ``jax.jit``: an output or temporary can then be computed in place of
        them, and an output may be returned in the donated array's memory. Do not use a donated
        argument after the call (the llvm backend writes into numpy arrays you donate; the
        jax backend ignores donation). ``donate_argnames``: the same by parameter name (a
        keyword argument too); each implies the other through ``fun``'s signature, as in JAX.
      static_argnums, static_argnames: positional indices / keyword names of arguments that
        are compile-time Python values (e.g. a shape, a flag), as in ``jax.jit``: they must be
        hashable, are passed to ``fun`` unchanged, and each new value compiles again. A
        ``Compiled`` from ``.lower(...).compile()`` is then called with the other arguments only.
      frontend: who traces ``fun`` into a jaxpr (XLA's front ends): ``"jax"`` -- ``jax.make_jaxpr``,
        for a function written with ``jax.numpy``/``jax.lax``/``jax.nn`` (``jax.grad``/``jax.vmap``
        inside too), whose jaxpr ``minixla.import_jaxpr`` imports; ``"minixla"`` -- minixla's tracer
        only; ``None`` (default) -- minixla's tracer, switching to ``"jax"`` (with a warning on the
        ``minixla.jit`` logger) when ``fun`` calls a JAX function on a traced value.
      in_shardings, out_shardings: how arguments and results are laid out over a mesh of
        devices, as ``jax.jit``'s: a ``jax.sharding.NamedSharding(mesh, PartitionSpec(...))``
        (or a bare ``PartitionSpec`` under ``jax.set_mesh(mesh)``) for every array, ``None``
        (unconstrained), or a tree prefix of the positional arguments tuple / of the output.
        Each becomes an ``HloSharding`` on the entry parameter / root (``sharding={devices=
        [2,1]0,1}`` in the HLO text). With ``backend="jax"`` the optimized HLO runs on the mesh's
        devices under ``jax.jit(in_shardings=..., out_shardings=...)`` (XLA's SPMD partitioner
        splits it) and returns ``jax.Array`` s carrying the output shardings; the ``llvm``
        backend runs one device and keeps the annotations in the HLO. Errors
        (``ShardingError``, a ValueError, naming the argument's pytree path and the mesh axis):
        a spec longer than the rank, an unknown mesh axis, a dimension its mesh axes do not
        divide, a mesh naming a device twice or an ``AbstractMesh`` to run on, a tree that does
        not match the arguments, keyword arguments with ``in_shardings``; at a call, a committed
        ``jax.Array`` laid out otherwise than its ``in_shardings`` (as ``jax.jit``).
      mesh, spmd_partitioner: with ``spmd_partitioner="minixla"``,
        ``fun`` is partitioned for ``mesh`` (a ``jax.sharding.Mesh`` or ``{axis: size}``) by
        minixla's own SPMD partitioner (``minixla.sharding.partition``): ``in_shardings`` are
        ``PartitionSpec``/``NamedSharding`` (one for all arguments, or one per positional
        argument), ``out_shardings`` likewise for the outputs (``None``: propagated). The
        per-device program runs on the mesh's virtual LLVM devices (``backend="llvm"``: one
        thread and arena each, in this process), under ``jax.shard_map`` on JAX's devices
        (``"jax"``) or in the HLO evaluator (``"evaluator"``) (``minixla.sharding.spmd_jit``);
        ``.lower(*args).as_text()`` is its HLO.
    Returns:
      A ``Jitted`` callable returning numpy arrays (``jax.Array`` s for a sharded ``jax``-backend
      program), a weakly typed one (``minixla.core.avals.WeakArray``) wherever ``jax.jit``'s
      result has ``weak_type=True``; ``.lower(*args)`` gives the staged API. In a
      class body it is a method, as with ``jax.jit``: ``@functools.partial(jit, static_argnums=0)``
      makes ``self`` static. ``jit.optimization_pipeline()`` is the pass pipeline ``compile()`` runs.
    Raises:
      ShapeError, DTypeError, TracerBoolConversionError, JaxFunctionError (while tracing; each
      names the op, its operands and the line), UnsupportedError (complex dtypes, among others;
      ``UnsupportedJaxPrimitiveError`` for a JAX primitive the JAX front end cannot import).
    """
    if fun is None:
        return functools.partial(jit, backend=backend, donate_argnums=donate_argnums,
                                 static_argnums=static_argnums, static_argnames=static_argnames,
                                 frontend=frontend, in_shardings=in_shardings,
                                 out_shardings=out_shardings, mesh=mesh, spmd_partitioner=spmd_partitioner,
                                 donate_argnames=donate_argnames)
    if spmd_partitioner == "minixla":
        from minixla.sharding.spmd_jit import SpmdJitted
        if static_argnums or static_argnames or donate_argnums or donate_argnames:
            raise errors.UnsupportedError(
                "jit(spmd_partitioner='minixla') takes no static_argnums, static_argnames or "
                "donate_argnums yet: close over static values (functools.partial)")
        if mesh is None:
            from minixla.sharding import ShardingError
            raise ShardingError("jit(spmd_partitioner='minixla') needs mesh= (a jax.sharding.Mesh "
                                "or an {axis: size} dict)")
        return SpmdJitted(fun, mesh, in_shardings, out_shardings, backend=backend)
    if spmd_partitioner is not None:
        raise errors.UnsupportedError(
            f"jit: spmd_partitioner must be None (XLA's, on backend='jax') or 'minixla', "
            f"got {spmd_partitioner!r}")
    return Jitted(fun, backend, donate_argnums, static_argnums, static_argnames, frontend,
                  in_shardings, out_shardings, donate_argnames)


# The README's ``minixla.jit.optimization_pipeline()``: ``minixla.jit`` is this function (it
# shadows the module of the same name), so the pass list is reachable from it too.
jit.optimization_pipeline = optimization_pipeline
