"""Name scopes: ``named_scope`` and ``named_call`` (``jax/_src/source_info_util.py``'s name stack).

Each equation traced inside ``with minixla.named_scope("layer1"):`` records the scope in its
``SourceInfo.name_stack`` ("layer1", nested scopes joined by "/"), and lowering writes it into
the HLO instruction's ``op_name`` metadata (``layer1/dot_general``), as JAX does: a dump, a
profile or a fusion log then says which part of the model an instruction came from. Scopes
change names only, never the program.
"""
from __future__ import annotations

import contextlib
import functools
import threading


class _Stack(threading.local):
    def __init__(self):
        self.names = []


_stack = _Stack()


def current() -> str:
    """The active scopes, outermost first, joined by "/" ("" outside every scope)."""
    return "/".join(_stack.names)


@contextlib.contextmanager
def named_scope(name: str):
    """Context manager adding ``name`` to the name stack of the equations traced inside it
    (``jax.named_scope``). Raises ``TypeError`` for a name that is not a string."""
    if not isinstance(name, str):
        raise TypeError("named_scope name argument must be a string.")
    _stack.names.append(name)
    try:
        yield
    finally:
        _stack.names.pop()


def named_call(fun, *, name: str | None = None):
    """``fun`` wrapped so that its equations trace under the scope ``name`` (default: the
    function's ``__name__``), as ``jax.named_call``."""
    scope = name if name is not None else getattr(fun, "__name__", "fn")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        with named_scope(scope):
            return fun(*args, **kwargs)
    return wrapped
