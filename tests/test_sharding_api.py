"""``jit(..., in_shardings=..., out_shardings=...)``, ``with_sharding_constraint`` and
``device_put`` (issue 17, the hand-off half).

In this process JAX has one device: the HLO annotations, the one-device runs, the
transformations' rules and the errors are checked here, with ``AbstractMesh`` (shape only) on
the llvm backend. The runs on 8 devices are ``tests/sharding_checks.py`` in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=8``.
"""
import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec as P

import minixla
import minixla.numpy as mnp
from minixla.hlo.parser import parse
from minixla.hlo.verifier import verify
from minixla.sharding import ShardingError

ROOT = pathlib.Path(__file__).resolve().parent.parent
MESH = AbstractMesh((2, 4), ("x", "y"))


def ns(*spec):
    return NamedSharding(MESH, P(*spec))


def test_multi_device_checks_in_a_subprocess():
    """8 host devices: 1-D and 2x4 meshes, MLP forward and grad step, out_shardings honoured,
    constraints inside, device_put, and the digits CNN trained data-parallel
    (``examples/digits_cnn.py --devices 8``, a few steps); every value equal to the one-device run."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "sharding_checks.py")], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    checks = json.loads(r.stdout.strip().splitlines()[-1])
    assert checks.pop("device_count") >= 8
    assert len(checks) >= 20
    assert [k for k, ok in checks.items() if ok is not True] == []


def _f(a, b):
    h = minixla.lax.with_sharding_constraint(a * 2.0 + b, ns(None, "y"))
    return mnp.sum(h, axis=0)


def test_hlo_shows_shardings_and_the_passes_keep_them():
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    f = minixla.jit(_f, in_shardings=(ns("x"), ns("x", "y")), out_shardings=ns("y"))
    lowered = f.lower(x, x)
    text = lowered.as_text()
    assert "parameter(0), sharding={devices=[2,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}" in text
    assert "parameter(1), sharding={devices=[2,4]0,1,2,3,4,5,6,7}" in text
    assert ('custom-call(%add.4), custom_call_target="Sharding", '
            'sharding={devices=[1,4,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}') in text
    assert "sharding={devices=[4,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}" in text.split("ROOT")[-1]
    verify(lowered.hlo_module)
    assert parse(text).to_string() == text  # (custom-call and shardings print and parse back)
    # the optimized module: parameters keep theirs, the root's moves onto the fusion that
    # replaced it; on the llvm backend (one device) the constraint is removed
    compiled = lowered.compile()
    out = compiled.as_text()
    assert out.count("sharding={devices=[2,1,4]") == 1 and 'custom_call_target' not in out
    assert "sharding={devices=[4,2]" in out.split("ENTRY")[-1].split("ROOT")[-1]
    np.testing.assert_array_equal(f(x, x), (x * 3.0).sum(0))
    # the jax backend keeps the constraint (XLA's partitioner reads it) and, on one device,
    # runs as the llvm backend does
    j = minixla.jit(_f, backend="jax")
    assert 'custom_call_target="Sharding"' in j.lower(x, x).compile().as_text()
    np.testing.assert_array_equal(j(x, x), (x * 3.0).sum(0))
    # nor is a constraint folded with a constant operand, or lost on a parameter
    wsc = minixla.lax.with_sharding_constraint
    k = minixla.jit(lambda a: (wsc(a, ns("x")) * 2.0, wsc(mnp.arange(8.0), ns("y"))), backend="jax")
    assert k.lower(x).compile().as_text().count('custom_call_target="Sharding"') == 2


def test_constraint_transformations_follow_jax():
    x = np.ones((8, 4), np.float32)
    sq = lambda a: mnp.sum(_f(a, a) ** 2)
    text = str(minixla.make_jaxpr(minixla.grad(sq))(x))
    assert text.count("sharding_constraint[") == 2  # the value and its cotangent
    np.testing.assert_array_equal(minixla.grad(sq)(x), np.full((8, 4), 144.0))
    _, t = minixla.jvp(lambda a: _f(a, a), (x,), (x,))
    np.testing.assert_array_equal(t, np.full(4, 24.0))
    xb = np.ones((3, 8, 4), np.float32)
    text = str(minixla.make_jaxpr(minixla.vmap(_f, in_axes=(1, 1)))(xb.transpose(1, 0, 2), xb.transpose(1, 0, 2)))
    assert "spec=P(None, None, 'y')" in text  # a None for the batch dim
    np.testing.assert_array_equal(minixla.vmap(_f)(xb, xb), np.full((3, 4), 24.0))
    # JAX agrees on the values (eager: the constraint is the identity)
    jx = jax.grad(lambda a: (a * 3.0).sum())(x)
    np.testing.assert_array_equal(minixla.jit(minixla.grad(lambda a: mnp.sum(_f(a, a))))(x), jx)


def _raises(match, fn):
    with pytest.raises(ShardingError, match=match) as info:
        fn()
    assert isinstance(info.value, ValueError) and "at: " in str(info.value)
    return str(info.value)


def test_errors_name_the_argument_and_the_axis():
    x = np.ones((8, 4), np.float32)
    x6 = np.ones((6, 4), np.float32)
    msg = _raises(r"argument b: PartitionSpec P\('y',\) splits array dimension 0 \(size 6",
                  lambda: minixla.jit(_f, in_shardings=(None, ns("y")))(x6, x6))
    assert "mesh axes ('y',)" in msg
    _raises(r"out_shardings of output\[1\]: .* splits array dimension 0 \(size 6",
            lambda: minixla.jit(lambda a, b: (a, b), out_shardings=(None, ns("y")))(x, x6))
    _raises(r"argument params\['w'\]: PartitionSpec P\('x', None, None\) is only valid for values of "
            r"rank at least 3, but was applied to a value of rank 2",
            lambda: minixla.jit(lambda params: params["w"], in_shardings=({"w": ns("x", None, None)},))(
                {"w": x}))
    _raises(r"got a tuple of length 3 for 2 positional arguments \('a', 'b'\)",
            lambda: minixla.jit(_f, in_shardings=(ns("x"),) * 3)(x, x))
    _raises(r"in_shardings\[0\] must be a tree prefix .* a dict with entries \[\"\['q'\]\"\] but the "
            r"argument has a dict with entries \[\"\['p'\]\"\]",
            lambda: minixla.jit(lambda d: d["p"], in_shardings=({"q": ns("x")},))({"p": x}))
    _raises("keyword arguments when in_shardings", lambda: minixla.jit(_f, in_shardings=ns())(x, b=x))
    device = jax.devices()[0]
    with jax.set_mesh(Mesh(np.array([device]), ("x",))):
        _raises(r"argument a: mesh axis 'z' of PartitionSpec P\('z',\) is not found in the mesh axes \('x',\)",
                lambda: minixla.jit(lambda a: a * 2.0, in_shardings=P("z"))(x))
        _raises(r"with_sharding_constraint: x: mesh axis 'z'",
                lambda: minixla.jit(lambda a: minixla.lax.with_sharding_constraint(a, P("z")))(x))
    _raises("needs a mesh", lambda: minixla.jit(lambda a: a, in_shardings=P("x"))(x))
    _raises(r"x: PartitionSpec P\('x', None, None\) is only valid for values of rank at least 3",
            lambda: minixla.jit(lambda a: minixla.lax.with_sharding_constraint(a, ns("x", None, None)))(x))
    # more mesh devices than this process has: an AbstractMesh cannot run, and a Mesh may not
    # list a device twice
    x16 = np.ones((16,), np.float32)
    _raises(r"argument a: an AbstractMesh \{'b': 16\} .* it has 16 devices and this process has 1",
            lambda: minixla.jit(lambda a: a, backend="jax",
                                in_shardings=NamedSharding(AbstractMesh((16,), ("b",)), P("b")))(x16))
    _raises(r"the mesh \{'b': 2\} has 2 positions but only 1 distinct devices",
            lambda: minixla.jit(lambda a: a, backend="jax",
                                in_shardings=NamedSharding(Mesh(np.array([device, device]), ("b",)), P("b")))(x))
    # a split that does not divide is fine for a constraint (XLA pads), as in JAX
    np.testing.assert_array_equal(
        minixla.jit(lambda a: minixla.lax.with_sharding_constraint(a, ns("y")))(x6), x6)


def test_nested_jit_with_shardings_constrains_in_the_outer_trace():
    """As a nested jax.jit: its shardings become constraints on its arguments and results."""
    inner = minixla.jit(lambda a: mnp.sin(a) * 2.0, in_shardings=ns("x"), out_shardings=ns(None, "y"))
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    text = str(minixla.make_jaxpr(lambda a: inner(a) + 1.0)(x))
    assert "spec=P('x',)" in text and "spec=P(None, 'y')" in text
    g = minixla.grad(lambda a: mnp.sum(inner(a) ** 2))
    assert str(minixla.make_jaxpr(g)(x)).count("sharding_constraint[") == 4  # and the cotangents'
    np.testing.assert_allclose(g(x), 8.0 * np.sin(x) * np.cos(x), rtol=1e-5, atol=1e-6)


def test_jax_front_end_keeps_a_constraint():
    """A function written with jax.lax.with_sharding_constraint, traced by JAX and imported."""
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    fn = lambda a: jax.lax.with_sharding_constraint(jax.numpy.sin(a), NamedSharding(mesh, P("x")))
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    f = minixla.jit(fn, frontend="jax", backend="jax")
    assert 'custom_call_target="Sharding", sharding={replicated}' in f.lower(x).as_text()
    np.testing.assert_array_equal(f(x), np.asarray(jax.jit(fn)(x)))


def test_device_put_one_device():
    d = jax.devices()[0]
    s = NamedSharding(Mesh(np.array([d]), ("b",)), P("b"))
    out = minixla.device_put({"a": np.ones((4, 2), np.float32)}, s)
    assert out["a"].sharding == s
    assert isinstance(minixla.device_put(np.ones(3), d), jax.Array)
