"""The differential fuzzer's transformation modes: ``grad``/``vjp``, ``jvp`` and ``vmap`` of
random programs (``programs.py``), compiled by ``minixla.jit`` on both backends and compared
with the same transformation by JAX eager (``jax.grad``/``jax.vjp``/``jax.jvp``/``jax.vmap``
under ``jax.disable_jit()`` on the backend's reference device).

- ``grad``: the program's float outputs are scalarized as ``sum_j sum(out_j * ct_j)`` with
  random cotangents ``ct_j`` (passed as arguments, not differentiated), and
  ``jit(grad(loss, argnums=<the float inputs>))`` is compared with ``jax.grad``; or (drawn)
  ``jit`` of ``vjp`` of the program over its float inputs, the integer and bool inputs closed
  over as tracers of the outer ``jit``, pulled back with the cotangents.
- ``jvp``: ``jit`` of ``jvp`` over the float inputs with random tangents.
- ``vmap``: a batch of 0-3 examples, random ``in_axes`` per input (``None``, and negative
  axes included, at least one batched) and ``out_axes`` per output (negative, and ``None``
  where JAX accepts it: an unbatched output); ``jit(vmap(f))`` against ``jax.vmap``.

The contract. Primal outputs (of ``vjp``, ``jvp`` and every ``vmap`` output) are held to the
forward fuzzer's contract (``compare``: bit for bit for *exact* values). Derivatives are
computed in the program's float dtypes by different (equally valid) orders of summation, so
they are compared within ``DERIVATIVE_RTOL`` relative to each element plus the same relative
tolerance times the largest magnitude in that array (a transposed broadcast sums cotangents,
whose rounding is relative to the terms, not to the sum); NaN and ±inf positions must match.

Where the derivative jumps (``abs`` at 0, ``maximum``/``minimum``/``clip``/max-min reductions at
a tie, ``sqrt`` at 0, ...), an ulp of difference in the point moves the derivative anywhere: a
question of the point, not of the rule. So those ops only read *exact* values (``KINKS``,
``grad_classify``): at an exact point both sides see the same tie and JAX's rule (ties split
evenly, as ``jax.grad`` of ``max`` does) must be reproduced exactly. Inputs carry fewer special
values (``SPECIAL_RATE``) than the forward fuzzer's, so that most derivatives are finite.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

import minixla
import minixla.nn
import minixla.numpy as mnp
from minixla import lax as mlax
from minixla.fuzz.programs import (BF16, EXTRA_OPS, _is_float, build, classify, compare, compare_value, describe,
                                   draw_op, interpret, make_input)
from minixla.interpreters.rules import MISSING
from minixla.testing import eager_reference, reference_device

BACKENDS = ("llvm", "jax")
#: floats to differentiate (mostly f32), integers and bools to index and select with
GRAD_DTYPES = [np.dtype(d) for d in (np.float32,) * 5 + (np.int32, np.bool_, np.float16)] + [BF16]
#: programs stay short: each one compiles its transformed (about twice as long) program twice
MAX_OPS = 12
SPECIAL_RATE = 0.03
DERIVATIVE_RTOL = {np.dtype(np.float32): 1e-4, np.dtype(np.float16): 1e-2, BF16: 8e-2}
#: ops whose derivative jumps at a point: they only read exact values
KINKS = {"abs", "maximum", "minimum", "clip", "sqrt"}
#: the primitive each ``x.at[i].<fn>`` binds: left out while its JVP row is listed missing
AT_PRIMITIVE = {"set": "scatter", "add": "scatter-add", "multiply": "scatter-mul", "min": "scatter-min",
                "max": "scatter-max"}


# ---------------------------------------------------------------------------------------
# Ops the transformation modes add to the forward fuzzer's: the primitives whose rules are
# tricky (dot_general with batch dims on either side, conv with strides, padding, dilations
# and groups, cummax, dynamic_update_slice, integer_pow, softmax and logsumexp).

def _nn(np_):
    return jax.nn if np_ is jnp else minixla.nn


def _dot_general(np_, lax_, args, p):
    x, w = args[0], np.asarray(p["w"]).astype(args[0].dtype)
    return lax_.dot_general(w, x, p["dn"]) if p["const_lhs"] else lax_.dot_general(x, w, p["dn"])


def _conv(np_, lax_, args, p):
    x = args[0]
    return lax_.conv_general_dilated(x, np.asarray(p["w"]).astype(x.dtype), p["strides"], p["padding"],
                                     lhs_dilation=p["lhs_dilation"], rhs_dilation=p["rhs_dilation"],
                                     feature_group_count=p["groups"])


def _dynamic_update_slice(np_, lax_, args, p):
    upd = args[1][tuple(slice(0, n) for n in p["sizes"])]
    return lax_.dynamic_update_slice(args[0], upd, [np.int32(i) for i in p["start"]])


EXTRA = {
    "lax_dot_general": _dot_general,
    "lax_conv": _conv,
    "lax_cummax": lambda np_, lax_, a, p: getattr(lax_, p["fn"])(a[0], p["axis"], reverse=p["reverse"]),
    "lax_dynamic_update_slice": _dynamic_update_slice,
    "lax_integer_pow": lambda np_, lax_, a, p: lax_.integer_pow(a[0], p["n"]),
    "power_float": lambda np_, lax_, a, p: np_.power(a[0], p["y"]),
    "trig": lambda np_, lax_, a, p: getattr(np_, p["fn"])(a[0]),
    "nn": lambda np_, lax_, a, p: getattr(_nn(np_), p["fn"])(a[0], axis=p["axis"]),
}
EXTRA_OPS.update(EXTRA)


def draw_transform_op(draw, vals):
    """An op of ``EXTRA`` (about a third of the time, on a float value) or of ``draw_op``."""
    if not draw(st.integers(0, 2)) == 0:
        return draw_op(draw, vals)
    floats = [i for i, v in enumerate(vals) if _is_float(v.dtype)]
    if not floats:
        return None
    k = draw(st.sampled_from(floats))
    x = vals[k]
    nd = len(x.shape)
    kind = draw(st.sampled_from(sorted(EXTRA)))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    if kind == "lax_dot_general":
        if not nd:
            return None
        axes = list(draw(st.permutations(range(nd))))
        nc = draw(st.integers(1, min(2, nd)))
        nb = draw(st.integers(0, min(1, nd - nc)))
        xc, xb = tuple(axes[:nc]), tuple(axes[nc:nc + nb])
        free = draw(st.sampled_from([1, 2, 3]))
        w = (rng.integers(-8, 9, tuple(x.shape[i] for i in xb + xc) + (free,)) / 4)
        wb, wc = tuple(range(nb)), tuple(range(nb, nb + nc))
        const_lhs = draw(st.booleans())
        dn = ((wc, xc), (wb, xb)) if const_lhs else ((xc, wc), (xb, wb))
        return kind, [k], dict(w=w, dn=dn, const_lhs=const_lhs)
    if kind == "lax_conv":
        if nd not in (3, 4):
            return None
        c = x.shape[1]
        groups = draw(st.sampled_from([g for g in (1, 2, 3, 5) if c % g == 0] or [1]))
        sp = nd - 2
        ksize = tuple(draw(st.integers(1, 3)) for _ in range(sp))
        w = rng.integers(-8, 9, (groups * draw(st.integers(1, 2)), c // groups) + ksize) / 4
        return kind, [k], dict(
            w=w, groups=groups, strides=tuple(draw(st.integers(1, 2)) for _ in range(sp)),
            padding=[(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(sp)],
            lhs_dilation=tuple(draw(st.integers(1, 2)) for _ in range(sp)),
            rhs_dilation=tuple(draw(st.integers(1, 2)) for _ in range(sp)))
    if kind == "lax_cummax":
        if not nd:
            return None
        return kind, [k], dict(fn=draw(st.sampled_from(["cummax", "cummin"])), axis=draw(st.integers(0, nd - 1)),
                               reverse=draw(st.booleans()))
    if kind == "lax_dynamic_update_slice":
        other = [i for i, v in enumerate(vals) if v.shape == x.shape and v.dtype == x.dtype]
        u = draw(st.sampled_from(other))
        return kind, [k, u], dict(sizes=[draw(st.integers(0, d)) for d in x.shape],
                                  start=[draw(st.integers(-2, 4)) for _ in x.shape])
    if kind == "lax_integer_pow":
        return kind, [k], dict(n=draw(st.sampled_from([-2, -1, 0, 2, 3, 5])))
    if kind == "power_float":
        return kind, [k], dict(y=draw(st.sampled_from([0.5, 1.5, -0.5, 2.5])))
    if kind == "trig":
        return kind, [k], dict(fn=draw(st.sampled_from(["sin", "cos", "tan"])))
    if nd == 0:
        return None
    return kind, [k], dict(fn=draw(st.sampled_from(["softmax", "log_softmax", "logsumexp"])),
                           axis=draw(st.integers(-nd, nd - 1)))


def classify_extra(op, p, args):
    """``classify`` extended to ``EXTRA``'s ops (same contract)."""
    if op not in EXTRA:
        return classify(op, p, args)
    exact = all(a.exact for a in args)
    nice = all(a.nice for a in args)
    if op in ("lax_dot_general", "lax_conv"):  # sums: exact in any order only over nice values
        return (exact, False) if nice else None
    if op in ("lax_cummax", "lax_dynamic_update_slice"):
        return exact, nice
    if op in ("power_float", "trig") and not exact:  # (log-based; sin of an inexact large value)
        return None
    return False, False


