"""Differential testing against JAX (``jax._src.test_util``'s role for minixla).

``check_against_jax(f, jax_f, *args)`` compiles ``f`` with minixla on each backend, runs
``jax_f`` with JAX eager (op by op, ``jax.disable_jit()``: the semantic reference) on the
device that backend targets (``reference_device``), and raises an ``AssertionError`` with a
readable diff when any output differs. ``check_grads(f, args, order)`` checks minixla's
``jvp``/``vjp`` of ``f`` against central differences, as ``jax.test_util.check_grads``.
The differential fuzzer's random programs are in ``minixla.fuzz``.
"""
from __future__ import annotations

import os
import shutil

import jax
import numpy as np
from jax import tree_util

from minixla.jit import BACKENDS, jit


def default_jax_cache_dir(name: str) -> str:
    """``~/.cache/minixla/<name>`` (``$XDG_CACHE_HOME`` first): where the tests and the deep
    fuzzer keep JAX's persistent compilation cache."""
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "minixla", name)


def share_jax_compiles(directory: str, trim: bool = True, max_bytes: int = 2 ** 30) -> bool:
    """Point JAX's persistent compilation cache (``jax_compilation_cache_dir``, every entry
    kept however fast it compiled) at ``directory``, so JAX eager's per-primitive XLA compiles
    (~50 ms of CPU each) are shared by processes and later runs. A hit is the same executable,
    so the same numbers. ``""`` or an unwritable directory leaves the cache off (never an
    error). ``trim``: past ``max_bytes`` the directory starts afresh (JAX evicts only with the
    ``filelock`` package). Returns whether the cache is on."""
    if not directory:
        return False
    try:
        os.makedirs(directory, exist_ok=True)
        if trim and sum(e.stat().st_size for e in os.scandir(directory) if e.is_file()) > max_bytes:
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory, exist_ok=True)
        if not os.access(directory, os.W_OK):
            return False
    except OSError:  # (a read-only home)
        return False
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return True


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


# ---------------------------------------------------------------------------------------
# Numerical gradient checks (``jax.test_util.check_grads``'s role).

#: default (step of the central difference, tolerance) per dtype: the step balances the
#: difference's truncation error (~ eps**2 f''') against rounding (~ ulp(f) / eps)
_NUMERICAL = {np.dtype(np.float64): (1e-5, 1e-5), np.dtype(np.float32): (1e-3, 2e-2),
              np.dtype(np.float16): (1e-2, 1e-1), np.dtype(jax.numpy.bfloat16): (1e-1, 2e-1)}


def _float_dtype(x):
    dt = np.asarray(x).dtype
    if dt not in _NUMERICAL:
        raise TypeError(f"check_grads: arguments must be float arrays (float64 for a tight check); "
                        f"got {dt.name}{list(np.shape(x))}")
    return dt


def _tree_combine(a, b, s):
    """``a + s * b`` leaf by leaf, computed in float64 and rounded to ``a``'s dtype."""
    return tree_util.tree_map(lambda x, t: (np.asarray(x, np.float64) + s * np.asarray(t, np.float64))
                              .astype(np.asarray(x).dtype), a, b)


def _inner(a, b) -> float:
    return float(sum(np.vdot(np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel())
                     for x, y in zip(tree_util.tree_leaves(a), tree_util.tree_leaves(b))))


def numerical_jvp(f, primals, tangents, eps):
    """``(f(primals + eps t) - f(primals - eps t)) / (2 eps)``, leaf by leaf in float64."""
    hi = f(*_tree_combine(primals, tangents, eps))
    lo = f(*_tree_combine(primals, tangents, -eps))
    return tree_util.tree_map(lambda h, l: (np.asarray(h, np.float64) - np.asarray(l, np.float64)) / (2 * eps),
                              hi, lo)


