# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tutorial 13 — SPMD: shardings, propagation, partitioning, collectives
#
# A model whose weights do not fit one device, or a batch that takes too long on one, is
# split over a *mesh* of devices. Writing one program per device by hand, with the
# communication in the right places, is hard to get right. XLA's answer (GSPMD) is to let the
# user annotate a few arrays with how they are split, then
#
# 1. **propagate** those shardings to every instruction of the HLO,
# 2. **partition**: rewrite the module into *one* program that every device runs on its own
#    shard (SPMD: single program, multiple data), with **collectives** (`all-reduce`,
#    `all-gather`, `all-to-all`, ...) where a device needs data another one holds.
#
# minixla has both passes, small enough to read: `minixla/passes/sharding_propagation.py`
# and `minixla/passes/spmd_partitioner.py`. No real devices are needed: the per-device
# program runs on *virtual* devices in the HLO evaluator, all in lockstep.
#
# *Mirrors* XLA's `xla/hlo/ir/hlo_sharding.h`, `xla/service/sharding_propagation.cc` and
# `xla/service/spmd/spmd_partitioner.cc` (GSPMD, Xu et al. 2021), and JAX's
# `jax.sharding.PartitionSpec`.

# %%
import json
import os
import pathlib
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from jax.sharding import PartitionSpec as P

import minixla
import minixla.numpy as mnp
from minixla.passes.sharding_propagation import dim_map, using_dim_map
from minixla.passes.spmd_partitioner import collective_bytes
from minixla.sharding import HloSharding, evaluate_partitioned, partition, propagate, shard

t_start = time.perf_counter()

# %% [markdown]
# ## 1. Meshes, PartitionSpecs and HloShardings
#
# Why bother: a model of 7 billion float32 parameters is 26 GiB of weights before any
# activation or optimizer state; Adam keeps two more copies. That is past most single
# accelerators, so the weights themselves must be split.

# %%
print(f"{7e9 * 4 / 2**30:.0f} GiB of weights, {3 * 7e9 * 4 / 2**30:.0f} GiB with Adam's two moments")

# %% [markdown]
# A **mesh** names the axes of a grid of devices: `{"x": 2, "y": 2}` is 4 devices, device `i`
# the `i`-th in row-major order. A **PartitionSpec** says, per array dimension, which mesh
# axes split it. XLA does not know axis names: `from_partition_spec` turns the spec into an
# `HloSharding`, printed as XLA prints it. `devices=[2,2]0,1,2,3` means "2 tiles along dim 0,
# 2 along dim 1, held by devices 0,1,2,3 in row-major order of the tiles". A mesh axis the spec
# does not use holds copies: it becomes a last, *replicated* tile dim.

# %%
mesh = {"x": 2, "y": 2}
specs = {"P('x', 'y')": P("x", "y"), "P('x')": P("x"), "P(None, 'y')": P(None, "y"),
         "P(('x', 'y'))": P(("x", "y")), "P()": P()}
shardings = {name: HloSharding.from_partition_spec(s, mesh, ndim=2) for name, s in specs.items()}
A = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
for name, s in shardings.items():
    print(f"{name:14} {str(s):55} tile {s.tile_shape(A.shape)}")

# %%
assert str(shardings["P('x', 'y')"]) == "{devices=[2,2]0,1,2,3}"
assert str(shardings["P('x')"]) == "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"
assert str(shardings["P(None, 'y')"]) == "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}"
assert str(shardings["P(('x', 'y'))"]) == "{devices=[4,1]0,1,2,3}" and str(shardings["P()"]) == "{replicated}"
assert HloSharding.parse("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}") == shardings["P('x')"]
assert shardings["P('x', 'y')"].tile_shape((8, 6)) == (4, 3)