def grad_classify(op, p, args):
    """``classify_extra``, ops with a kink in their derivative only read exact values, and ops whose
    JVP row ``minixla.interpreters.rules.MISSING`` lists (with its reason) are left out."""
    flags = classify_extra(op, p, args)
    if flags is None or op == "loop_while":  # (no reverse mode, as in JAX)
        return None
    if op == "lax_cummax" and not all(a.exact for a in args):
        return None
    if op == "at_set" and AT_PRIMITIVE[p["fn"]] in MISSING["jvp"]:
        return None
    kink = (op in KINKS or (op == "reduce" and p["fn"] in ("max", "min"))
            or (op == "scalar_op" and p["fn"] in ("maximum", "minimum")))
    if kink and not all(a.exact for a in args):
        return None
    return flags


def _nice_array(rng, shape, dtype):
    """Multiples of 1/4 in [-4, 4] (exact products and sums), never special."""
    return (rng.integers(-16, 17, shape) / 4).astype(dtype)


def _compare_derivative(name, got, want, floor=0.0, rtol=None):
    """``got`` against JAX's ``want``: exact for integer/float0 cotangents, else within the dtype's
    ``DERIVATIVE_RTOL`` (or the program's larger ``rtol``: ``_derivative_rtol``) of the larger of
    ``want``'s largest finite magnitude and ``floor`` (the cotangents' scale: a gradient that
    cancels to ~0, like softmax's under an equal cotangent, rounds at the scale of its terms, not
    of its sum)."""
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype == jax.dtypes.float0 or not _is_float(want.dtype):
        compare(name, got, want, exact=True)
        return
    rtol = max(DERIVATIVE_RTOL[np.dtype(want.dtype)], rtol or 0.0)
    finite = np.abs(want[np.isfinite(want)].astype(np.float64))
    scale = max(float(finite.max()) if finite.size else 0.0, floor)
    compare(name, got, want, exact=False, rtol=rtol, atol=rtol * scale)


