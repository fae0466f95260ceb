"""The dtype and weak type of every output leaf of grad, value_and_grad, vjp, jvp, jacfwd, jacrev,
hessian and linearize match JAX's, for Python scalars, weakly typed arrays and strong f32, f16,
bf16 and f64 arrays as primals, on functions with weak and strong outputs (argnums tuples too).

Each case is traced (``minixla.eval_shape`` against ``jax.eval_shape``); one case in six also
runs, alternately eagerly and under ``minixla.jit``, against JAX eager's types and values.
"""
import itertools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import tree_util

import minixla
import minixla.numpy as mnp
from minixla.core.avals import get_aval

F0 = jax.dtypes.float0
RUN_EVERY = int(__import__("os").environ.get("RUN_EVERY", 6))  # of each RUN_EVERY cases: one runs eagerly, one jitted

PRIMALS = {
    "py float": (lambda n: 1.5),
    "py int": (lambda n: 2),
    "weak array": (lambda n: n.asarray(1.5)),
    "f32[]": (lambda n: np.float32(1.5)),
    "f32[2]": (lambda n: np.array([1.5, -0.5], np.float32)),
    "f16[2]": (lambda n: np.array([1.5, -0.5], np.float16)),
    "bf16[2]": (lambda n: np.array([1.5, -0.5], ml_dtypes.bfloat16)),
    "f64[2]": (lambda n: np.array([1.5, -0.5], np.float64)),  # (float32 without x64, in both)
}

FUNS = {  # weak or strong outputs
    "x*2": lambda n: (lambda x: x * 2),
    "x*2.0": lambda n: (lambda x: x * 2.0),
    "sin": lambda n: (lambda x: n.sin(x)),
    "astype": lambda n: (lambda x: n.asarray(x).astype(np.float32) * 3.0),
    "where": lambda n: (lambda x: n.where(x > 1, x, 0.5)),
    "sum": lambda n: (lambda x: n.sum(x * x)),
    "const": lambda n: (lambda x: 3.0),
}


def _dtype(x):
    return np.dtype(x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype)


def _tangent(n, x):
    """A tangent of ``x``'s type (ones, weak for a weak primal; float0 for an integer)."""
    if _dtype(x).kind in "iub":
        return np.zeros(np.shape(x), F0)
    return n.ones_like(x)


def _transforms(lib, n):
    scalar = lambda f: (lambda x: n.sum(f(x)))  # noqa: E731

    def vjp(f, x):
        y, pullback = lib.vjp(f, x)
        return y, pullback(n.ones_like(y))  # (a cotangent of the output's dtype and weak type)

    def linearize(f, x):
        y, f_jvp = lib.linearize(f, x)
        return y, f_jvp(_tangent(n, x))
    return {
        "grad": lambda f, x: lib.grad(scalar(f), allow_int=True)(x),
        "value_and_grad": lambda f, x: lib.value_and_grad(scalar(f), allow_int=True)(x),
        "grad argnums=(0, 1)": lambda f, x: lib.grad(lambda a, b: n.sum(f(a) * b), argnums=(0, 1),
                                                     allow_int=True)(x, x),
        "vjp": vjp,
        "jvp": lambda f, x: lib.jvp(f, (x,), (_tangent(n, x),)),
        "jacfwd": lambda f, x: lib.jacfwd(f)(x),
        "jacrev": lambda f, x: lib.jacrev(f, allow_int=True)(x),
        "hessian": lambda f, x: lib.hessian(scalar(f))(x),
        "linearize": linearize,
    }


def _types(tree):
    return tree_util.tree_map(lambda x: (np.dtype(x.dtype).name, bool(x.weak_type)), tree)


def _jax_types(tree):
    """Types of JAX eager results (a Python float returned as is is a weak float32)."""
    def typ(x):
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return np.dtype(jnp.asarray(x).dtype).name, True
        a = jax.typeof(x)
        return np.dtype(a.dtype).name, bool(a.weak_type)
    return tree_util.tree_map(typ, tree)


def _ours_types(tree):
    return tree_util.tree_map(lambda x: (np.dtype(get_aval(x).dtype).name, bool(get_aval(x).weak_type)), tree)


def _jax_jacfwd_ok(x):
    return _dtype(x).kind == "f"


