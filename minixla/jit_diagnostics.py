"""Recompilation you can see (JAX's ``jax_log_compiles``, ``jax_explain_cache_misses`` and
``pjit``'s "TRACING CACHE MISS" explanations).

* ``minixla_log_compiles``: one line per compilation on the ``minixla.jit`` logger (WARNING,
  as JAX logs compiles, so it shows without configuring logging): the function's name and
  file:line, the input avals, the trace/lower/passes/codegen milliseconds (with a persistent
  cache, the key's and the entry load's apart) and whether the executable came from the
  persistent cache (with ``backend="jax"``: whether JAX's persistent cache served XLA's compile).
* ``minixla_explain_cache_misses``: before such a compile, why the in-memory cache missed --
  a function never compiled before, or the closest signature compiled before and what
  differs, by pytree path (``at x['w'], now f32[64,32] and before f32[32,32]``), with a hint
  when only a weak type differs; static argument values; the structure; ``jax_enable_x64``.
* ``RecompilationWarning`` once a function has compiled for more than
  ``minixla_recompile_warning_threshold`` distinct signatures: which arguments vary and how
  to stop it (pad to a few bucket sizes, mark arguments static) -- XLA's "a new shape
  recompiles" made visible.
"""
from __future__ import annotations

import inspect
import logging
import warnings

from jax import tree_util

from minixla.core.avals import get_aval

logger = logging.getLogger("minixla.jit")


class RecompilationWarning(UserWarning):
    """A jitted function keeps compiling for new input signatures."""


def function_site(fun) -> tuple[str, str]:
    """``(name, "file:line")`` of the function's definition."""
    name = getattr(fun, "__qualname__", getattr(fun, "__name__", "fn")).rsplit(".<locals>.", 1)[-1]
    code = getattr(inspect.unwrap(fun), "__code__", None)
    where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "<unknown>"
    return name, where


def aval_text(leaf) -> str:
    aval = get_aval(leaf)
    return aval.str_short() + ("{weak_type=True}" if aval.weak_type else "")


