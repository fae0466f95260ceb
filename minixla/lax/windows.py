"""Window reductions (``jax.lax.reduce_window`` with a monoid): ``reduce_window_sum``,
``reduce_window_max``, ``reduce_window_min`` -- max and average pooling.

Each output element reduces a window of the (padded, optionally dilated) operand, as XLA's
``ReduceWindow``: per dim, the operand is dilated by ``base_dilation`` (holes between elements),
padded by ``padding`` ``(low, high)``, and the window of ``window_dimensions`` taps spaced by
``window_dilation`` slides by ``window_strides``. Padding and holes hold the reducer's identity
(0, -inf / the dtype's min, +inf / max), so they never change a result. The primitives are JAX's
(``reduce_window_sum_p`` & co.); each lowers to one HLO ``reduce-window``.
"""
from __future__ import annotations

import numpy as np
import jax

from minixla.core import errors
from minixla.lax.base import reduction_identity
from minixla.core.avals import ShapedArray, get_aval
from minixla.lax.base import _ANY, _NUM, _is_float, _std_prim
from minixla.lax.contractions import padtype_to_pads


def window_output_shape(shape, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    """The output dims of a window reduction (XLA's ``ReduceWindow`` shape inference)."""
    out = []
    for n, w, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding, base_dilation,
                                         window_dilation):
        padded = ((n - 1) * bd + 1 if n else 0) + lo + hi
        span = (w - 1) * wd + 1
        out.append((padded - span) // s + 1 if padded >= span else 0)
    return tuple(out)


def _window_rule(opname, kinds):
    def rule(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        if x.dtype.kind not in kinds and not _is_float(x.dtype):
            raise errors.DTypeError(f"{opname} does not accept dtype {x.dtype.name}")
        for what, v in [("window_dimensions", window_dimensions), ("window_strides", window_strides),
                        ("padding", padding), ("base_dilation", base_dilation),
                        ("window_dilation", window_dilation)]:
            if len(v) != x.ndim:
                raise errors.ShapeError(f"{opname}: {what} {tuple(v)} must have one entry per operand "
                                        f"dim ({x.ndim})")
        for what, v in [("window_dimensions", window_dimensions), ("window_strides", window_strides),
                        ("base_dilation", base_dilation), ("window_dilation", window_dilation)]:
            if any(d < 1 for d in v):
                raise errors.ShapeError(f"{opname}: {what} must be positive, got {tuple(v)}")
        return ShapedArray(window_output_shape(x.shape, window_dimensions, window_strides, padding,
                                               base_dilation, window_dilation), x.dtype, x.weak_type)
    return rule


#: primitive name -> (the HLO reducer opcode, the jax.lax monoid)
REDUCERS = {"reduce_window_sum": ("add", jax.lax.add), "reduce_window_max": ("maximum", jax.lax.max),
            "reduce_window_min": ("minimum", jax.lax.min)}


def identity(name, dtype):
    """The reducer's identity for ``dtype``: what padding and dilation holes hold."""
    return reduction_identity(REDUCERS[name][0], dtype)



def _window_impl(name):
    def impl(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        x = np.asarray(x)
        return np.asarray(jax.lax.reduce_window(x, identity(name, x.dtype), REDUCERS[name][1],
                                                window_dimensions, window_strides, padding,
                                                base_dilation, window_dilation))
    return impl


reduce_window_sum_p = _std_prim("reduce_window_sum", _window_rule("reduce_window_sum", _NUM),
                                impl=_window_impl("reduce_window_sum"))
reduce_window_max_p = _std_prim("reduce_window_max", _window_rule("reduce_window_max", _ANY),
                                impl=_window_impl("reduce_window_max"))
reduce_window_min_p = _std_prim("reduce_window_min", _window_rule("reduce_window_min", _ANY),
                                impl=_window_impl("reduce_window_min"))
_PRIMS = {"reduce_window_sum": reduce_window_sum_p, "reduce_window_max": reduce_window_max_p,
          "reduce_window_min": reduce_window_min_p}


def _monoid(computation, init_value, dtype):
    """The window primitive for ``computation`` (``lax.add``/``max``/``min``, minixla's or JAX's)
    when ``init_value`` is its identity (JAX's monoid detection); else None."""
    from minixla import lax as mlax
    name = {id(mlax.add): "reduce_window_sum", id(jax.lax.add): "reduce_window_sum",
            id(mlax.max): "reduce_window_max", id(jax.lax.max): "reduce_window_max",
            id(mlax.min): "reduce_window_min", id(jax.lax.min): "reduce_window_min"}.get(id(computation))
    if name is None:
        return None
    try:
        init = np.asarray(init_value, dtype)
    except (TypeError, ValueError):
        return None  # (a traced init value: not a known identity)
    same = np.array_equal(init, identity(name, dtype)) and np.signbit(init) == np.signbit(identity(name, dtype))
    return _PRIMS[name] if same else None


def _chooser_with_init(computation, init_value, dtype):
    """``(primitive name, init as a 0-d array)`` for ``lax.max``/``lax.min`` with a concrete
    init value that is not the identity; else None."""
    from minixla import lax as mlax
    name = {id(mlax.max): "reduce_window_max", id(jax.lax.max): "reduce_window_max",
            id(mlax.min): "reduce_window_min", id(jax.lax.min): "reduce_window_min"}.get(id(computation))
    if name is None:
        return None
    try:
        return name, np.asarray(init_value, dtype)[()]
    except (TypeError, ValueError):
        return None


def reduce_window(operand, init_value, computation, window_dimensions, window_strides, padding,
                  base_dilation=None, window_dilation=None):
    """Reduce each window of ``operand`` (``jax.lax.reduce_window``): max pooling is
    ``reduce_window(x, -inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")``.

    Args:
      operand: an array of rank n. init_value: the reducer's identity (0 for ``lax.add``, -inf or
        the dtype's min for ``lax.max``, +inf or max for ``lax.min``); for ``lax.max``/``lax.min``
        any concrete value ``c`` (the result is then ``max(c, window max)``, as XLA's).
      computation: ``lax.add``, ``lax.max`` or ``lax.min`` (minixla's or ``jax.lax``'s).
      window_dimensions, window_strides: n positive ints. padding: ``"SAME"``, ``"VALID"`` or n
        ``(low, high)`` pairs. base_dilation, window_dilation: n positive ints (default ones).
    Returns:
      The reduced windows, of ``operand``'s dtype; dims as XLA's ``ReduceWindow``.
    Raises:
      UnsupportedError for another computation, or ``lax.add`` from another init value (minixla
      has the monoid window reductions only: JAX's ``reduce_window_sum/max/min`` primitives);
      ShapeError / DTypeError.
    """
    aval = get_aval(operand)
    prim = _monoid(computation, init_value, aval.dtype)
    chooser = _chooser_with_init(computation, init_value, aval.dtype)
    if prim is None and chooser is not None:
        # max/min from another init value c (e.g. 0: relu-then-pool): XLA pads with c and folds
        # it into every window, which is exactly max(c, the window's max) -- exact, NaN included.
        name, c = chooser
        windows = reduce_window(operand, identity(name, aval.dtype), computation, window_dimensions,
                                window_strides, padding, base_dilation, window_dilation)
        from minixla.lax import elementwise as ew
        return (ew.max if name == "reduce_window_max" else ew.min)(windows, c)
    if prim is None:
        raise errors.UnsupportedError(
            f"reduce_window: minixla supports lax.add, lax.max and lax.min with their identity as "
            f"init_value (0, -inf, +inf), got {getattr(computation, '__name__', computation)!r} with "
            f"init_value {init_value!r}\n  at: {errors.user_source_line()}")
    nd = aval.ndim
    ones = (1,) * nd
    base_dilation = tuple(int(d) for d in base_dilation) if base_dilation is not None else ones
    window_dilation = tuple(int(d) for d in window_dilation) if window_dilation is not None else ones
    window_dimensions = tuple(int(d) for d in window_dimensions)
    window_strides = tuple(int(d) for d in window_strides)
    if isinstance(padding, str):
        # As JAX: "SAME" is worked out on the operand's own (not base-dilated) dims, with the
        # dilated window -- so a base-dilated SAME window reduction is not ceil(dilated / stride)
        spans = [(w - 1) * d + 1 for w, d in zip(window_dimensions, window_dilation)]
        padding = padtype_to_pads(aval.shape, spans, window_strides, padding)
    else:
        padding = padtype_to_pads(None, None, None, padding)
    return prim.bind(operand, window_dimensions=window_dimensions, window_strides=window_strides,
                     padding=padding, base_dilation=base_dilation, window_dilation=window_dilation)


__all__ = ["reduce_window", "reduce_window_sum_p", "reduce_window_max_p", "reduce_window_min_p"]
