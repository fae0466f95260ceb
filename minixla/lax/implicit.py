"""Implicitly differentiated solves (``jax.lax.custom_linear_solve``, ``jax.lax.custom_root``):
the solver's own iterations are never differentiated; the derivative comes from the equation
the solution satisfies, as JAX defines it.

- ``custom_linear_solve(matvec, b, solve, transpose_solve)``: ``x = solve(matvec, b)``. Its
  tangent is ``solve(matvec, b' - matvec'(x))`` (``matvec'``: ``matvec`` differentiated in what it
  closes over), and the cotangent of ``b`` is ``transpose_solve(vecmat, ct)`` (``vecmat``: the
  transpose of ``matvec``; ``solve`` itself when ``symmetric``). Built from ``custom_jvp`` (the
  tangent rule) over a linear solve whose transpose is ``transpose_solve``
  (``interpreters.linear_vjp``), every function's closed-over values made explicit by
  ``closure_convert``.
- ``custom_root(f, initial_guess, solve, tangent_solve)``: ``x = solve(f, initial_guess)`` with
  ``f(x) = 0``; its tangent is ``-tangent_solve(J, f'(x))``, ``J`` the derivative of ``f`` in
  ``x`` at the root and ``f'`` the derivative in what ``f`` closes over.
"""
from __future__ import annotations

from jax import tree_util

__all__ = ["custom_linear_solve", "custom_root"]


def _api():
    from minixla.interpreters import api, custom_derivatives, custom_gradient
    return api, custom_derivatives, custom_gradient


def _stop(tree):
    from minixla.lax.elementwise import stop_gradient
    return tree_util.tree_map(stop_gradient, tree)


def _tmap(f, *trees):
    return tree_util.tree_map(f, *trees)


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False, has_aux=False):
    """The ``x`` with ``matvec(x) == b`` found by ``solve(matvec, b)``, differentiated
    implicitly (``jax.lax.custom_linear_solve``): ``b`` and ``x`` are pytrees of one structure,
    ``matvec`` linear; ``solve`` is never differentiated. Reverse mode needs
    ``transpose_solve(vecmat, ct)`` or ``symmetric=True`` (else JAX's ``TypeError``). ``has_aux``
    is not supported yet (``NotImplementedError``)."""
    api, cd, cg = _api()
    from minixla.lax.elementwise import sub
    if has_aux:
        raise NotImplementedError("custom_linear_solve(has_aux=True) is not supported by minixla yet")
    if symmetric:
        transpose_solve = solve
    # every function's closed-over values as explicit operands (they may be traced)
    mv, c_mv = cg.closure_convert(matvec, b)
    sv, c_sv = cg.closure_convert(lambda r: solve(matvec, r), b)
    if transpose_solve is not None:
        vecmat = api.linear_transpose(matvec, b)
        tsv, c_tsv = cg.closure_convert(lambda r: transpose_solve(lambda y: vecmat(y)[0], r), b)
    else:
        tsv, c_tsv = None, []
    k1, k2 = len(c_mv), len(c_mv) + len(c_sv)

    def lin_solve(rhs, cs):  # rhs -> solve(matvec, rhs): linear; its transpose is transpose_solve's
        from minixla.interpreters.linear_vjp import linear_custom_vjp

        @linear_custom_vjp
        def f(rhs):
            return sv(rhs, *cs[k1:k2])

        def bwd(_, ct):
            if tsv is None:
                raise TypeError("transpose_solve required for backwards mode automatic differentiation of "
                                "custom_linear_solve")
            return (tsv(ct, *cs[k2:]),)
        f.defvjp(lambda rhs: (f(rhs), None), bwd)
        return f(rhs)

    @cd.custom_jvp
    def solved(b, *cs):
        return _stop(sv(b, *cs[k1:k2]))

    def solved_jvp(primals, tangents):
        b, cs = primals[0], primals[1:]
        x = solved(b, *cs)
        rhs = tangents[0]
        if k1:  # (b' - matvec'(x): matvec differentiated in what it closes over)
            _, mv_dot = api.jvp(lambda *c: mv(x, *c), tuple(cs[:k1]), tuple(tangents[1:k1 + 1]))
            rhs = _tmap(sub, rhs, mv_dot)
        return x, lin_solve(rhs, cs)
    solved.defjvp(solved_jvp)
    return solved(b, *c_mv, *c_sv, *c_tsv)


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """The root ``x`` of ``f`` that ``solve(f, initial_guess)`` finds, differentiated implicitly
    (``jax.lax.custom_root``): ``f`` maps a pytree to one of the same structure; ``solve`` is never
    differentiated; ``tangent_solve(g, y)`` solves the linear ``g(t) == y`` (e.g.
    ``lambda g, y: y / g(1.0)`` for scalars). ``has_aux`` is not supported yet
    (``NotImplementedError``)."""
    api, cd, cg = _api()
    from minixla.lax.elementwise import neg
    if has_aux:
        raise NotImplementedError("custom_root(has_aux=True) is not supported by minixla yet")
    fc, c_f = cg.closure_convert(f, initial_guess)
    sv, c_sv = cg.closure_convert(lambda g: solve(f, g), initial_guess)
    k = len(c_f)

    @cd.custom_jvp
    def root(guess, *cs):
        return _stop(sv(guess, *cs[k:]))

    def root_jvp(primals, tangents):
        guess, cs = primals[0], primals[1:]
        x = root(guess, *cs)
        if not k:
            return x, _tmap(lambda v: v * 0, x)
        _, f_dot = api.jvp(lambda *c: fc(x, *c), tuple(cs[:k]), tuple(tangents[1:k + 1]))
        jac = lambda t: api.jvp(lambda y: fc(y, *cs[:k]), (x,), (t,))[1]  # noqa: E731
        return x, _tmap(neg, tangent_solve(jac, f_dot))
    root.defjvp(root_jvp)
    return root(initial_guess, *c_f, *c_sv)
