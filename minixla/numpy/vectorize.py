"""``jnp.vectorize`` (a function of core-dim arrays mapped over broadcast loop dims with
``minixla.vmap``, one vmap per loop dim, as ``jax.numpy.vectorize``) and ``jnp.piecewise``
(a ``lax.switch`` vectorized over the elements, as JAX's)."""
from __future__ import annotations

import functools
import re

import numpy as np

from minixla import lax
from minixla.core.avals import get_aval
from minixla.numpy.promotion import _arr, _cast, broadcast_shapes
from minixla.numpy.creation import asarray, zeros_like
from minixla.numpy.manipulation import concatenate, expand_dims, squeeze
from minixla.numpy.reductions import argmax, cumsum

__all__ = ["vectorize", "piecewise"]

_DIM = r"\w+"
_ARG = r"\((?:{0}(?:,{0})*)?\)".format(_DIM)
_ARGS = "{0}(?:,{0})*".format(_ARG)


def _parse_signature(signature):
    """``"(m,n),(n)->(m)"`` -> ([("m", "n"), ("n",)], [("m",)]); ``ValueError`` if malformed."""
    if not re.match(f"^{_ARGS}->{_ARGS}$", signature):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    ins, outs = signature.split("->")
    return [[tuple(re.findall(_DIM, a)) for a in re.findall(_ARG, part)] for part in (ins, outs)]


def _bind_core(sizes, shape, core, context, is_input):
    """Record (or check) the sizes of ``core`` dims, the trailing dims of ``shape``."""
    if is_input and len(shape) < len(core):
        raise ValueError(f"input with shape {tuple(shape)!r} does not have enough dimensions for all "
                         f"core dimensions {core!r} {context}")
    if not is_input and len(shape) != len(core):
        raise ValueError(f"output shape {tuple(shape)!r} does not match core dimensions {core!r} {context}")
    for name, n in zip(core, shape[len(shape) - len(core):]):
        if sizes.setdefault(name, n) != n:
            raise ValueError(f"inconsistent size for core dimension {name!r}: {n!r} vs {sizes[name]!r} {context}")


def _without(func, fixed, args, kwargs):
    """``func`` with the positional args at the indices (ints) and keywords (strs) in ``fixed``
    bound; returns it with the remaining args and kwargs."""
    if not fixed:
        return func, list(args), dict(kwargs)
    static = [(i, args[i]) for i in sorted(e for e in fixed if isinstance(e, int)) if i < len(args)]
    static_kw = {k: v for k, v in kwargs.items() if k in fixed}

    def bound(*dyn, **kw):
        full = list(dyn)
        for i, v in static:
            full.insert(i, v)
        return func(*full, **kw, **static_kw)
    return (bound, [a for i, a in enumerate(args) if i not in fixed],
            {k: v for k, v in kwargs.items() if k not in fixed})