def _scale(arrays):
    """The largest finite magnitude among ``arrays`` (0.0 for none)."""
    mags = [np.abs(np.asarray(a, np.float64)) for a in arrays]
    return max((float(m[np.isfinite(m)].max()) for m in mags if np.isfinite(m).any()), default=0.0)


def _float_outputs(n_in, outputs, vals):
    """The outputs to differentiate: the drawn float ones, else the last float value."""
    outs = [o for o in outputs if _is_float(vals[o].dtype)]
    if not outs:
        floats = [i for i, v in enumerate(vals) if _is_float(v.dtype)]
        outs = floats[-1:]
    return outs


class ReferenceRaised(Exception):
    """JAX itself raised on the transformed program, so there is no reference to compare with.
    (Seen: ``jax.grad`` of ``x.at[idx].max(v)`` on a size-0 ``x`` fails JAX's own gather shape
    check, where the forward program runs.) ``fuzz_transform`` counts it as a skip."""


def _references(jax_f, args):
    """``jax_f(*args)`` eagerly on each backend's reference device: backend -> value. Raises
    ``ReferenceRaised`` when JAX raises."""
    refs, by_device = {}, {}
    for b in BACKENDS:
        d = reference_device(b)
        if d not in by_device:
            try:
                ref = eager_reference(jax_f, *args, backend=b)
            except Exception as e:  # JAX's own limit or bug: no reference
                raise ReferenceRaised(f"{type(e).__name__}: {e}") from e
            by_device[d] = jax.tree_util.tree_map(np.asarray, ref)
        refs[b] = by_device[d]
    return refs


def _derivative_rtol(vals):
    """The largest derivative tolerance a value of the program carries (``Value.tol``; 0.0 for
    none): an ill-conditioned step (a linear solve) amplifies the rounding of every derivative."""
    return max((v.tol[2] for v in vals if v.tol), default=0.0)


