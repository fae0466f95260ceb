"""JVP and transpose rows of the scatters that do not add: ``scatter`` (overwrite),
``scatter-mul``, ``scatter-min``/``scatter-max`` (``scatter-add`` and ``gather`` are in
``ad_rules``). The rules are JAX's (``jax/_src/lax/slicing.py``):

* ``scatter`` with possibly colliding indices: only one update lands where several collide.
  To know which, scatter *ids* (1..N, one per update window) the same way: the id an operand
  position ends up with names the winner; gathering the scattered ids back to the updates says
  which updates won. The tangent is then a ``scatter-add`` of the winners' tangents into the
  operand tangent masked where anything landed: linear, so it transposes with existing rules.
  With ``unique_indices=True`` it is a plain scatter of the tangents.
* ``scatter-mul``: linear in the operand; in the updates only with unique indices (JAX raises
  ``NotImplementedError`` otherwise, and so do we).
* ``scatter-min``/``scatter-max``: the tangent of each result element is the average of the
  tangents of every contender (operand element or update) that equals the result, the tie
  rule of ``reduce_max``, computed with JAX's own formula (a NaN result, which no contender
  equals, has tangent 0).
* transposes: ``scatter`` (unique indices, as JAX) and ``scatter-mul`` in its operand.
"""
from __future__ import annotations

import numpy as np

from minixla import lax as L
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.interpreters.ad import Zero, instantiate, is_undefined, jvp_rules, tangent_aval, transpose_rules

_M = L.GatherScatterMode


def _shape(x):
    return get_aval(x).shape


def _zeros(x):
    return L.full(_shape(x), 0, get_aval(x).dtype)


def _inverse_gather(x_shape, idx, upd_shape, dn, mode, src):
    """``src`` (operand-shaped) read back at each update element's target: the gather that
    undoes the scatter. A window the scatter dropped reads 0 (FILL_OR_DROP), a clamped one
    reads its clamped target (CLIP); PROMISE_IN_BOUNDS gathers as JAX's transpose does (clamped,
    as HLO gather is), while its scatter dropped the window."""
    win = iter(upd_shape[d] for d in dn.update_window_dims)
    sizes = tuple(1 if d in dn.inserted_window_dims else next(win) for d in range(len(x_shape)))
    if any(s > n for s, n in zip(sizes, x_shape)):
        # An empty operand (a size-0 dim under an inserted window dim: the scatter's shape rule
        # allows it, gather's does not): every window was dropped, nothing can be read back.
        return L.full(upd_shape, 0, get_aval(src).dtype)
    gdn = L.GatherDimensionNumbers(tuple(dn.update_window_dims), tuple(dn.inserted_window_dims),
                                   tuple(dn.scatter_dims_to_operand_dims))
    if mode in (_M.CLIP, _M.PROMISE_IN_BOUNDS):  # (HLO gather clamps; a dropped window never wins)
        return L.gather_p.bind(src, idx, dimension_numbers=gdn, slice_sizes=sizes, mode=mode, fill_value=None)
    return L.gather_p.bind(src, idx, dimension_numbers=gdn, slice_sizes=sizes, mode=_M.FILL_OR_DROP,
                           fill_value=np.zeros((), get_aval(src).dtype)[()])


def _update_ids(upd_shape, dn):
    """1..N, one id per update window (broadcast over the window's elements), as int32."""
    ids_shape = [1 if d in dn.update_window_dims else n for d, n in enumerate(upd_shape)]
    n = int(np.prod(ids_shape, dtype=np.int64))
    ids = np.arange(1, n + 1, dtype=np.int32).reshape(ids_shape)
    return np.broadcast_to(ids, upd_shape).copy()


def _scatter_jvp(primals, tangents, *, dimension_numbers, indices_are_sorted=False, unique_indices=False,
                 mode=None):
    x, idx, upd = primals
    tx, _, tu = tangents
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    ans = L.scatter_p.bind(x, idx, upd, **params)
    if isinstance(tx, Zero) and isinstance(tu, Zero):
        return ans, Zero(tangent_aval(get_aval(ans)))
    tx, tu = instantiate(tx), instantiate(tu)
    if unique_indices:
        return ans, L.scatter_p.bind(tx, idx, tu, **params)
    dn = dimension_numbers
    ids = _update_ids(_shape(upd), dn)
    scattered = L.scatter_p.bind(np.zeros(_shape(x), np.int32), idx, ids, **params)
    won = L.eq(ids, _inverse_gather(_shape(x), idx, _shape(upd), dn, mode, scattered))
    untouched = L.eq(scattered, np.int32(0))
    add_params = dict(params, unique_indices=False)
    tangent = L.scatter_add_p.bind(L.select_n(untouched, _zeros(tx), tx), idx,
                                   L.select_n(won, _zeros(tu), tu), **add_params)
    return ans, tangent


def _scatter_t(ct, x, idx, upd, *, dimension_numbers, indices_are_sorted=False, unique_indices=False,
               mode=None):
    if not unique_indices:
        raise errors.UnsupportedError("scatter transpose is only implemented where unique_indices=True")
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    upd_aval = upd.aval if is_undefined(upd) else get_aval(upd)
    t_x = t_u = None
    if is_undefined(x):  # what the scatter overwrote gets no cotangent
        t_x = L.scatter_p.bind(ct, idx, L.full(upd_aval.shape, 0, upd_aval.dtype), **params)
    if is_undefined(upd):
        t_u = _inverse_gather(_shape(ct), idx, upd_aval.shape, dimension_numbers, mode, ct)
    return [t_x, None, t_u]


