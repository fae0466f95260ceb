"""``cumlogsumexp`` (``jax.lax``'s name and signature): a parallel prefix scan
(``composites.associative_scan``: no new primitive, so every transformation and backend
handles it) over ``logaddexp``, with JAX's ``logaddexp`` JVP
(``+inf`` replaced by 0 in the exponent, so infinite entries give finite tangents, not NaN). JAX lowers it to a reduce-window that XLA rewrites, so values agree with JAX's
to rounding (a few ulp), not bit for bit.
"""
from __future__ import annotations

import numpy as np

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.lax import elementwise as _ew
from minixla.lax import structural as _st
from minixla.lax.composites import associative_scan


def _logaddexp_impl(x1, x2):
    amax = _ew.max(x1, x2)
    delta = _ew.sub(x1, x2)
    return _ew.select(_ew.ne(delta, delta), _ew.add(x1, x2),
                      _ew.add(amax, _ew.log1p(_ew.exp(_ew.neg(_ew.abs(delta))))))


_logaddexp = None


def _make_logaddexp():
    # (custom_jvp lives with the transformations, which import lax: bind it on first use)
    from minixla.interpreters.custom_derivatives import custom_jvp

    f = custom_jvp(_logaddexp_impl)

    def no_inf(x):  # +inf -> 0 (JAX's rule; -inf stays, so its term's tangent is exactly 0)
        return _ew.select(_ew.eq(x, np.asarray(np.inf, get_aval(x).dtype)),
                          _st.full(get_aval(x).shape, 0, get_aval(x).dtype), x)

    @f.defjvp
    def _jvp(primals, tangents):
        x1, x2 = primals
        t1, t2 = tangents
        out = f(x1, x2)
        return out, _ew.add(_ew.mul(t1, _ew.exp(_ew.sub(no_inf(x1), no_inf(out)))),
                            _ew.mul(t2, _ew.exp(_ew.sub(no_inf(x2), no_inf(out)))))
    return f


def cumlogsumexp(operand, axis=0, reverse=False):
    """Inclusive cumulative ``log(sum(exp(operand)))`` along ``axis`` without overflow
    (``jax.lax.cumlogsumexp``); ``reverse`` scans from the end. Floating dtypes only
    (DTypeError otherwise)."""
    global _logaddexp
    dt = get_aval(operand).dtype
    if dt.kind != "f" and dt.name != "bfloat16":
        raise errors.DTypeError(f"cumlogsumexp does not accept dtype {dt.name}")
    if _logaddexp is None:
        _logaddexp = _make_logaddexp()
    nd = get_aval(operand).ndim
    return associative_scan(_logaddexp, operand, reverse=bool(reverse), axis=int(axis) % nd if nd else 0)


__all__ = ["cumlogsumexp"]