def _check(lib_cases, ref_cases, fun, args, k):
    """Traced types always (or JAX's error: its type and first words); every third case also
    run (eager or jitted) with JAX eager's types and values."""
    ours_f, ref_f = lib_cases, ref_cases
    try:
        want = _types(jax.eval_shape(ref_f, *args(jnp)))
    except (TypeError, ValueError) as e:  # (an integer output of grad, an integer input of jacfwd)
        with pytest.raises(type(e), match=str(e).split("\n")[0][:40].replace("(", ".").replace(")", ".")):
            minixla.eval_shape(ours_f, *args(mnp))
        return
    got = _types(minixla.eval_shape(ours_f, *args(mnp)))
    assert got == want, ("traced", fun)
    if RUN_EVERY == 0 or k % RUN_EVERY > 1:
        return
    run = ours_f if k % RUN_EVERY == 0 else minixla.jit(ours_f)
    ours, ref = run(*args(mnp)), ref_f(*args(jnp))
    assert _ours_types(ours) == _jax_types(ref) == want, ("eager" if k % RUN_EVERY == 0 else "jit", fun)
    for o, r in zip(tree_util.tree_leaves(ours), tree_util.tree_leaves(ref)):
        if np.asarray(r).dtype != F0:
            np.testing.assert_allclose(np.asarray(o, np.float64), np.asarray(r, np.float64), rtol=1e-6)


@pytest.mark.parametrize("tname", list(_transforms(jax, jnp)))
def test_weak_types_of_transformation_results_match_jax(tname):
    ours_t, ref_t = _transforms(minixla, mnp)[tname], _transforms(jax, jnp)[tname]
    for k, ((pname, primal), (fname, fun)) in enumerate(itertools.product(PRIMALS.items(), FUNS.items())):
        _check(lambda x: ours_t(fun(mnp), x), lambda x: ref_t(fun(jnp), x),
               (pname, fname, tname), lambda n: (primal(n),), k)


def test_weak_types_under_x64_match_jax(x64):
    """With ``jax_enable_x64``: a Python float is a weak float64, an f64 array stays float64."""
    primals = {k: PRIMALS[k] for k in ("py float", "f32[]", "f64[2]")}
    funs = {k: FUNS[k] for k in ("x*2", "where", "astype", "const")}
    ours_t, ref_t = _transforms(minixla, mnp), _transforms(jax, jnp)
    cases = itertools.product(ours_t, primals.items(), funs.items())
    for k, (tname, (pname, primal), (fname, fun)) in enumerate(cases):
        _check(lambda x: ours_t[tname](fun(mnp), x), lambda x: ref_t[tname](fun(jnp), x),
               (pname, fname, tname), lambda n: (primal(n),), k)


PAIRS = {  # mixed weak and strong primals, for argnums tuples
    "py float, f16": lambda n: (1.5, np.array([1., 2.], np.float16)),
    "weak, bf16": lambda n: (n.asarray(1.5), np.array([1., 2.], ml_dtypes.bfloat16)),
    "f32, py float": lambda n: (np.array([1., 2.], np.float32), 2.5),
    "py int, f32": lambda n: (2, np.float32(1.5)),
}
FUNS2 = {
    "a*b": lambda n: (lambda a, b: a * b),
    "where": lambda n: (lambda a, b: n.where(b > 1, a, 0.5)),
    "tuple": lambda n: (lambda a, b: (a * 2.0, n.asarray(b).astype(np.float32), 1.0)),
}


