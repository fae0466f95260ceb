"""Differential testing against JAX (``jax._src.test_util``'s role for minixla).

``check_against_jax(f, jax_f, *args)`` compiles ``f`` with minixla on each backend, runs
``jax_f`` with JAX eager (op by op, ``jax.disable_jit()``: the semantic reference) on the
device that backend targets (``reference_device``), and raises an ``AssertionError`` with a
readable diff when any output differs.
"""
from __future__ import annotations

import jax
import numpy as np
from jax import tree_util

from minixla.jit import BACKENDS, jit


def reference_device(backend: str):
    """The device whose JAX eager results ``backend`` must reproduce: the LLVM backend mirrors
    XLA:CPU, so its reference is JAX on the CPU even where JAX's default device is a GPU; the
    hand-off backend compiles for JAX's default device, so that is its reference."""
    return jax.devices("cpu")[0] if backend == "llvm" else jax.devices()[0]


def eager_reference(jax_f, *args, backend: str = "jax"):
    """``jax_f(*args)`` run op by op (``jax.disable_jit()``) on ``reference_device(backend)``."""
    with jax.default_device(reference_device(backend)), jax.disable_jit():
        return jax_f(*args)


def _describe_mismatch(name, got, want, rtol, atol) -> str | None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return (f"{name}: minixla gave {got.dtype}{list(got.shape)}, "
                f"JAX gave {want.dtype}{list(want.shape)}")
    if got.size == 0:
        return None
    if got.dtype.kind in "biu" or got.dtype == np.bool_:
        bad = got != want
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(w)
        with np.errstate(invalid="ignore"):
            close = (g == w) | (np.abs(g - w) <= atol + rtol * np.abs(w))
        bad = ~(close | both_nan)
    if not bad.any():
        return None
    idx = np.argwhere(bad)
    first = tuple(int(i) for i in idx[0])
    lines = [f"{name}: {int(bad.sum())} of {got.size} elements differ (rtol={rtol}, atol={atol})",
             f"  first at index {first}: minixla {got[first]!r} vs JAX {want[first]!r}"]
    if got.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        lines.append(f"  max |diff| = {np.nanmax(diff)}")
    return "\n".join(lines)


def check_against_jax(f, jax_f, *args, rtol=1e-6, atol=1e-6, backends=BACKENDS):
    """Run ``minixla.jit(f, backend=b)(*args)`` for each backend and ``jax_f(*args)`` eagerly
    on the device backend ``b`` targets (``reference_device``).

    Args:
      f: function written with ``minixla.numpy``/``minixla.lax``.
      jax_f: the same function with ``jax.numpy``/``jax.lax`` (often the very same source).
      args: numpy arrays / scalars / pytrees. rtol, atol: float tolerances (integers, bools
        and dtypes must match exactly; NaN matches NaN).
    Returns:
      dict backend -> minixla's outputs (a pytree of numpy arrays).
    Raises:
      AssertionError listing, per backend and output, the mismatching elements.
    """
    wants, results, problems = {}, {}, []
    for backend in backends:
        device = reference_device(backend)
        if device not in wants:
            wants[device] = eager_reference(jax_f, *args, backend=backend)
        want_leaves, want_tree = tree_util.tree_flatten(wants[device])
        got = jit(f, backend=backend)(*args)
        results[backend] = got
        got_leaves, got_tree = tree_util.tree_flatten(got)
        if got_tree != want_tree:
            problems.append(f"[{backend}] output structure {got_tree} != JAX's {want_tree}")
            continue
        for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
            msg = _describe_mismatch(f"[{backend}] output {i}", g, w, rtol, atol)
            if msg:
                problems.append(msg)
    if problems:
        raise AssertionError("minixla differs from JAX eager:\n" + "\n".join(problems))
    return results
