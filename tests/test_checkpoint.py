"""checkpoint / remat: values against jax.grad of jax.checkpoint (policies, both backends,
nesting), and the structure that makes it worth it: fewer residuals handed from the forward to
the backward pass, and a backward HLO that recomputes (CSE does not merge it back)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.hlo.lowering import lower_jaxpr
from minixla.passes.cse import CommonSubexpressionElimination
from minixla.passes.dce import DeadCodeElimination

X = np.linspace(-1, 1, 8, dtype=np.float32)
W = (np.arange(64, dtype=np.float32).reshape(8, 8) / 64 - 0.5)


def chain(np_):
    return lambda x: np_.sin(np_.sin(np_.sin(x)))


def mlp(np_):
    def f(w, x):
        h = np_.tanh(w @ x)
        return np_.sum(np_.tanh(w @ h) ** 2)
    return f


def _close(got, want):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


POLICIES = ["nothing_saveable", "everything_saveable", "dots_saveable", None]


@pytest.mark.parametrize("policy", POLICIES)
def test_gradient_matches_jax_checkpoint(policy):
    ours = minixla.checkpoint(mlp(mnp), policy=policy and getattr(minixla.checkpoint_policies, policy))
    theirs = jax.checkpoint(mlp(jnp), policy=policy and getattr(jax.checkpoint_policies, policy))
    want = jax.jit(jax.value_and_grad(theirs, (0, 1)))(W, X)
    _close(minixla.value_and_grad(ours, (0, 1))(W, X), want)
    if policy is None:
        for backend in ("llvm", "jax"):
            _close(minixla.jit(minixla.value_and_grad(ours, (0, 1)), backend=backend)(W, X), want)


def test_remat_alias_nesting_and_vmap():
    ours, theirs = minixla.remat(chain(mnp)), jax.remat(chain(jnp))
    jj = jax.jit
    _close(minixla.grad(minixla.grad(lambda x: ours(x)))(0.3), jj(jax.grad(jax.grad(theirs)))(0.3))
    _close(minixla.vmap(minixla.grad(ours))(X), jj(jax.vmap(jax.grad(theirs)))(X))
    _close(minixla.jit(minixla.grad(lambda x: minixla.vmap(ours)(x).sum()))(X),
           jj(jax.grad(lambda x: jax.vmap(theirs)(x).sum()))(X))
    _close(minixla.jvp(ours, (X,), (X,)), jj(lambda x: jax.jvp(theirs, (x,), (x,)))(X))
    _close(minixla.jit(ours)(X), theirs(X))
    _close(minixla.jacrev(minixla.checkpoint(lambda x: minixla.jit(chain(mnp))(x)))(X[:3]),
           jj(jax.jacrev(theirs))(X[:3]))


def _residuals(f, *args):
    """How many values the forward pass hands the backward pass (the linear jaxpr's consts)."""
    _, f_jvp = minixla.linearize(f, *args)
    return len(f_jvp.jaxpr.consts)


def test_residuals_shrink_to_the_inputs():
    assert _residuals(chain(mnp), X) == 3  # cos of each sine's input
    assert _residuals(minixla.checkpoint(chain(mnp)), X) == 1  # only x: the rest is recomputed
    p = minixla.checkpoint_policies
    full = _residuals(mlp(mnp), W, X)
    assert _residuals(minixla.checkpoint(mlp(mnp), policy=p.everything_saveable), W, X) == full
    assert _residuals(minixla.checkpoint(mlp(mnp)), W, X) == 2  # w and x
    assert 2 < _residuals(minixla.checkpoint(mlp(mnp), policy=p.dots_saveable), W, X) < full


def _count(module, opcode):
    return sum(i.opcode == opcode for c in module.computations for i in c.instructions)


def _after_cse(f, x):
    module = lower_jaxpr(minixla.make_jaxpr(minixla.value_and_grad(f))(x))
    CommonSubexpressionElimination().run(module)
    DeadCodeElimination().run(module)
    return module


def test_backward_hlo_recomputes_and_cse_does_not_merge_it_back():
    plain = _count(_after_cse(lambda x: chain(mnp)(x).sum(), X), "sine")
    remat = _count(_after_cse(lambda x: minixla.checkpoint(chain(mnp))(x).sum(), X), "sine")
    merged = _count(_after_cse(lambda x: minixla.checkpoint(chain(mnp), prevent_cse=False)(x).sum(), X), "sine")
    assert plain == 3 and merged == 3
    assert remat == 5  # the forward's three, and the backward's recomputed sin x, sin(sin x)
    text = minixla.jit(minixla.value_and_grad(lambda x: minixla.checkpoint(chain(mnp))(x).sum())).lower(
        X).compile().as_text()
    assert text.count("sine(") >= 5


def test_jaxprs_print_as_jax_prints_them():
    ours, theirs = minixla.checkpoint(chain(mnp)), jax.checkpoint(chain(jnp))
    assert str(minixla.make_jaxpr(ours)(1.)) == str(jax.make_jaxpr(theirs)(1.))
    ours2 = minixla.checkpoint(lambda x: mnp.sin(mnp.sin(x)), policy=minixla.checkpoint_policies.dots_saveable)
    theirs2 = jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)), policy=jax.checkpoint_policies.dots_saveable)
    assert str(minixla.make_jaxpr(ours2)(1.)) == str(jax.make_jaxpr(theirs2)(1.))
    # the backward pass: one remat2[differentiated=True] recomputing from the input, as JAX's
    # (which names the forward's unused value `_`: compare up to variable names)
    want = str(jax.make_jaxpr(jax.grad(jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)))))(1.))
    got = str(minixla.make_jaxpr(minixla.grad(minixla.checkpoint(lambda x: mnp.sin(mnp.sin(x)))))(1.))
    assert _canon(got) == _canon(want)
    assert "differentiated=True" in got


def _canon(text):
    """Variable names (one or two letters, or JAX's `_`) renamed in order of appearance."""
    import re
    names = {}
    return re.sub(r"\b(?!in\b)([a-z]{1,2}|_)\b(?=[:\s,)]|$)",
                  lambda m: names.setdefault(m.group(1) if m.group(1) != "_" else object(), f"v{len(names)}"),
                  text)