# %% [markdown]
# `P(None, 'y')` lists its devices as `0,2,1,3`: the tile along dim 1 is the `y` coordinate,
# and devices 0 and 2 (`y = 0`) hold the same left half. `shard` cuts a global array into the
# per-device pieces; the picture colours each element of `A` (8 x 6) by the devices that hold it.

# %%
import matplotlib.patches as patches

fig, axes = plt.subplots(1, 4, figsize=(11, 2.6))
for ax, name in zip(axes, ["P('x', 'y')", "P('x')", "P(None, 'y')", "P(('x', 'y'))"]):
    s = shardings[name]
    th, tw = s.tile_shape(A.shape)
    holders = {}  # tile index -> the devices holding that tile
    for d in range(4):
        holders.setdefault(s.tile_index(d), []).append(d)
    for (r, c), devs in holders.items():
        ax.add_patch(patches.Rectangle((c * tw, r * th), tw, th, facecolor=plt.cm.Pastel1(devs[0]),
                                       edgecolor="black"))
        ax.text(c * tw + tw / 2, r * th + th / 2, "dev " + ",".join(map(str, devs)), ha="center", va="center",
                fontsize=8)
    ax.set_xlim(0, A.shape[1])
    ax.set_ylim(A.shape[0], 0)
    ax.set_aspect("equal")
    ax.set_title(f"{name}: tiles {th} x {tw}", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
fig.suptitle("an 8 x 6 array over a 2 x 2 mesh: which devices hold each tile", fontsize=10)
fig.tight_layout()

# %%
pieces = shard(A, shardings["P('x')"], 4)
assert [p.shape for p in pieces] == [(4, 6)] * 4
np.testing.assert_array_equal(pieces[0], pieces[1])   # devices 0 and 1 differ only in y: copies
np.testing.assert_array_equal(pieces[2], A[4:])

# %% [markdown]
# ## 2. Propagation: annotate the inputs, get every instruction
#
# The user annotates few arrays: here only the arguments of an MLP, the batch split over `x`
# and the hidden units over `y` (the first weight by columns, the second by rows).
# `propagate` lowers the function, sets those shardings on the parameters and runs
# `ShardingPropagation`: every instruction now prints with a `sharding=`.

# %%
def mlp(x, w1, w2):
    return mnp.tanh(x @ w1) @ w2


rng = np.random.default_rng(0)
x = rng.standard_normal((8, 4)).astype(np.float32)
w1 = rng.standard_normal((4, 6)).astype(np.float32)
w2 = rng.standard_normal((6, 3)).astype(np.float32)
in_specs = (P("x"), P(None, "y"), P("y", None))
annotated = propagate(mlp, mesh, in_specs, args=(x, w1, w2))
print(annotated)

# %%
dot1, tanh, dot2 = (i for i in annotated.entry.instructions if i.opcode in ("dot", "tanh"))
assert all("sharding" in i.attrs for i in annotated.entry.instructions)
assert str(dot1.attrs["sharding"]) == "{devices=[2,2]0,1,2,3}"   # batch over x, hidden over y
assert tanh.attrs["sharding"] == dot1.attrs["sharding"]
assert str(dot2.attrs["sharding"]) == "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"

# %% [markdown]
# Every rule is a **dimension map**: for an instruction and operand `k`, which operand dim
# each result dim comes from (`None`: from none). Forward propagation moves the operand's
# tiles along the map, backward propagation along its inverse.
#
# * **Elementwise** (`tanh`, `add`, ...): the identity map, so the result is sharded exactly
#   as its operand.
# * **`dot_general`**: the result's dims are the batch dims, then the lhs's free dims, then the
#   rhs's. From the lhs `x @ w1` keeps the rows (`[0, None]`), from the rhs the columns
#   (`[None, 1]`); the two candidates tile different dims consistently, so they are *merged*
#   (`{devices=[2,2]...}`). A contracting dim has no result dim: its tiles (`y` in the second
#   dot) fold into the replication group. Those devices then hold *partial sums*, which the
#   partitioner will all-reduce.

# %%
print("tanh:", dim_map(tanh, 0), "| dot1 lhs:", dim_map(dot1, 0), "rhs:", dim_map(dot1, 1),
      "| dot2 lhs:", dim_map(dot2, 0), "rhs:", dim_map(dot2, 1))
assert dim_map(tanh, 0) == [0, 1]
assert dim_map(dot1, 0) == [0, None] and dim_map(dot1, 1) == [None, 1]

# %% [markdown]
# The table of all rules is in the module docstring of `sharding_propagation.py` (and the
# README, "Sharding and multiple devices"): broadcast, transpose, reshape, reduce,
# convolution, slices, ... Parameters, the root's `out_specs` and `with_sharding_constraint`
# annotations are constraints: propagation never changes them.
#
# ## 3. Partitioning
#
# `partition` runs propagation, then `SpmdPartitioner`: each instruction gets its per-device
# shape and, where a device lacks data, a collective. `evaluate_partitioned` cuts the global
# arguments into shards, runs the program on every virtual device and reassembles the result.
#
# **Data parallelism.** The batch split over 4 devices, the weights replicated: each device
# runs the whole MLP on 2 rows. Nothing is exchanged.

# %%
data = {"data": 4}
dp = partition(mlp, data, (P("data"), P(), P()), P("data"), args=(x, w1, w2))
print(dp)
assert collective_bytes(dp) == []
want = minixla.jit(mlp)(x, w1, w2)
np.testing.assert_allclose(evaluate_partitioned(dp, x, w1, w2), want, rtol=1e-5, atol=1e-6)

# %% [markdown]
# A **training step** is different: each device's gradient is computed from its own rows
# only, and the update needs their sum. The gradient's weight dot contracts over the batch
# dim, which is sharded: a partial dot per device, then one `all-reduce` per weight (the
# listing leaves the constants out).

# %%
def loss(w1, w2, x, y):
    return mnp.mean((mnp.tanh(x @ w1) @ w2 - y) ** 2)


def step(w1, w2, x, y):
    g1, g2 = minixla.grad(loss, argnums=(0, 1))(w1, w2, x, y)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


y = rng.standard_normal((8, 3)).astype(np.float32)
train = partition(step, data, (P(), P(), P("data"), P("data")), (P(), P()), args=(w1, w2, x, y))
text = str(train)
print("\n".join(line for line in text[text.index("ENTRY"):].splitlines() if "constant(" not in line))
print(collective_bytes(train))

# %%
assert [op for op, _, _ in collective_bytes(train)] == ["all-reduce", "all-reduce"]
for got, ref in zip(evaluate_partitioned(train, w1, w2, x, y), minixla.jit(step)(w1, w2, x, y)):
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)

