"""``debug_nans`` / ``debug_infs`` (JAX's ``jax.debug_nans``, ``jax.debug_infs`` context
managers; the ``jax_debug_nans``/``jax_debug_infs`` options of ``minixla.config``, which a
block overrides): while on, a ``minixla.jit`` call whose float output holds a NaN (an inf)
runs its jaxpr again op by op, eagerly, and raises ``FloatingPointError`` naming the first
primitive whose output holds one -- JAX's "de-optimized" rerun. Call-like equations (``jit``,
``custom_jvp_call``, ...) are entered, so the primitive named is the one inside. Off by default: the check costs a pass over the outputs.
"""
from __future__ import annotations

import threading

import numpy as np

from minixla.core.jaxpr import Literal

__all__ = ["debug_nans", "debug_infs"]


class _State(threading.local):
    nans = None  # None: not set by a context manager (the config option decides)
    infs = None


_state = _State()


class _Flag:
    def __init__(self, name, enabled=True):
        self.name, self.enabled, self._saved = name, bool(enabled), []

    def __enter__(self):
        self._saved.append(getattr(_state, self.name))
        setattr(_state, self.name, int(self.enabled))
        return self

    def __exit__(self, *exc):
        setattr(_state, self.name, self._saved.pop())
        return False


def debug_nans(enabled=True):
    """``with minixla.debug_nans():`` NaN outputs of ``jit`` calls raise ``FloatingPointError``."""
    return _Flag("nans", enabled)


def debug_infs(enabled=True):
    """``with minixla.debug_infs():`` infinite outputs of ``jit`` calls raise ``FloatingPointError``."""
    return _Flag("infs", enabled)


_from_config = [-1, False, False]  # (config generation, jax_debug_nans, jax_debug_infs)


def _flags():
    """(nans, infs): an enclosing context manager's setting, else the ``jax_debug_nans`` /
    ``jax_debug_infs`` config options (read again only after a config change)."""
    from minixla.config import config
    if _from_config[0] != config.generation:
        _from_config[:] = [config.generation, config.read("jax_debug_nans"), config.read("jax_debug_infs")]
    return (bool(_from_config[1] if _state.nans is None else _state.nans),
            bool(_from_config[2] if _state.infs is None else _state.infs))


def active() -> bool:
    return any(_flags())


def _bad(x):
    x = np.asarray(x)
    if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
        return None
    x = x.astype(np.float32) if x.dtype.name == "bfloat16" else x
    nans, infs = _flags()
    if nans and np.isnan(x).any():
        return "nan"
    if infs and np.isinf(x).any():
        return "inf"
    return None


def _rerun(jaxpr, consts, args):
    env = {}
    for v, x in zip(list(jaxpr.constvars) + list(jaxpr.invars), list(consts) + list(args)):
        env[v.id] = x

    def read(a):
        return a.value if isinstance(a, Literal) else env[a.id]
    for eqn in jaxpr.eqns:
        ins = [read(a) for a in eqn.invars]
        sub = next((p for k, p in eqn.params.items() if k in ("call_jaxpr", "jaxpr") and hasattr(p, "jaxpr")), None)
        if sub is not None and len(sub.jaxpr.invars) == len(ins):
            out = _rerun(sub.jaxpr, sub.consts, ins)
        else:
            out = eqn.primitive.bind(*ins, **eqn.params)
            out = list(out) if eqn.primitive.multiple_results else [out]
            for o in out:
                kind = _bad(o)
                if kind is not None:
                    raise FloatingPointError(f"invalid value ({kind}) encountered in {eqn.primitive.name}")
        for v, o in zip(eqn.outvars, out):
            env[v.id] = o
    return [read(a) for a in jaxpr.outvars]


def check(compiled, flat_args, outs) -> None:
    """Raise JAX's ``FloatingPointError`` if a float output of ``compiled`` holds a NaN (inf)."""
    if not any(_bad(o) for o in outs):
        return
    closed = compiled.lowered.jaxpr
    _rerun(closed.jaxpr, closed.consts, flat_args)
    kind = next(k for k in map(_bad, outs) if k)  # (op by op gave none: the compiled program's own)
    raise FloatingPointError(f"invalid value ({kind}) encountered in the output of a minixla.jit function")
