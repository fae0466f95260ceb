"""Quantiles over an empty extent raise what JAX raises, with its text: the TypeError of the
gather of an order statistic (a slice of 1 along a dimension of size 0), or, for the ``nan``
forms reading a rank-1 operand at a rank-0 index, NumPy-style indexing's IndexError. An empty
result over a non-empty extent is no error (as in JAX)."""
from __future__ import annotations

import re

import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp

FNS = ["median", "quantile", "percentile", "nanmedian", "nanquantile", "nanpercentile"]
CASES = [((0,), None, {}), ((0,), 0, {}), ((2, 0), 1, {}), ((2, 0), None, {}), ((0, 3), 0, {}),
         ((2, 0), (0, 1), {}), ((2, 0, 3), (1, 2), {}), ((2, 0), 1, {"keepdims": True}),
         ((0,), None, {"keepdims": True}), ((0,), 0, {"q": [0.25, 0.5]}),
         ((0,), None, {"method": "lower"})]
NONEMPTY = [((2, 0), 0, {}), ((0, 3), 1, {}), ((0, 3), 1, {"q": [0.25, 0.5]})]


def _call(np_, fn, shape, axis, kw):
    kw = dict(kw)
    q = np.asarray(kw.pop("q", 0.5), np.float32)
    if fn.endswith("median"):
        if "method" in kw:
            return None
        args = ()
    else:
        args = (q * 100 if fn.endswith("percentile") else q,)
    return lambda x: getattr(np_, fn)(x, *args, axis=axis, **kw)


def _jax_error(f, x):
    try:
        f(x)
    except (TypeError, IndexError) as e:
        return type(e), str(e)
    raise AssertionError("JAX raised nothing")


@pytest.mark.parametrize("fn", FNS)
def test_empty_extent_raises_jax_error(fn):
    for shape, axis, kw in CASES:
        f = _call(mnp, fn, shape, axis, kw)
        if f is None:
            continue
        x = np.zeros(shape, np.float32)
        kind, text = _jax_error(_call(jnp, fn, shape, axis, kw), x)
        for run in (f, minixla.jit(f)):
            with pytest.raises(kind, match=re.escape(text)) as info:  # (prefixed "fn: ")
                run(x)
            assert (kind is IndexError) == isinstance(info.value, IndexError), (shape, axis, kw)


@pytest.mark.parametrize("fn", ["quantile", "nanmedian"])
def test_empty_result_over_a_nonempty_extent(fn):
    for shape, axis, kw in NONEMPTY:
        x = np.zeros(shape, np.float32)
        got, want = _call(mnp, fn, shape, axis, kw)(x), _call(jnp, fn, shape, axis, kw)(x)
        assert np.asarray(got).shape == want.shape and np.asarray(got).dtype == want.dtype


@pytest.mark.parametrize("name,args", [("quantile", ("a", [0.5])), ("percentile", ("a", [50])),
                                       ("nanquantile", ("a", [0.5])), ("median", ([1.0, 2.0],)),
                                       ("quantile", ([1.0, 2.0], 0.5))])
def test_list_arguments_raise_jaxs_type_error(name, args):
    x = np.ones(3, np.float32)
    args = tuple(x if a == "a" else a for a in args)
    with pytest.raises(TypeError) as want:
        getattr(jnp, name)(*args)
    with pytest.raises(TypeError) as got:
        getattr(mnp, name)(*args)
    assert str(got.value).splitlines()[0] == str(want.value)  # (then the user's line)