# %% [markdown]
# **Megatron's MLP** (Shoeybi et al. 2019) shards the model instead: `w1` by columns
# (column-parallel: each device computes some hidden units, `tanh` needs nothing else) and `w2`
# by rows (row-parallel: each device's dot is a partial sum over its hidden units). One
# `all-reduce` at the end, and it is the only collective.

# %%
model = {"model": 2}
meg = partition(mlp, model, (P(), P(None, "model"), P("model", None)), P(), args=(x, w1, w2))
text = str(meg)
print(text[text.index("ENTRY"):])
assert [op for op, _, _ in collective_bytes(meg)] == ["all-reduce"]
np.testing.assert_allclose(evaluate_partitioned(meg, x, w1, w2), want, rtol=1e-5, atol=1e-6)

# %% [markdown]
# Both at once on **8 virtual devices**: a 2 x 4 mesh, batch over `data`, hidden units over
# `model`. The all-reduce runs in 2 groups of 4 (`replica_groups`): the devices that hold the
# same rows.

# %%
mesh8 = {"data": 2, "model": 4}
w1_8 = rng.standard_normal((4, 8)).astype(np.float32)
w2_8 = rng.standard_normal((8, 3)).astype(np.float32)
two_d = partition(mlp, mesh8, (P("data"), P(None, "model"), P("model", None)), P("data"), args=(x, w1_8, w2_8))
ar, = [i for i in two_d.entry.instructions if i.opcode == "all-reduce"]
print(ar.name, ar.shape, "replica_groups:", ar.attrs["replica_groups"])
assert two_d.num_partitions == 8 and ar.attrs["replica_groups"] == ((0, 1, 2, 3), (4, 5, 6, 7))
np.testing.assert_allclose(evaluate_partitioned(two_d, x, w1_8, w2_8), minixla.jit(mlp)(x, w1_8, w2_8),
                           rtol=1e-5, atol=1e-6)

