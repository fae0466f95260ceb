"""The host side of ``jax``'s top-level API: waiting for and fetching results, the devices,
``disable_jit`` and ``clear_caches`` (``jax/_src/api.py``, ``jax/_src/xla_bridge.py``).

minixla runs on the CPU process it lives in: the LLVM backend's results are NumPy arrays,
already on the host and complete when a call returns; the JAX hand-off returns ``jax.Array``s
on JAX's devices. Devices are JAX's own (``jax.devices()``): the hand-off runs on them and
``jax.sharding`` meshes are made of them (``minixla/sharding``).
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np
from jax import tree_util


class _JitState(threading.local):
    def __init__(self):
        self.disabled = 0


#: read by ``Jitted.__call__``: while > 0, a jitted function runs its Python body, op by op
jit_state = _JitState()


@contextlib.contextmanager
def disable_jit(disable: bool = True):
    """Run ``minixla.jit``-decorated functions as plain Python, op by op, inside this block
    (``jax.disable_jit``): each op then runs eagerly (JAX eager's semantics), which is what
    one wants under a debugger or with ``print``. Transformations (``grad``, ``vmap``) still
    trace. ``disable_jit(False)`` inside turns it back on. Thread-local, as JAX's."""
    saved = jit_state.disabled
    jit_state.disabled = 1 if disable else 0
    try:
        yield
    finally:
        jit_state.disabled = saved


def block_until_ready(x):
    """Wait until every array of the pytree ``x`` is computed, and return ``x``
    (``jax.block_until_ready``). minixla's LLVM results are complete when the call returns; a
    hand-off result (``jax.Array``) is waited for."""
    for leaf in tree_util.tree_leaves(x):
        wait = getattr(leaf, "block_until_ready", None)
        if wait is not None:
            wait()
    return x


def device_get(x):
    """The pytree ``x`` with each array as a NumPy array on the host (``jax.device_get``);
    other leaves (Python scalars, strings) are returned as they are."""
    def get(leaf):
        if isinstance(leaf, np.ndarray):
            return leaf
        if hasattr(leaf, "__array__") and hasattr(leaf, "shape"):
            return np.asarray(leaf)
        return leaf
    return tree_util.tree_map(get, x)


def devices(backend: str | None = None):
    """JAX's devices (``jax.devices``), which the hand-off and sharded programs run on."""
    import jax
    return jax.devices(backend)


def local_devices(process_index: int | None = None, backend: str | None = None):
    """``jax.local_devices``: this process's devices."""
    import jax
    return jax.local_devices(process_index, backend)


def device_count(backend: str | None = None) -> int:
    """``jax.device_count``."""
    import jax
    return jax.device_count(backend)


def local_device_count(backend: str | None = None) -> int:
    """``jax.local_device_count``."""
    import jax
    return jax.local_device_count(backend)


def default_backend() -> str:
    """JAX's default platform (``jax.default_backend``: "cpu" here), where the hand-off runs."""
    import jax
    return jax.default_backend()


def process_index() -> int:
    """``jax.process_index``: 0 (minixla runs in one process)."""
    import jax
    return jax.process_index()


def process_count() -> int:
    """``jax.process_count``: 1."""
    import jax
    return jax.process_count()


def clear_caches() -> None:
    """Forget every compiled program of every ``minixla.jit`` function and the process-wide
    kernel cache (``jax.clear_caches``): the next call traces and compiles again. The
    persistent (on-disk) cache is left alone, as JAX leaves its own."""
    import sys
    from minixla.backends.llvm import kernel_cache
    for f in list(sys.modules["minixla.jit"].live_jitted):  # (``minixla.jit`` is the function)
        f.clear_cache()
    kernel_cache.clear()