def run_grad(draw, inputs, program, outputs, vals):
    """The ``grad`` mode (see the module docstring); raises ``AssertionError`` on a mismatch."""
    n_in = len(inputs)
    drtol = _derivative_rtol(vals)
    diff = tuple(i for i, x in enumerate(inputs) if _is_float(x.dtype))
    outs = _float_outputs(n_in, outputs, vals)
    if not diff or not outs:
        return "skipped"
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    cts = tuple(_nice_array(rng, vals[o].shape, vals[o].dtype) for o in outs)
    flavour = ["grad", "vjp"][int(rng.integers(2))]  # (not hypothesis: it would favour the first)
    LAST.clear()
    LAST.update(mode=flavour, program=program, outputs=outs, inputs=tuple(inputs), diff=diff, cts=cts)

    if flavour == "grad":
        def loss(np_, lax_):
            def f(*args):
                xs, cs = args[:n_in], args[n_in:]
                ys = interpret(np_, lax_, program, xs, outs)
                return sum(np_.sum(y * c) for y, c in zip(ys, cs))
            return f
        args = tuple(inputs) + cts
        refs = _references(jax.grad(loss(jnp, jax.lax), argnums=diff), args)
        for b in BACKENDS:
            got = minixla.jit(minixla.grad(loss(mnp, mlax), argnums=diff), backend=b)(*args)
            for j, (g, w) in enumerate(zip(got, refs[b])):
                _compare_derivative(f"[{b}] grad wrt input {diff[j]}", g, w, _scale(cts), drtol)
        return flavour

    def pulled(vjp, np_, lax_):
        def g(xs, cs):
            def f(*d):
                full = list(xs)
                for i, v in zip(diff, d):
                    full[i] = v
                return interpret(np_, lax_, program, full, outs)
            ys, pull = vjp(f, *[xs[i] for i in diff])
            return ys, pull(cs)
        return g
    refs = _references(pulled(jax.vjp, jnp, jax.lax), (tuple(inputs), cts))
    for b in BACKENDS:
        ys, grads = minixla.jit(pulled(minixla.vjp, mnp, mlax), backend=b)(tuple(inputs), cts)
        for j, (y, o) in enumerate(zip(ys, outs)):
            compare_value(f"[{b}] vjp primal output {j} (value {o})", y, vals[o].ref, vals[o], b)
        for j, (g, w) in enumerate(zip(grads, refs[b][1])):
            _compare_derivative(f"[{b}] vjp cotangent of input {diff[j]}", g, w, _scale(cts), drtol)
    return flavour


def run_jvp(draw, inputs, program, outputs, vals):
    """The ``jvp`` mode (see the module docstring); raises ``AssertionError`` on a mismatch."""
    n_in = len(inputs)
    drtol = _derivative_rtol(vals)
    diff = tuple(i for i, x in enumerate(inputs) if _is_float(x.dtype))
    outs = _float_outputs(n_in, outputs, vals)
    if not diff or not outs:
        return "skipped"
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    ts = tuple(_nice_array(rng, inputs[i].shape, inputs[i].dtype) for i in diff)

    def pushed(jvp, np_, lax_):
        def h(xs, ts):
            def f(*d):
                full = list(xs)
                for i, v in zip(diff, d):
                    full[i] = v
                return interpret(np_, lax_, program, full, outs)
            return jvp(f, tuple(xs[i] for i in diff), tuple(ts))
        return h
    refs = _references(pushed(jax.jvp, jnp, jax.lax), (tuple(inputs), ts))
    for b in BACKENDS:
        ys, tans = minixla.jit(pushed(minixla.jvp, mnp, mlax), backend=b)(tuple(inputs), ts)
        for j, (y, t, w, o) in enumerate(zip(ys, tans, refs[b][1], outs)):
            compare_value(f"[{b}] jvp primal output {j} (value {o})", y, vals[o].ref, vals[o], b)
            _compare_derivative(f"[{b}] jvp tangent of output {j} (value {o})", t, w, rtol=drtol)
    return "jvp"