# %% [markdown]
# **A sharded contracting dim.** `x @ w` with the contracted dim (16) split over 2 devices:
# each device multiplies its half of the columns of `x` by its half of the rows of `w`, a
# *partial* product of the full shape, and an `all-reduce` adds the two. That is cheap when
# the result is small next to the operands. The partitioner weighs its options by the bytes
# their collectives move (the ring model of section 4): for a product whose result is larger
# than its operands, with the same annotations, it all-gathers the operands instead and
# computes the dot whole on every device.

# %%
contract = (P(None, "d"), P("d", None))
xk, wk = rng.standard_normal((2, 16)).astype(np.float32), rng.standard_normal((16, 3)).astype(np.float32)
partial = partition(lambda x, w: x @ w, {"d": 2}, contract, P(), args=(xk, wk))
text = str(partial)
print(text[text.index("ENTRY"):])
w = rng.standard_normal((4, 6)).astype(np.float32)
wide = partition(lambda x, w: x @ w, {"d": 2}, contract, P(), args=(x, w))
text = str(wide)
print(text[text.index("ENTRY"):])
print(collective_bytes(partial), collective_bytes(wide))

# %%
assert [op for op, _, _ in collective_bytes(partial)] == ["all-reduce"]
assert collective_bytes(partial)[0][2] == 2 * (2 - 1) / 2 * 2 * 3 * 4      # 2(n-1)/n of f32[2,3]
assert [op for op, _, _ in collective_bytes(wide)] == ["all-gather", "all-gather"]
assert sum(b for _, _, b in collective_bytes(wide)) < 2 * (2 - 1) / 2 * 8 * 6 * 4  # < all-reducing f32[8,6]
np.testing.assert_allclose(evaluate_partitioned(partial, xk, wk), xk @ wk, rtol=1e-5, atol=1e-5)
np.testing.assert_allclose(evaluate_partitioned(wide, x, w), x @ w, rtol=1e-5, atol=1e-5)

# %% [markdown]
# **Resharding.** When an instruction's sharding is not the one its user needs, the
# partitioner converts: tiled to replicated is an `all-gather`, one tiled dim to another an
# `all-to-all` (each device sends a piece of its tile to every other), replicated to tiled a
# `dynamic-slice` at an offset looked up by `partition-id` (no communication at all).

# %%
double = lambda a: a * 2  # noqa: E731
gather = partition(double, data, (P("data"),), P(), args=(x,))
a2a = partition(double, data, (P("data", None),), P(None, "data"), args=(x,))
cut = partition(double, data, (P(),), P("data"), args=(x,))
for m in (gather, a2a, cut):
    text = str(m)
    print(text[text.index("ENTRY"):])

# %%
assert [op for op, _, _ in collective_bytes(gather)] == ["all-gather"]
assert [op for op, _, _ in collective_bytes(a2a)] == ["all-to-all"]
assert collective_bytes(cut) == [] and "partition-id" in str(cut)
for m in (gather, a2a, cut):
    np.testing.assert_allclose(evaluate_partitioned(m, x), x * 2)

