"""Multi-device checks of ``minixla.jit(..., in_shardings=..., out_shardings=..., backend="jax")``,
run in a process of its own with 8 host devices (``tests/test_sharding_api.py`` starts it):

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/sharding_checks.py

Prints one JSON object, ``{check name: value}``; the test asserts each. A GPU machine with
several GPUs runs it unchanged (the env var then only adds CPU devices JAX does not use).
"""
from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import minixla  # noqa: E402
import minixla.numpy as mnp  # noqa: E402


def mlp(params, x):
    h = mnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def loss(params, x, y):
    return mnp.mean((mlp(params, x) - y) ** 2)


def close(a, b, tol=1e-5):
    return bool(np.allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol))


def same_sharding(arr, sharding) -> bool:
    return bool(arr.sharding.is_equivalent_to(sharding, arr.ndim))


def main():
    out = {"device_count": jax.device_count()}
    devices = np.array(jax.devices()[:8])
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((16, 32)).astype(np.float32) * 0.3,
              "b1": rng.standard_normal(32).astype(np.float32) * 0.1,
              "w2": rng.standard_normal((32, 8)).astype(np.float32) * 0.3,
              "b2": np.zeros(8, np.float32)}
    x = rng.standard_normal((32, 16)).astype(np.float32)
    y = rng.standard_normal((32, 8)).astype(np.float32)
    ref_fwd = minixla.jit(mlp)(params, x)  # one device (llvm)
    ref_loss, ref_grad = minixla.jit(minixla.value_and_grad(loss))(params, x, y)

    # 1-D mesh: batch sharded, parameters replicated (data parallel).
    mesh1 = Mesh(devices, ("batch",))
    batch, repl = NamedSharding(mesh1, P("batch")), NamedSharding(mesh1, P())
    f = minixla.jit(mlp, backend="jax", in_shardings=(repl, batch), out_shardings=batch)
    r = f(params, x)
    out["1d_forward_equal"] = close(r, ref_fwd)
    out["1d_out_sharding"] = same_sharding(r, batch)
    out["1d_shards"] = sorted({tuple(s.data.shape) for s in r.addressable_shards}) == [(4, 8)] \
        and len(r.addressable_shards) == 8
    text = f.lower(params, x).as_text()
    out["1d_hlo_param_sharding"] = "parameter(4), sharding={devices=[8,1]0,1,2,3,4,5,6,7}" in text
    out["1d_hlo_root_sharding"] = "sharding={devices=[8,1]0,1,2,3,4,5,6,7}" in text.split("ROOT")[-1]

    # The grad step: XLA's partitioner all-reduces the gradients of the replicated parameters.
    g = minixla.jit(minixla.value_and_grad(loss), backend="jax", in_shardings=(repl, batch, batch),
                    out_shardings=repl)
    lval, grad = g(params, x, y)
    out["1d_grad_equal"] = close(lval, ref_loss) and all(
        close(grad[k], ref_grad[k]) for k in params)
    out["1d_grad_replicated"] = all(same_sharding(grad[k], repl) for k in params)
    xla_text = g.lower(params, x, y).compile().executable._compiled.as_text()
    out["1d_grad_all_reduce"] = "all-reduce" in xla_text

    # device_put + a sharded jax.Array argument (taken as it is, no copy to the host)
    xs = minixla.device_put(x, batch)
    out["device_put_sharding"] = same_sharding(xs, batch)
    out["device_array_argument"] = close(f(params, xs), ref_fwd)

    # a committed array laid out otherwise is an error, as in jax.jit
    try:
        f(params, minixla.device_put(x, repl))
        out["committed_mismatch_error"] = False
    except ValueError as e:
        out["committed_mismatch_error"] = "does not match the sharding on the respective arg" in str(e)

    # 2-D mesh 2x4: batch over "x", the hidden dim over "y" (model parallel), constraints inside.
    mesh2 = Mesh(devices.reshape(2, 4), ("x", "y"))
    ns = lambda *spec: NamedSharding(mesh2, P(*spec))
    shard_p = {"w1": ns(None, "y"), "b1": ns("y"), "w2": ns("y", None), "b2": ns()}

    def mlp_constrained(params, x):
        h = mnp.tanh(x @ params["w1"] + params["b1"])
        h = minixla.lax.with_sharding_constraint(h, ns("x", "y"))
        return h @ params["w2"] + params["b2"]
    f2 = minixla.jit(mlp_constrained, backend="jax", in_shardings=(shard_p, ns("x")),
                     out_shardings=ns("x", "y"))
    r2 = f2(params, x)
    out["2d_forward_equal"] = close(r2, ref_fwd)
    out["2d_out_sharding"] = same_sharding(r2, ns("x", "y"))
    out["2d_shard_shape"] = tuple(r2.addressable_shards[0].data.shape) == (16, 2)
    lowered = f2.lower(params, x)
    text2 = lowered.as_text()
    out["2d_hlo_constraint"] = ('custom_call_target="Sharding", sharding={devices=[2,4]0,1,2,3,4,5,6,7}'
                                in text2)
    out["2d_hlo_w1"] = "sharding={devices=[1,4,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}" in text2
    out["2d_constraint_kept"] = 'custom_call_target="Sharding"' in lowered.compile().as_text()

    # grad through the constraint on the 2-D mesh, batch over both axes
    def loss2(params, x, y):
        return mnp.mean((mlp_constrained(params, x) - y) ** 2)
    g2 = minixla.jit(minixla.grad(loss2), backend="jax", in_shardings=(shard_p, ns("x"), ns("x")),
                     out_shardings=shard_p)
    grad2 = g2(params, x, y)
    out["2d_grad_equal"] = all(close(grad2[k], ref_grad[k]) for k in params)
    out["2d_grad_sharding"] = all(same_sharding(grad2[k], shard_p[k]) for k in params)

    # out_shardings alone (inputs unconstrained), a bare PartitionSpec under jax.set_mesh, and
    # a parameter returned as it is under another sharding
    with jax.set_mesh(mesh2):
        f3 = minixla.jit(lambda a, b: (a * 2.0, b), backend="jax", out_shardings=(P("y"), P(None, "x")))
        a3, b3 = f3(x, y)
    out["out_only"] = close(a3, x * 2.0) and close(b3, y) and same_sharding(a3, ns("y")) \
        and same_sharding(b3, ns(None, "x"))

    # vmap of a constrained function: the spec gains None for the batch dim
    fv = minixla.jit(minixla.vmap(lambda a: minixla.lax.with_sharding_constraint(mnp.sin(a), ns("x"))),
                     backend="jax")
    xb = rng.standard_normal((4, 8, 6)).astype(np.float32)
    out["vmap_constraint"] = close(fv(xb), np.sin(xb)) and (
        "sharding={devices=[1,2,1,4]" in fv.lower(xb).as_text())

    # device_put checks divisibility as JAX does
    try:
        minixla.device_put(np.ones((6, 4), np.float32), ns("y"))
        out["device_put_error"] = False
    except ValueError as e:
        out["device_put_error"] = "device_put of x: PartitionSpec P('y',) splits array dimension 0 (size 6" in str(e)

    # the README's example, as written
    import re
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    readme = open(os.path.join(root, "README.md")).read()
    section = readme.split("## Sharding and multiple devices", 1)[1].split("\n## ", 1)[0]
    scope = {}
    exec(re.findall(r"```python\n(.*?)```", section, re.S)[0], scope)
    ref = minixla.jit(minixla.grad(scope["loss"]))({"w": scope["w"]}, scope["x"], scope["y"])
    out["readme_example"] = close(scope["g"]["w"], ref["w"]) and same_sharding(scope["g"]["w"], scope["replicated"])

    # examples/digits_cnn.py --devices 8, a few small steps: the data-parallel loss curve
    sys.path.insert(0, os.path.join(root, "examples"))
    import digits_cnn
    cnn = digits_cnn.run_data_parallel(8, steps=6, batch=32, verbose=False)
    out["cnn_devices"] = cnn["devices"] == 8
    out["cnn_loss_curve_equal"] = cnn["max_rel_loss_diff"] <= 1e-5
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