def _scatter_mul_jvp(primals, tangents, *, dimension_numbers, indices_are_sorted=False, unique_indices=False,
                     mode=None):
    x, idx, upd = primals
    tx, _, tu = tangents
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    ans = L.scatter_mul_p.bind(x, idx, upd, **params)
    out = Zero(tangent_aval(get_aval(ans)))
    if not isinstance(tx, Zero):
        out = L.scatter_mul_p.bind(tx, idx, upd, **params)
    if not isinstance(tu, Zero):
        if not unique_indices:
            raise errors.UnsupportedError("scatter_mul gradients are only implemented if `unique_indices=True`")
        term = L.mul(x, L.scatter_add_p.bind(_zeros(x), idx, tu, **params))
        out = term if isinstance(out, Zero) else L.add(out, term)
    return ans, out


def _scatter_mul_t(ct, x, idx, upd, *, dimension_numbers, indices_are_sorted=False, unique_indices=False,
                   mode=None):
    if is_undefined(upd):
        raise errors.UnsupportedError("scatter_mul gradients are only implemented if `updates` is not a "
                                      "linear input (the cotangent of the updates is not linear)")
    t_x = L.scatter_mul_p.bind(ct, idx, upd, dimension_numbers=dimension_numbers,
                               indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                               mode=mode) if is_undefined(x) else None
    return [t_x, None, None]


def _jax_gather(x_shape, idx, upd_shape, dn, src):
    """``src`` read back at each update element's target as JAX's scatter-min/max JVP reads
    it: ``lax.gather`` with its default mode (FILL_OR_DROP, whatever the scatter's mode), so an
    out-of-bounds window reads the default fill (NaN for floats)."""
    win = iter(upd_shape[d] for d in dn.update_window_dims)
    sizes = tuple(1 if d in dn.inserted_window_dims else next(win) for d in range(len(x_shape)))
    if any(s > n for s, n in zip(sizes, x_shape)):  # an empty operand: every window was dropped
        return L.full(upd_shape, np.nan, get_aval(src).dtype)
    gdn = L.GatherDimensionNumbers(tuple(dn.update_window_dims), tuple(dn.inserted_window_dims),
                                   tuple(dn.scatter_dims_to_operand_dims))
    return L.gather_p.bind(src, idx, dimension_numbers=gdn, slice_sizes=sizes, mode=_M.FILL_OR_DROP,
                           fill_value=np.array(np.nan, get_aval(src).dtype)[()])  # (JAX's default fill)


def _scatter_extremum_jvp(prim):
    """JAX's ``_scatter_extremal_jvp``, op for op: each contender (the operand element, the
    updates) that equals the result gets an equal share. The tangent is the operand's plus a
    ``scatter-add`` of ``t_x[idx] * (-1 + share_x) / refs + t_u * share_u``: where nothing
    equals the result (a NaN one: NaN == NaN is false) the operand's tangent is taken back
    out and the tangent is 0, as in JAX (a division by the count of winners gave 0/0 = NaN)."""
    def rule(primals, tangents, *, dimension_numbers, indices_are_sorted=False, unique_indices=False, mode=None):
        x, idx, upd = primals
        tx, _, tu = tangents
        params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                      unique_indices=unique_indices, mode=mode)
        ans = prim.bind(x, idx, upd, **params)
        if isinstance(tx, Zero) and isinstance(tu, Zero):
            return ans, Zero(tangent_aval(get_aval(ans)))
        tx, tu = instantiate(tx), instantiate(tu)
        dn, xs, us = dimension_numbers, _shape(x), _shape(upd)
        dtype = get_aval(x).dtype
        one, zero = L.full(us, 1, dtype), L.full(us, 0, dtype)
        target = _jax_gather(xs, idx, us, dn, ans)
        successful = L.eq(upd, target)
        retained = L.eq(_jax_gather(xs, idx, us, dn, x), target)
        add = dict(dimension_numbers=dn, indices_are_sorted=False, unique_indices=False, mode=_M.FILL_OR_DROP)
        num_updates = _jax_gather(xs, idx, us, dn, L.scatter_add_p.bind(_zeros(x), idx, L.select(successful, one, zero), **add))
        num_refs = _jax_gather(xs, idx, us, dn, L.scatter_add_p.bind(_zeros(x), idx, one, **add))
        plus_one = L.div(one, L.add(num_updates, one))
        updates_coef = L.select(successful, L.select(retained, plus_one, L.div(one, num_updates)), zero)
        operand_coef = L.div(L.add(L.neg(one), L.select(retained, plus_one, zero)), num_refs)
        tangent_updates = L.add(L.mul(_jax_gather(xs, idx, us, dn, tx), operand_coef), L.mul(tu, updates_coef))
        return ans, L.scatter_add_p.bind(tx, idx, tangent_updates, **params)
    jvp_rules[prim] = rule


jvp_rules[L.scatter_p] = _scatter_jvp
transpose_rules[L.scatter_p] = _scatter_t
jvp_rules[L.scatter_mul_p] = _scatter_mul_jvp
transpose_rules[L.scatter_mul_p] = _scatter_mul_t
_scatter_extremum_jvp(L.scatter_min_p)
_scatter_extremum_jvp(L.scatter_max_p)