def _transforms2(lib, n):
    def scalar(f):
        return lambda a, b: sum(n.sum(n.asarray(o, np.float32)) for o in tree_util.tree_leaves(f(a, b)))

    def strong(x):
        return n.ones(np.shape(x), _dtype(x)) if _dtype(x).kind == "f" else _tangent(n, x)

    def vjp(f, a, b, ct):
        y, pullback = lib.vjp(f, a, b)
        return y, pullback(tree_util.tree_map(ct, y))
    return {
        "grad argnums=(0, 1)": lambda f, a, b: lib.grad(scalar(f), argnums=(0, 1), allow_int=True)(a, b),
        "value_and_grad argnums=1": lambda f, a, b: lib.value_and_grad(scalar(f), argnums=1)(a, b),
        "grad has_aux": lambda f, a, b: lib.grad(lambda a, b: (scalar(f)(a, b), f(a, b)), argnums=(0,),
                                                 has_aux=True, allow_int=True)(a, b),
        "vjp": lambda f, a, b: vjp(f, a, b, n.ones_like),
        "vjp strong ct": lambda f, a, b: vjp(f, a, b, strong),
        "jvp": lambda f, a, b: lib.jvp(f, (a, b), (_tangent(n, a), _tangent(n, b))),
        "jvp strong tangents": lambda f, a, b: lib.jvp(f, (a, b), (strong(a), strong(b))),
        "jacfwd argnums": lambda f, a, b: lib.jacfwd(f, argnums=(0, 1) if _jax_jacfwd_ok(a) else 1)(a, b),
        "jacrev argnums=(0, 1)": lambda f, a, b: lib.jacrev(f, argnums=(0, 1), allow_int=True)(a, b),
        "hessian argnums": lambda f, a, b: lib.hessian(scalar(f), argnums=(0, 1) if _jax_jacfwd_ok(a) else 1)(a, b),
        "linearize": lambda f, a, b: (lambda y, fj: (y, fj(_tangent(n, a), _tangent(n, b))))(*lib.linearize(f, a, b)),
    }


@pytest.mark.parametrize("pname", list(PAIRS))
def test_weak_types_with_argnums_tuples_match_jax(pname):
    ours_t, ref_t = _transforms2(minixla, mnp), _transforms2(jax, jnp)
    for k, ((fname, fun), tname) in enumerate(itertools.product(FUNS2.items(), ours_t)):
        _check(lambda a, b: ours_t[tname](fun(mnp), a, b), lambda a, b: ref_t[tname](fun(jnp), a, b),
               (pname, fname, tname), lambda n: PAIRS[pname](n), k)


def test_type_errors_match_jax():
    """JAX's errors where a tangent's type or an output's dtype is wrong for the transformation."""
    cases = [
        # a tangent of another dtype/shape than the primal's tangent type (float0 for an int)
        lambda lib, n: lib.linearize(lambda x: x * 2.0, 2)[1](n.ones_like(2)),
        lambda lib, n: lib.linearize(lambda x: x * 2.0, 2.0)[1](n.ones(3)),
        lambda lib, n: lib.linearize(lambda x: x * 2.0, 2.0)[1](n.ones((), np.float16)),
        # an integer output
        lambda lib, n: lib.jacrev(lambda x: (x * 2, 2))(np.float32(1.0)),
    ]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(jax, jnp)
        with pytest.raises(type(want.value)) as got:
            case(minixla, mnp)
        assert str(got.value).startswith(str(want.value).strip()), (str(got.value), str(want.value))


JAXPR_CASES = {
    "sum(x*2)": (lambda n: (lambda x: n.sum(x * 2)), 1.5),
    "where": (lambda n: (lambda x: n.sum(n.where(x > 1, x, 0.0))), 1.5),
    "astype": (lambda n: (lambda x: n.asarray(x).astype(np.float32) * 3.0), 1.5),
    "const": (lambda n: (lambda x: 3.0), 1.5),
    "f16 sum": (lambda n: (lambda x: n.sum(x * 2.0)), np.ones(3, np.float16)),
    "weak array": (lambda n: (lambda x: n.sin(x) * 2), None),
}


@pytest.mark.parametrize("name", list(JAXPR_CASES))
def test_make_jaxpr_of_grad_has_jaxs_weak_types(name):
    """``make_jaxpr(grad(f))``: the outputs' weak types are JAX's, and every ``convert_element_type``
    JAX's jaxpr holds (its ``new_dtype`` and ``weak_type`` marks) is in minixla's (which may stage
    a few more operations on the constant cotangent seed)."""
    mk, x = JAXPR_CASES[name]
    arg = (lambda n: n.asarray(0.5)) if x is None else (lambda n: x)
    want = jax.make_jaxpr(jax.grad(mk(jnp)))(arg(jnp))
    got = minixla.make_jaxpr(minixla.grad(mk(mnp)))(arg(mnp))
    assert [(a.dtype, a.weak_type) for a in got.out_avals] == [(a.dtype, a.weak_type) for a in want.out_avals]

    def marks(jaxpr):
        return sorted((str(e.params["new_dtype"]), e.params["weak_type"]) for e in jaxpr.eqns
                      if e.primitive.name == "convert_element_type")
    ours = marks(got.jaxpr)
    for m in marks(want.jaxpr):
        assert m in ours, (m, str(got), str(want))
        ours.remove(m)