def _assert_tree_close(what, got, want, rtol, atol):
    got_l, got_t = tree_util.tree_flatten(got)
    want_l, want_t = tree_util.tree_flatten(want)
    if got_t != want_t:
        raise AssertionError(f"{what}: output structure {got_t} != {want_t}")
    problems = [m for i, (g, w) in enumerate(zip(got_l, want_l))
                if (m := _describe_mismatch(f"{what}, output {i}", np.asarray(g, np.float64),
                                            np.asarray(w, np.float64), rtol, atol))]
    if problems:
        raise AssertionError("\n".join(problems))


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None, backend=None, seed=0):
    """Check ``minixla.jvp``/``minixla.vjp`` of ``f`` against central differences, to ``order``,
    as ``jax.test_util.check_grads``.

    ``fwd``: ``jvp(f, args, t)`` against ``(f(args + eps t) - f(args - eps t)) / 2 eps`` for a
    random tangent ``t``. ``rev``: ``<vjp(ct), t>`` against ``<ct, numerical jvp(t)>`` (the dot
    product identity) for random ``t`` and ``ct``. For ``order`` > 1 the same checks run on the
    derivative functions themselves (``(p, t) -> jvp(f, p, t)``, and ``p -> vjp(f, p)(f(p))``),
    so order 2 checks the Hessian-vector products of both modes.

    Args:
      f: function of ``len(args)`` pytrees of float arrays, written with ``minixla.numpy``/``lax``;
        its outputs are float pytrees.
      args: tuple of arguments. Use float64 (``jax_enable_x64``) for a tight check: the default
        step and tolerance per dtype are f64 (1e-5, 1e-5), f32 (1e-3, 2e-2), f16 (1e-2, 1e-1).
      order: 1 or more. modes: a subset of ``("fwd", "rev")``.
      atol, rtol, eps: override the dtype's defaults. seed: the random directions.
      backend: ``None`` evaluates eagerly (op by op); ``"llvm"``/``"jax"`` compiles every
        evaluation (of ``f`` and of its derivatives) with ``minixla.jit(..., backend=backend)``.
    Raises:
      AssertionError naming the order, the mode and the mismatching elements;
      TypeError for an argument that is not a float array.
    """
    from minixla.interpreters.api import jvp, vjp
    args = tuple(args)
    dtypes = {_float_dtype(x) for x in tree_util.tree_leaves(args)}
    widest = max(dtypes, key=lambda d: np.finfo(d).bits)
    d_eps, d_tol = _NUMERICAL[widest]
    eps, atol, rtol = eps or d_eps, d_tol if atol is None else atol, d_tol if rtol is None else rtol
    rng = np.random.default_rng(seed)

    def run(fun, *a):
        return tree_util.tree_map(np.asarray, (jit(fun, backend=backend) if backend else fun)(*a))

    def rand_like(tree):
        return tree_util.tree_map(lambda x: rng.normal(size=np.shape(x)).astype(np.asarray(x).dtype), tree)

    def check(fun, a, k):
        tangents = rand_like(a)
        if "fwd" in modes:
            y, t = run(lambda p, t: jvp(fun, p, t), a, tangents)
            _assert_tree_close(f"check_grads order {k} fwd: primal", y, run(fun, *a), rtol, atol)
            _assert_tree_close(f"check_grads order {k} fwd: jvp vs central differences", t,
                               numerical_jvp(lambda *p: run(fun, *p), a, tangents, eps), rtol, atol)
            if k < order:
                check(lambda p, t: jvp(fun, p, t), (a, tangents), k + 1)
        if "rev" in modes:
            y = run(fun, *a)
            ct = rand_like(y)
            ct_in = run(lambda p, c: vjp(fun, *p)[1](c), a, ct)
            got = _inner(ct_in, tangents)
            want = _inner(ct, numerical_jvp(lambda *p: run(fun, *p), a, tangents, eps))
            _assert_tree_close(f"check_grads order {k} rev: <vjp(ct), t> vs <ct, central differences>",
                               np.float64(got), np.float64(want), rtol, atol)
            if k < order:
                def f_vjp(*p):
                    out, pull = vjp(fun, *p)
                    return pull(out)
                check(f_vjp, a, k + 1)
    check(f, args, 1)