def describe_signature(fun, args, kwargs, static_argnums, static_argnames, x64: bool) -> dict:
    """What a call's signature consists of, by path: ``{"avals": {path: text}, "static":
    {name: repr}, "structure": text, "config": {...}}`` (only computed on a compile)."""
    try:
        names = [p.name for p in inspect.signature(fun).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    n = len(args)
    static_pos = {i % n for i in static_argnums if -n <= i < n}
    avals, static = {}, {}
    items = [(names[i] if i < len(names) else f"args[{i}]", a, i in static_pos) for i, a in enumerate(args)]
    items += [(k, v, k in static_argnames) for k, v in kwargs.items()]
    dynamic = []
    for name, value, is_static in items:
        if is_static:
            static[name] = repr(value)
            continue
        dynamic.append(value)
        for path, leaf in tree_util.tree_flatten_with_path(value)[0]:
            try:
                avals[name + tree_util.keystr(path)] = aval_text(leaf)
            except Exception:
                avals[name + tree_util.keystr(path)] = type(leaf).__name__
    structure = str(tree_util.tree_structure(dynamic))
    return {"avals": avals, "static": static, "structure": structure, "config": {"jax_enable_x64": x64}}


def avals_text(desc: dict) -> str:
    return ", ".join(f"{p}: {a}" for p, a in desc["avals"].items()) or "no array arguments"


def differences(now: dict, before: dict) -> list[str]:
    """Human-readable differences between two signature descriptions."""
    out = []
    if now["structure"] != before["structure"]:
        out.append(f"the pytree structure of the arguments differs: now {now['structure']} "
                   f"and before {before['structure']}")
    for path in list(now["avals"]) + [p for p in before["avals"] if p not in now["avals"]]:
        a, b = now["avals"].get(path, "absent"), before["avals"].get(path, "absent")
        if a != b:
            line = f"at {path}, now {a} and before {b}"
            if a.replace("{weak_type=True}", "") == b.replace("{weak_type=True}", ""):
                line += (" (only the weak type differs: a Python scalar is weakly typed and takes "
                         "the other operand's dtype; pass an np.float32(...) or an array to keep one signature)")
            out.append(line)
    for name in list(now["static"]) + [n for n in before["static"] if n not in now["static"]]:
        a, b = now["static"].get(name, "absent"), before["static"].get(name, "absent")
        if a != b:
            out.append(f"static argument {name}: now {a} and before {b} (each new value compiles again)")
    for opt, a in now["config"].items():
        b = before["config"].get(opt)
        if a != b:
            out.append(f"config {opt}: now {a} and before {b}")
    return out


def explain_miss(fun, call_site: str, desc: dict, history) -> None:
    """Log why the in-memory cache missed (``history``: descriptions compiled before)."""
    name, where = function_site(fun)
    if not history:
        logger.warning("TRACING CACHE MISS at %s because:\n  never seen function:\n    %s defined at %s",
                       call_site, name, where)
        return
    scored = [(len(d), d) for d in (differences(desc, h) for h in history)]
    n, diffs = min(scored, key=lambda t: t[0])
    if not diffs:  # (evicted from the bounded in-memory cache, or cleared)
        diffs = ["this signature was compiled before and has left the in-memory cache "
                 "(clear_cache(), or more than minixla_jit_cache_size signatures)"]
    logger.warning("TRACING CACHE MISS at %s because:\n  for %s defined at %s, the closest of %d "
                   "signatures compiled before differs:\n%s", call_site, name, where, len(history),
                   "\n".join("    " + d for d in diffs))


def log_compile(fun, desc: dict, compiled, cache_on: bool) -> None:
    """The ``minixla_log_compiles`` line. Each stage's own milliseconds: on a first-level hit of
    the persistent cache no pass runs (``passes 0.0 ms``) and the time is the key's and the
    entry's load; the first key of a process also asks LLVM for the host target (importing
    the LLVM backend, once). With ``backend="jax"`` the state is JAX's persistent cache's
    (it, not minixla's, stores XLA's executables)."""
    name, where = function_site(fun)
    lowered = compiled.lowered
    cache = ""
    if cache_on and compiled.lowered.backend in persistent_cache_backends():
        setup = (f" + {compiled.key_setup_ms:.1f} ms LLVM target set-up (once per process)"
                 if compiled.key_setup_ms else "")
        cache = f", cache key {compiled.key_ms:.1f} ms{setup}, cache load {compiled.load_ms:.1f} ms"
        state = "persistent cache " + ("hit" if compiled.persistent_cache_hit else "miss")
    elif cache_on and compiled.jax_cache_hit is not None:
        state = "jax persistent cache " + ("hit" if compiled.jax_cache_hit else "miss")
    elif cache_on:  # (no XLA compile asked JAX's cache: JAX's in-memory cache served it, or it is off)
        state = "jax persistent cache not consulted"
    else:
        state = "persistent cache off"
    logger.warning("Compiled %s (%s) for (%s): trace %.1f ms, lower %.1f ms%s, passes %.1f ms, "
                   "codegen %.1f ms; %s", name, where, avals_text(desc),
                   lowered.trace_ms, lowered.lower_ms, cache, compiled.passes_ms, compiled.codegen_ms, state)


def persistent_cache_backends():
    from minixla.cache import SERIALIZABLE_BACKENDS
    return SERIALIZABLE_BACKENDS


def warn_recompiles(fun, history, threshold: int) -> None:
    """The ``RecompilationWarning`` (the caller warns once per function)."""
    name, where = function_site(fun)
    varying = {}
    for d in history:
        for path, a in d["avals"].items():
            varying.setdefault(path, [])
            if a not in varying[path]:
                varying[path].append(a)
    vary = [f"{p} ({', '.join(v[:4])}{', ...' if len(v) > 4 else ''})" for p, v in varying.items() if len(v) > 1]
    statics = {n for d in history for n in d["static"]}
    static_vary = [n for n in statics if len({d["static"].get(n) for d in history}) > 1]
    what = []
    if vary:
        what.append("the avals of " + "; ".join(vary) + " vary")
    if static_vary:
        what.append("the static argument(s) " + ", ".join(static_vary) + " take new values")
    warnings.warn(
        f"jit({name}) defined at {where} has compiled for {len(history)} distinct input signatures "
        f"(more than minixla_recompile_warning_threshold={threshold}): {'; '.join(what) or 'the signatures vary'}. "
        "Every new shape or dtype traces and compiles again: pad inputs to a few bucket sizes, "
        "mark Python values static (static_argnums) only when they take few values, and pass "
        "arrays of fixed dtype rather than Python scalars.", RecompilationWarning, stacklevel=4)