# %% [markdown]
# **Uneven shards.** 10 rows over 4 devices are tiles of 3 rows (`ceil(10 / 4)`); the last
# device holds one real row and two rows of padding. Elementwise ops may compute garbage in
# the padding, nobody reads it; but a reduction over the padded dim would add it, so the
# partitioner *masks* it first: an `iota` plus the device's row offset (from `partition-id`),
# compared with 10, selects the reducer's identity (0 for a sum) in the padding.

# %%
x10 = rng.standard_normal((10, 3)).astype(np.float32)
s10 = HloSharding.from_partition_spec(P("data"), data, 2)
print([p.shape for p in shard(x10, s10, 4)], "last device's real rows:", 10 - 3 * 3)
colsum = partition(lambda a: mnp.sum(a, axis=0), data, (P("data"),), P(), args=(x10,))
text = str(colsum)
print(text[text.index("ENTRY"):])

# %%
ops = [i.opcode for i in colsum.entry.instructions]
assert s10.tile_shape((10, 3)) == (3, 3)
assert {"iota", "partition-id", "compare", "select"} <= set(ops) and ops[-1] == "all-reduce"
np.testing.assert_allclose(evaluate_partitioned(colsum, x10), x10.sum(0), rtol=1e-5, atol=1e-6)

# %% [markdown]
# **On LLVM virtual devices.** The HLO evaluator above runs the devices in lockstep, one
# instruction at a time: the reference semantics. `minixla.backends.spmd.run_llvm` compiles the
# per-device program *once* to machine code and runs it on a mesh of virtual devices in this
# process: one thread and one arena per device, `partition-id` read from the device's table,
# each collective a generated function that meets the other devices at a barrier and copies
# between their buffers. Here the 2-D MLP, on 8 of them:

# %%
from minixla.backends.spmd import run_llvm

params = two_d.entry.parameters
per_arg = [shard(a, p.attrs["sharding"], 8) for a, p in zip((x, w1_8, w2_8), params)]
outs = run_llvm(two_d, 8, [[s[d] for s in per_arg] for d in range(8)])
print([o[0].shape for o in outs])
# device d holds rows (d // 4) of the result: 2 row blocks, each all-reduced over 4 devices
got = np.concatenate([outs[0][0], outs[4][0]])
np.testing.assert_allclose(got, evaluate_partitioned(two_d, x, w1_8, w2_8), rtol=1e-5, atol=1e-6)
assert all(np.array_equal(outs[d][0], outs[d - d % 4][0]) for d in range(8))  # same bits in a group

# %% [markdown]
# **From `jit`.** `minixla.jit(f, mesh=..., in_shardings=..., out_shardings=...,
# spmd_partitioner="minixla")` does all of this behind a call: trace, lower, partition, compile
# for the virtual LLVM mesh (by default; `backend="evaluator"` runs the reference,
# `backend="jax"` real JAX devices under `jax.shard_map`), cut the arguments into shards and
# reassemble the result. The mesh is a `jax.sharding.Mesh` or, without real devices, a
# `{name: size}` dict.

# %%
f = minixla.jit(mlp, mesh=model, in_shardings=(P(), P(None, "model"), P("model", None)), out_shardings=P(),
                spmd_partitioner="minixla")
np.testing.assert_allclose(f(x, w1, w2), jax.jit(lambda x, w1, w2: jnp.tanh(x @ w1) @ w2)(x, w1, w2),
                           rtol=1e-5, atol=1e-6)
print(f(x, w1, w2)[:2])

# %% [markdown]
# ## 4. What the collectives cost
#
# `collective_bytes` lists each collective with the bytes it moves per device under the model
# of a ring implementation, in a group of `n` devices: `all-reduce` 2(n-1)/n of its buffer (a
# reduce-scatter then an all-gather), `all-gather` (n-1)/n of its result, `reduce-scatter`
# (n-1)/n of its operand, `all-to-all` (n-1)/n, `collective-permute` all of it. The programs of
# `benchmarks/spmd.py`:

# %%
sys.path.insert(0, "..")  # (benchmarks/ is the repository's, next to tutorials/)
from benchmarks import spmd as bench

ours = {name: bench.minixla_collectives(name) for name in ("mlp data-parallel", "mlp megatron", "mlp 2d",
                                                            "mlp train step")}
for name, colls in ours.items():
    print(f"{name:18} {sum(b for _, _, b in colls):5.0f} bytes/device  {[op for op, _, _ in colls]}")
assert sum(b for _, _, b in ours["mlp megatron"]) == 2 * (2 - 1) / 2 * 8 * 3 * 4

# %% [markdown]
# **Next to XLA.** The same annotations, given to `jax.jit(..., in_shardings=...,
# out_shardings=...)` on 8 host CPU devices, make XLA's own SPMD partitioner run; its
# partitioned HLO (`.lower(...).compile().as_text()`) is read with the same byte model. JAX
# fixes the number of host devices when it starts, so this runs in a subprocess with
# `XLA_FLAGS=--xla_force_host_platform_device_count=8`.

# %%
script = """
import json
from benchmarks import spmd
print(json.dumps({n: spmd.xla_collectives(n) for n in %r}))
""" % (list(ours),)
root = pathlib.Path.cwd().parent
env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", PYTHONPATH=str(root))
t0 = time.perf_counter()
out = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True, check=True)
xla = json.loads(out.stdout.splitlines()[-1])
print(f"(XLA subprocess: {time.perf_counter() - t0:.1f} s)")
print(bench.format_table({n: {"minixla": ours[n], "xla": xla[n]} for n in ours}))

# %%
for name in ours:
    assert sum(b for _, _, b in ours[name]) == sum(b for _, _, b in xla[name]), name
(op, shape, _), = xla["mlp train step"]
assert op == "all-reduce" and shape.startswith("(")   # one all-reduce of a tuple

# %% [markdown]
# The same bytes on each; in the training step XLA *combines* the two gradient all-reduces
# into one all-reduce of a tuple (fewer, larger messages: the same bytes, less latency).
# `python -m benchmarks.spmd` prints the table for all its programs, with a transformer block,
# the CNN and ZeRO's sharded gradients (where minixla reduce-scatters and XLA:CPU all-reduces).
#
# ## 5. Exercise: two propagation rules
#
# minixla has no rule for `sort` (it falls in "anything else: replicated"), so sorting each
# row of a batch-sharded array gathers the whole array on every device, sorts it there, and
# cuts each device's rows back out:

# %%
sort_rows = lambda a: mnp.sort(a, axis=1)  # noqa: E731
gathered = partition(sort_rows, data, (P("data"),), P("data"), args=(x10,))
text = str(gathered)
print(text[text.index("ENTRY"):])
assert [op for op, _, _ in collective_bytes(gathered)] == ["all-gather"]

# %% [markdown]
# Write the dimension maps of `broadcast` (the built-in rule, rewritten: the test compares
# yours with it) and of `sort` (new: every dim but the sorted one maps through) in
# `tutorials/exercises/ch13_dim_maps.py`. `using_dim_map(opcode, rule)` installs a rule for the
# propagation pass and the partitioner, which both read `dim_map`. With a right `sort` rule
# the program above has no collective left. Check them with
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch13_dim_maps.py
# ```

# %%
from exercises import ch13_dim_maps

try:
    with using_dim_map("sort", ch13_dim_maps.sort_dim_map):
        local = partition(sort_rows, data, (P("data"),), P("data"), args=(x10,))
    print(collective_bytes(local))
    np.testing.assert_array_equal(evaluate_partitioned(local, x10), np.sort(x10, axis=1))
except NotImplementedError as e:
    print("not written yet:", e)

# %%
print(f"chapter executed in {time.perf_counter() - t_start:.1f} s")