def run_vmap(draw, inputs, program, outputs, vals, special_rate=0.15):
    """The ``vmap`` mode (see the module docstring); raises ``AssertionError`` on a mismatch."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    size = draw(st.sampled_from([0, 1, 2, 3, 3]))
    in_axes = [draw(st.sampled_from([None] + list(range(-x.ndim - 1, x.ndim + 1)))) for x in inputs]
    if all(a is None for a in in_axes):
        in_axes[draw(st.integers(0, len(inputs) - 1))] = 0
    args = []
    for x, a in zip(inputs, in_axes):
        if a is None:
            args.append(x)
        else:
            examples = [make_input(rng, x.shape, x.dtype, special_rate) for _ in range(size)]
            args.append(np.stack(examples, axis=a) if size else
                        np.zeros(x.shape[:a % (x.ndim + 1)] + (0,) + x.shape[a % (x.ndim + 1):], x.dtype))
    # (None only for a non-empty output: jnp indexing returns an empty result as a fresh, unbatched
    # constant, so JAX accepts None there where minixla, whose result stays batched, refuses it)
    out_axes = [draw(st.sampled_from([None] * (vals[o].ref.size > 0)
                                     + list(range(-len(vals[o].shape) - 1, len(vals[o].shape) + 1))))
                for o in outputs]

    def batched(vmap, np_, lax_, oa):
        return vmap(lambda *xs: interpret(np_, lax_, program, xs, outputs), in_axes=tuple(in_axes),
                    out_axes=tuple(oa))
    try:
        refs = _references(batched(jax.vmap, jnp, jax.lax, out_axes), args)
    except ReferenceRaised as e:  # out_axes None for a batched output (JAX refuses it; so must minixla)
        if not isinstance(e.__cause__, ValueError):
            raise
        out_axes = [0 if a is None else a for a in out_axes]
        refs = _references(batched(jax.vmap, jnp, jax.lax, out_axes), args)
    LAST.clear()
    LAST.update(mode="vmap", program=program, outputs=outputs, args=args, in_axes=in_axes, out_axes=out_axes)
    try:
        for b in BACKENDS:
            got = minixla.jit(batched(minixla.vmap, mnp, mlax, out_axes), backend=b)(*args)
            for j, (g, w, o) in enumerate(zip(got, refs[b], outputs)):
                compare_value(f"[{b}] vmap output {j} (value {o})", g, w, vals[o], b)
    except Exception as e:
        raise AssertionError(f"in_axes {in_axes}, out_axes {out_axes}, size {size}: {type(e).__name__}: {e}") from e
    return "vmap"


MODES = {"grad": run_grad, "jvp": run_jvp, "vmap": run_vmap}
#: the last vmap, grad or vjp case run (program, outputs, its arguments: batched args and axes,
#: or inputs, differentiated positions and cotangents): the deep-run driver pickles it on a
#: failure, for ``replay_vmap`` / ``replay_grad``
LAST: dict = {}


def replay_grad(case, backend="llvm"):
    """Re-run a pickled ``LAST`` grad/vjp case: ``(minixla's, JAX eager's)`` input cotangents
    (the gradient of ``sum(output * cotangent)``), for a post-mortem."""
    n_in = len(case["inputs"])

    def loss(np_, lax_):
        def f(*xs):
            ys = interpret(np_, lax_, case["program"], xs, case["outputs"])
            return sum(np_.sum(y * c) for y, c in zip(ys, case["cts"]))
        return f
    assert len(case["diff"]) <= n_in
    got = minixla.jit(minixla.grad(loss(mnp, mlax), argnums=case["diff"]), backend=backend)(*case["inputs"])
    want = eager_reference(jax.grad(loss(jnp, jax.lax), argnums=case["diff"]), *case["inputs"], backend=backend)
    return got, want


def replay_vmap(case, backend="llvm"):
    """Re-run a pickled ``LAST`` vmap case with minixla (no reference): for a post-mortem."""
    fun = minixla.vmap(lambda *xs: interpret(mnp, mlax, case["program"], xs, case["outputs"]),
                       in_axes=tuple(case["in_axes"]), out_axes=tuple(case["out_axes"]))
    return minixla.jit(fun, backend=backend)(*case["args"])


def fuzz_transform(mode, prog, data, log=None):
    """Build the drawn program (``programs()``'s ``prog``, more draws from hypothesis's
    ``data``), pick its outputs and run ``MODES[mode]`` on it. ``log``: a path that receives the
    program before it runs (for the post-mortem of a crash). Returns the flavour run (or
    ``"skipped"``, or ``"skipped (jax raised)"`` when JAX raises on it); raises
    ``AssertionError`` with the program's op list on a mismatch."""
    inputs, n_ops, _ = prog
    differentiate = mode in ("grad", "jvp")
    program, vals = build(data.draw, inputs, n_ops, grad_classify if differentiate else classify_extra,
                          draw_transform_op)
    if not program:
        return "skipped"
    n = len(vals)
    outputs = sorted({n - 1} | set(data.draw(st.lists(st.integers(len(inputs), n - 1), max_size=2))))
    note = describe(inputs, program, outputs)
    if log:
        with open(log, "w") as fh:
            fh.write(f"mode {mode}\ninputs {[(x.dtype.name, x.shape, x.tolist()) for x in inputs]}\n{note}\n")
    try:
        with np.errstate(all="ignore"):
            return MODES[mode](data.draw, inputs, program, outputs, vals)
    except ReferenceRaised:
        return "skipped (jax raised)"
    except Exception as e:
        raise AssertionError(f"{mode} of {note}\n{type(e).__name__}: {e}") from e