def _checked(func, sizes, out_cores, context):
    """``func`` whose outputs are checked against the signature's output core dims."""
    def run(*args):
        out = func(*args)
        if len(out_cores) > 1 and not isinstance(out, tuple):
            raise TypeError(f"output must be a tuple when multiple outputs are expected, got: {out!r}\n{context}")
        shapes = [np.shape(o) if not hasattr(o, "shape") else tuple(o.shape)
                  for o in (out if isinstance(out, tuple) else [out])]
        if len(shapes) != len(out_cores):
            raise TypeError(f"wrong number of output arguments: expected {len(out_cores)!r}, got "
                            f"{len(shapes)!r} {context}")
        seen = dict(sizes)
        for shape, core in zip(shapes, out_cores):
            _bind_core(seen, shape, core, context, is_input=False)
        return out
    return run


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """``pyfunc`` made to broadcast over leading dims (``jnp.vectorize``): each argument (not in
    ``excluded``: positions or keyword names passed through unchanged; ``None`` args too) is
    split into loop dims and the trailing core dims of ``signature`` (``"(n),(n)->()"``; none:
    all dims loop); the loop dims broadcast and ``pyfunc`` is ``vmap`` ped over each (size-1 loop
    dims are not mapped). Output: the loop dims, then ``pyfunc``'s output dims. Raises
    ``TypeError`` for a non-int/str ``excluded`` or a wrong number of args/outputs, ``ValueError``
    for a negative ``excluded``, a bad signature or inconsistent core dims (JAX's messages)."""
    if any(not isinstance(e, (str, int)) for e in excluded):
        raise TypeError("jax.numpy.vectorize can only exclude integer or string arguments, "
                        f"but excluded={excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"excluded={excluded!r} contains negative numbers")

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        from minixla.interpreters.api import vmap
        context = f"on vectorized function with excluded={excluded!r} and signature={signature!r}"
        func, args, kwargs = _without(pyfunc, excluded, args, kwargs)
        in_cores, out_cores = _parse_signature(signature) if signature is not None else ([()] * len(args), None)
        nones = {i for i, a in enumerate(args) if a is None}
        if nones:
            if any(in_cores[i] != () for i in nones):
                raise ValueError(f"Cannot pass None at locations {nones} with signature={signature!r}")
            func, args, _ = _without(func, nones, args, {})
            in_cores = [c for i, c in enumerate(in_cores) if i not in nones]
        args = [_arr(a) for a in args]
        if len(args) != len(in_cores):
            raise TypeError(f"wrong number of positional arguments: expected {len(in_cores)!r}, got "
                            f"{len(args)!r} {context}")
        sizes, loops = {}, []
        for a, core in zip(args, in_cores):
            shape = get_aval(a).shape
            _bind_core(sizes, shape, core, context, is_input=True)
            loops.append(tuple(shape[:len(shape) - len(core)]))
        rank = len(broadcast_shapes(*loops)) if loops else 0
        if out_cores is not None:
            func = _checked(func, sizes, out_cores, context)
        if kwargs:
            func = functools.partial(func, **kwargs)
        # loop dims right-aligned; an argument's size-1 (or missing) dim is not mapped
        padded = [(1,) * (rank - len(lp)) + lp for lp in loops]
        args = [squeeze(a, axis=tuple(i for i, n in enumerate(lp) if n == 1)) for a, lp in zip(args, loops)]
        unmapped = []
        for d in reversed(range(rank)):
            axes = tuple(None if p[d] == 1 else 0 for p in padded)
            if all(x is None for x in axes):
                unmapped.append(d)
            else:
                func = vmap(func, in_axes=axes)
        out = func(*args)
        if not unmapped:
            return out
        if isinstance(out, tuple):
            return tuple(expand_dims(o, tuple(unmapped)) for o in out)
        return expand_dims(out, tuple(unmapped))
    return wrapped


def piecewise(x, condlist, funclist, *args, **kw):
    """``funclist[k](x, *args, **kw)`` where ``condlist[k]`` holds (the last true one wins), else
    the extra last entry of ``funclist`` (``len(condlist) + 1`` entries) or 0 (``jnp.piecewise``).
    An entry is a function or a constant; results are cast to ``x``'s dtype. Each function sees
    one element at a time (a ``lax.switch`` vectorized over ``x``). ``ValueError`` for a wrong
    number of functions."""
    x = _arr(x)
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funclist = list(funclist[-1:]) + list(funclist[:-1])
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are expected; got {nf}")
    conds = asarray(condlist, dtype=bool)
    which = argmax(cumsum(concatenate([zeros_like(lax.slice_in_dim(conds, 0, 1)), conds], 0), 0), 0)
    dtype = get_aval(x).dtype

    def branch(f):
        if callable(f):
            return lambda v: _cast(_arr(f(v, *args, **kw)), dtype)
        return lambda v: asarray(f, dtype=dtype)
    return vectorize(lax.switch, excluded=(1,))(which, [branch(f) for f in funclist], x)
