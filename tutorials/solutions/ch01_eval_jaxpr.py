"""Reference solution of tutorial 01's exercise (see ``tutorials/exercises/ch01_eval_jaxpr.py``)."""
from minixla.core.jaxpr import Literal


def eval_jaxpr(closed_jaxpr, *args) -> list:
    jaxpr = closed_jaxpr.jaxpr
    env = dict(zip(jaxpr.constvars, closed_jaxpr.consts))
    env.update(zip(jaxpr.invars, args))

    def read(atom):
        return atom.value if isinstance(atom, Literal) else env[atom]

    for eqn in jaxpr.eqns:
        out = eqn.primitive.bind(*[read(v) for v in eqn.invars], **eqn.params)
        outs = out if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]
