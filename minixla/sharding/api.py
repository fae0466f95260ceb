"""The jit-side sharding API: ``in_shardings``/``out_shardings`` trees, their checks, and the
device assignment of a sharded program (``jax/_src/pjit.py``'s ``_process_in_axis_resources``,
``check_aval_sharding`` and ``_get_and_check_device_assignment``).

A user writes JAX's objects -- ``jax.sharding.Mesh``, ``NamedSharding(mesh, PartitionSpec(...))``,
or a bare ``PartitionSpec`` under ``jax.set_mesh(mesh)`` -- and minixla turns each array's into
an ``HloSharding`` (``hlo_sharding.py``) over the program's *logical* devices ``0..n-1``: device
``i`` is the ``i``-th of the mesh's ``devices.flat``, the same numbering XLA gets from JAX. The
jax device ids behind those logical ids are the program's *device assignment*
(``module.config["device_assignment"]``), which the hand-off uses to run on the mesh.

What a lowered module carries (``annotate_module``, and the constraint's lowering rule), for
the backends and the SPMD passes:

* ``attrs["sharding"]`` (an ``HloSharding``) on each entry parameter given one, on the root
  (a tuple sharding when every output has one; never on a parameter returned as it is), and on
  each ``custom-call`` with ``custom_call_target="Sharding"`` (``with_sharding_constraint``);
* ``module.config``: ``device_assignment`` (jax device ids, logical order), ``num_partitions``,
  ``output_shardings`` (one ``HloSharding`` or None per output: the truth when a pass moved the
  root), ``user_shardings`` (the ``jax.sharding`` objects, so results carry the user's own).

Every check raises ``ShardingError`` (a ``ValueError``, as JAX's) naming the argument by its
pytree path and the mesh axis.
"""
from __future__ import annotations

import math

import numpy as np
from jax import tree_util

from minixla.sharding.hlo_sharding import HloSharding, ShardingError

__all__ = ["flatten_shardings", "flatten_out_shardings", "to_hlo_sharding", "to_jax_sharding",
           "device_put", "is_sharding", "mesh_axes", "check_mesh", "relabel", "constraint_sharding",
           "annotate_module", "constrain_call", "UNSPECIFIED"]


def _jax_sharding():
    import jax.sharding as js
    return js


def _mesh_devices(mesh):
    """A concrete mesh's device array, or None for an ``AbstractMesh`` (no devices)."""
    if isinstance(mesh, _jax_sharding().AbstractMesh):
        return None
    devices = getattr(mesh, "devices", None)
    return devices if isinstance(devices, np.ndarray) else None


def is_sharding(x) -> bool:
    """A ``jax.sharding.Sharding`` or a ``PartitionSpec`` (a leaf of a shardings tree)."""
    js = _jax_sharding()
    return isinstance(x, (js.Sharding, js.PartitionSpec))


def _context_mesh():
    """The mesh of ``jax.set_mesh(mesh)`` / ``with mesh:``, or None."""
    try:
        from jax._src import mesh as mesh_lib
    except ImportError:  # pragma: no cover - another JAX layout
        return None
    for get in (lambda: mesh_lib.get_concrete_mesh(),
                lambda: mesh_lib.thread_resources.env.physical_mesh):
        try:
            m = get()
        except Exception:  # noqa: BLE001 (an older or newer JAX without that accessor)
            continue
        if m is not None and not getattr(m, "empty", False) and getattr(m, "shape", None):
            return m
    return None


def mesh_axes(mesh) -> dict:
    """``{axis name: size}`` of a ``Mesh`` or ``AbstractMesh``, in the mesh's axis order."""
    return {name: int(size) for name, size in zip(mesh.axis_names, mesh.axis_sizes)} \
        if hasattr(mesh, "axis_sizes") else {n: int(s) for n, s in dict(mesh.shape).items()}


def _named(sharding, where: str):
    """``sharding`` as ``(mesh, spec)``: a ``NamedSharding``, a bare ``PartitionSpec`` over the
    context mesh, or a ``SingleDeviceSharding`` (a one-device mesh). Raises ``ShardingError``."""
    js = _jax_sharding()
    if isinstance(sharding, js.PartitionSpec):
        mesh = _context_mesh()
        if mesh is None:
            raise ShardingError(
                f"{where}: a PartitionSpec {sharding} needs a mesh: pass "
                "jax.sharding.NamedSharding(mesh, spec), or call under jax.set_mesh(mesh) "
                "(as jax.jit requires)")
        return mesh, sharding
    if isinstance(sharding, js.NamedSharding):
        return sharding.mesh, sharding.spec
    if isinstance(sharding, js.SingleDeviceSharding):
        (device,) = sharding.device_set
        return js.Mesh(np.array([device]), ("_single",)), js.PartitionSpec()
    raise ShardingError(f"{where}: minixla takes NamedSharding, SingleDeviceSharding or "
                        f"PartitionSpec, got {type(sharding).__name__} {sharding}")


def check_mesh(mesh, where: str = "mesh", need_devices: bool = False) -> None:
    """The mesh must name each device once; an ``AbstractMesh`` (no devices) is accepted only
    when ``need_devices`` is false (annotations for a one-device run), and never with more
    devices than this process has when it must run. Raises ``ShardingError``."""
    import jax
    devices = _mesh_devices(mesh)
    size = math.prod(mesh_axes(mesh).values())
    if devices is None:  # an AbstractMesh
        if need_devices:
            have = jax.device_count()
            more = (f"; it has {size} devices and this process has {have} "
                    "(XLA_FLAGS=--xla_force_host_platform_device_count=N makes N CPU devices)"
                    if size > have else "")
            raise ShardingError(f"{where}: an AbstractMesh {dict(mesh_axes(mesh))} has no devices "
                                f"to run on: make a jax.sharding.Mesh (jax.make_mesh){more}")
        return
    ids = [d.id for d in devices.flat]
    if len(set(ids)) != len(ids):
        raise ShardingError(
            f"{where}: the mesh {dict(mesh_axes(mesh))} has {len(ids)} positions but only "
            f"{len(set(ids))} distinct devices (a device may appear once; this process has "
            f"{jax.device_count()} devices)")


def to_hlo_sharding(sharding, shape, where: str, check_divisible: bool = True) -> HloSharding:
    """The ``HloSharding`` of an array of ``shape`` under ``sharding`` (``NamedSharding``,
    ``SingleDeviceSharding``, or a ``PartitionSpec`` over the context mesh), its device ids the
    positions in the mesh's ``devices.flat``.

    Raises ``ShardingError`` naming ``where`` (e.g. ``"in_shardings of argument x['w']"``):
    a spec longer than the rank, an unknown mesh axis, an axis used twice, or (with
    ``check_divisible``, as JAX for ``in_shardings``/``out_shardings``/``device_put``) a dimension
    that its mesh axes do not divide evenly."""
    mesh, spec = _named(sharding, where)
    axes = mesh_axes(mesh)
    ndim = len(shape)
    entries = tuple(spec)
    if len(entries) > ndim:
        raise ShardingError(
            f"{where}: PartitionSpec {spec} is only valid for values of rank at least "
            f"{len(entries)}, but was applied to a value of rank {ndim} (shape {tuple(shape)})")
    for d, e in enumerate(entries):
        names = () if e is None else ((e,) if isinstance(e, str) else tuple(e))
        for a in names:
            if a not in axes:
                raise ShardingError(f"{where}: mesh axis {a!r} of PartitionSpec {spec} is not "
                                    f"found in the mesh axes {tuple(axes)}")
        parts = math.prod(axes[a] for a in names)
        if check_divisible and parts > 1 and shape[d] % parts:
            raise ShardingError(
                f"{where}: PartitionSpec {spec} splits array dimension {d} (size {shape[d]}, "
                f"shape {tuple(shape)}) {parts} ways over mesh axes {names}, which does not divide "
                "it evenly (jax.jit requires every dimension to be divisible by its mesh axes)")
    try:
        return HloSharding.from_partition_spec(spec, axes, ndim)
    except ShardingError as e:
        raise ShardingError(f"{where}: {e}") from None


def _keyed_children(node):
    """One level of a pytree node: ``(treedef of this level, [(key, child)])``."""
    children = tree_util.tree_flatten_with_path(node, is_leaf=lambda y: y is not node)[0]
    level = tree_util.tree_structure(node, is_leaf=lambda y: y is not node)
    return level, [(path[0], child) for path, child in children]


def _broadcast(prefix, full, path, sname, out):
    """Append ``(path of each leaf of full, its sharding)``: ``prefix`` is a tree prefix of
    ``full`` whose leaves (a sharding or ``None``) apply to every array of their subtree."""
    if prefix is None or is_sharding(prefix):
        for leaf_path, _ in tree_util.tree_flatten_with_path(full)[0]:
            out.append((path + leaf_path, prefix))
        return
    p_level, p_children = _keyed_children(prefix)
    f_level, f_children = _keyed_children(full)
    if p_level != f_level:
        where = sname + tree_util.keystr(path)
        raise ShardingError(
            f"{where} must be a tree prefix of the arguments: at {where} the shardings have "
            f"{_describe_level(prefix, p_children)} but the argument has "
            f"{_describe_level(full, f_children)}")
    for (key, p), (_, f) in zip(p_children, f_children):
        _broadcast(p, f, path + (key,), sname, out)


def _describe_level(node, children) -> str:
    if not children and tree_util.all_leaves([node]):
        return f"a leaf ({type(node).__name__})"
    keys = [tree_util.keystr((k,)) for k, _ in children]
    return f"a {type(node).__name__} with entries {keys}"


def flatten_shardings(shardings, dyn_args, arg_names, what: str = "in_shardings") -> list:
    """``[(argument path, sharding or None)]`` per array leaf of the positional ``dyn_args``:
    ``shardings`` is one sharding (applies to every array), ``None`` (unconstrained), or a tree
    prefix of the positional arguments tuple (a list reads as a tuple), as ``jax.jit``'s
    ``in_shardings``. ``arg_names`` names the positional parameters for messages. Raises
    ``ShardingError`` for a tuple of the wrong length or a subtree that does not match."""
    if isinstance(shardings, list):
        shardings = tuple(shardings)
    if isinstance(shardings, tuple) and len(shardings) != len(dyn_args):
        raise ShardingError(
            f"jit {what} specification must be a tree prefix of the positional arguments "
            f"tuple: a sharding, None, or a tuple of length equal to the number of positional "
            f"arguments; got a tuple of length {len(shardings)} for {len(dyn_args)} positional "
            f"arguments {tuple(arg_names[:len(dyn_args)])}")
    out = []
    if isinstance(shardings, tuple):
        for i, (s, a) in enumerate(zip(shardings, dyn_args)):
            name = arg_names[i] if i < len(arg_names) else f"args[{i}]"
            sub = []
            _broadcast(s, a, (), f"{what}[{i}]", sub)
            out += [(name + tree_util.keystr(p), sh) for p, sh in sub]
    else:
        sub = []
        _broadcast(shardings, tuple(dyn_args), (), what, sub)
        for p, sh in sub:
            i = p[0].idx
            name = arg_names[i] if i < len(arg_names) else f"args[{i}]"
            out.append((name + tree_util.keystr(p[1:]), sh))
    return out


def flatten_out_shardings(shardings, out_tree_leaf_paths) -> list:
    """``[sharding or None]`` per output leaf: ``shardings`` is a sharding, ``None`` or a tree
    prefix of the output pytree (``out_tree_leaf_paths``: the output value itself)."""
    if isinstance(shardings, list):
        shardings = tuple(shardings)
    sub = []
    _broadcast(shardings, out_tree_leaf_paths, (), "out_shardings", sub)
    return [("output" + tree_util.keystr(p), s) for p, s in sub]


def relabel(hlo: HloSharding, sharding, assignment) -> HloSharding:
    """``hlo`` (device ids = positions in ``sharding``'s mesh) renumbered as positions in
    ``assignment`` (the program's device ids), for a sharding over a second arrangement of the
    same devices."""
    if assignment is None or not hlo.is_tiled:
        return hlo
    mesh, _ = _named(sharding, "")
    if _mesh_devices(mesh) is None:
        return hlo
    ids = [d.id for d in mesh.devices.flat]
    if tuple(ids) == tuple(assignment):
        return hlo
    pos = {dev: i for i, dev in enumerate(assignment)}
    ta = np.vectorize(lambda k: pos[ids[k]])(hlo.tile_assignment)
    return HloSharding.tile(ta, hlo.last_tile_dim_replicate)


def to_jax_sharding(hlo: HloSharding, devices, user=None, *others):
    """A ``jax.sharding.NamedSharding`` equal to ``hlo`` over ``devices`` (the program's logical
    devices, in order): ``user`` (the sharding the user wrote) when its mesh lists the devices in
    that order, else one on a mesh of exactly ``devices`` in that order (``jax.jit`` requires all
    shardings of a program to list their devices in one order), found by factoring the tile
    assignment as a transposed iota (``_mesh_of_tile_assignment``). Raises ``ShardingError``
    for a tile assignment no mesh gives."""
    js = _jax_sharding()
    ids = tuple(d.id for d in devices)
    in_order = [u for u in (user, *others) if isinstance(u, js.NamedSharding)
                and _mesh_devices(u.mesh) is not None
                and tuple(d.id for d in u.mesh.devices.flat) == ids]
    if in_order and in_order[0] is user:
        return user
    devices = np.asarray(list(devices), dtype=object)
    if hlo.kind == "maximal":
        return js.SingleDeviceSharding(devices[hlo.devices[0]])
    if hlo.kind == "replicated":  # (on the user's mesh when there is one: one mesh per program)
        mesh = in_order[0].mesh if in_order else js.Mesh(devices, ("replicas",))
        return js.NamedSharding(mesh, js.PartitionSpec())
    if hlo.kind != "tiled":
        raise ShardingError(f"no jax sharding for {hlo} (a tuple sharding is per element)")
    shape, names, spec = _mesh_of_tile_assignment(hlo)
    return js.NamedSharding(js.Mesh(devices.reshape(shape), names), js.PartitionSpec(*spec))


def _primes(n: int) -> list:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def _mesh_of_tile_assignment(hlo: HloSharding):
    """``(mesh shape, axis names, spec)`` of a NamedSharding whose tile assignment is ``hlo``'s,
    on a mesh of the logical devices in order. Each tile dimension is split into prime factors;
    a transposed iota is linear in those factors' indices with mixed-radix strides, and the
    strides, largest first, order the mesh axes (XLA's "iota tile assignment" form)."""
    fine, owner = [], []
    for j, t in enumerate(hlo.tile_dims):
        for p in _primes(int(t)):
            fine.append(p)
            owner.append(j)
    ta = hlo.tile_assignment.reshape(fine)
    unit = lambda k: tuple(1 if i == k else 0 for i in range(len(fine)))
    strides = [int(ta[unit(k)]) - int(ta.flat[0]) for k in range(len(fine))]
    idx = np.indices(fine)
    linear = int(ta.flat[0]) == 0 and np.array_equal(
        ta, sum((idx[k] * strides[k] for k in range(len(fine))), np.zeros(fine, np.int64)))
    order = sorted(range(len(fine)), key=lambda k: -strides[k])  # major (largest stride) first
    step = 1
    for k in reversed(order):
        linear = linear and strides[k] == step
        step *= fine[k]
    if not linear:
        raise ShardingError(f"sharding {hlo}: its tile assignment is not a mesh's (no transposed iota)")
    names = {k: f"d{k}" for k in range(len(fine))}
    spec = []
    for j in range(len(hlo.num_tiles)):
        axes = tuple(names[k] for k in range(len(fine)) if owner[k] == j)
        spec.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return [fine[k] for k in order], tuple(names[k] for k in order), spec


def device_put(x, device=None):
    """Place ``x`` (an array or a pytree of arrays) on ``device`` (``jax.device_put``): a
    ``jax.Device``, a ``NamedSharding``/``SingleDeviceSharding``, a ``PartitionSpec`` under
    ``jax.set_mesh``, or a pytree prefix of ``x`` of those. Returns ``jax.Array`` s whose
    ``.sharding`` is the one asked for (each device holds its shard); ``minixla.jit(...,
    backend="jax")`` takes them without a copy to the host.

    Raises ``ShardingError`` (``ValueError``) naming the leaf for a spec longer than its rank,
    an unknown mesh axis, or a dimension not divisible by its mesh axes (as JAX)."""
    import jax
    js = _jax_sharding()
    if device is None or isinstance(device, jax.Device):
        return jax.device_put(x, device)
    pairs = []
    _broadcast(device, x, (), "device_put", pairs)
    leaves, treedef = tree_util.tree_flatten(x)
    out = []
    for (path, s), leaf in zip(pairs, leaves):
        if s is None:
            out.append(jax.device_put(leaf))
            continue
        where = f"device_put of x{tree_util.keystr(path)}"
        mesh, spec = _named(s, where)
        check_mesh(mesh, where, need_devices=True)
        to_hlo_sharding(s, np.shape(leaf), where)  # (the checks, with minixla's messages)
        out.append(jax.device_put(leaf, s if isinstance(s, js.Sharding) else js.NamedSharding(mesh, spec)))
    return tree_util.tree_unflatten(treedef, out)


def _merge_assignment(module, sharding, where: str, need_devices: bool = False):
    """The program's device assignment once ``sharding``'s mesh joins it: the first concrete
    mesh sets ``module.config["device_assignment"]``; a later one must hold the same devices.
    Raises ``ShardingError``."""
    mesh, _ = _named(sharding, where)
    check_mesh(mesh, where, need_devices)
    devices = _mesh_devices(mesh)
    if devices is None:
        return module.config.get("device_assignment")
    ids = tuple(d.id for d in devices.flat)
    have = module.config.get("device_assignment")
    if have is None:
        module.config["device_assignment"] = ids
        module.config["num_partitions"] = len(ids)
        return ids
    if sorted(have) != sorted(ids):
        raise ShardingError(f"Received incompatible devices for jitted computation: {where} is on "
                            f"devices {list(ids)} but the program runs on devices {list(have)}")
    return have


def constraint_sharding(module, sharding, shape) -> HloSharding:
    """The ``HloSharding`` of a ``with_sharding_constraint`` in ``module`` (its lowering rule),
    over the program's device assignment."""
    where = "with_sharding_constraint"
    hlo = to_hlo_sharding(sharding, shape, where, check_divisible=False)
    return relabel(hlo, sharding, _merge_assignment(module, sharding, where))


def annotate_module(module, in_shardings, out_shardings, dyn_args, arg_names, out_tree,
                    backend: str, has_kwargs: bool) -> None:
    """Put ``jit``'s ``in_shardings``/``out_shardings`` on the lowered ``module``: an
    ``HloSharding`` as ``attrs["sharding"]`` of each entry parameter with one and of the root
    (a tuple sharding when every output has one), ``module.config["output_shardings"]`` (one
    per output, None = unconstrained) and the device assignment. ``UNSPECIFIED`` (a sentinel)
    means the argument was not given. Raises ``ShardingError`` as ``jax.jit`` would."""
    entry = module.entry
    need = backend == "jax"
    if in_shardings is not UNSPECIFIED:
        if has_kwargs:
            raise ShardingError("jit does not support keyword arguments when in_shardings is "
                                "specified (as jax.jit): pass them positionally")
        pairs = flatten_shardings(in_shardings, dyn_args, arg_names)
        params = entry.parameters
        assert len(params) == len(pairs), (len(params), len(pairs))
        for p, (name, s) in zip(params, pairs):
            if s is None:
                continue
            where = f"in_shardings of argument {name}"
            hlo = to_hlo_sharding(s, p.shape.dims, where)
            p.attrs["sharding"] = relabel(hlo, s, _merge_assignment(module, s, where, need))
            module.config.setdefault("user_shardings", {})[("parameter", p.parameter_number)] = s
    if out_shardings is not UNSPECIFIED:
        outs = tree_util.tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
        pairs = flatten_out_shardings(out_shardings, outs)
        root = entry.root
        shapes = [o.shape for o in root.operands] if root.opcode == "tuple" else [root.shape]
        hlos = []
        for shape, (name, s) in zip(shapes, pairs):
            if s is None:
                hlos.append(None)
                continue
            where = f"out_shardings of {name}"
            hlo = to_hlo_sharding(s, shape.dims, where)
            hlos.append(relabel(hlo, s, _merge_assignment(module, s, where, need)))
            module.config.setdefault("user_shardings", {})[("output", len(hlos) - 1)] = s
        module.config["output_shardings"] = hlos
        # (a parameter returned as it is keeps its own, input, sharding: the output's is in
        # the config, and the hand-off asks XLA for it)
        if all(h is not None for h in hlos) and root.opcode != "parameter":
            root.attrs["sharding"] = (HloSharding.tuple_of(hlos) if root.opcode == "tuple" else hlos[0])


class _Unspecified:
    """``in_shardings``/``out_shardings`` not given (JAX's ``UNSPECIFIED``)."""

    def __repr__(self):
        return "UNSPECIFIED"


UNSPECIFIED = _Unspecified()


def constrain_call(fun, in_shardings, out_shardings):
    """``fun`` with its positional arguments and its results passed through
    ``with_sharding_constraint`` (``in_shardings``/``out_shardings`` prefixes; ``UNSPECIFIED`` or
    a ``None`` leaf leaves them as they are): what a ``jit`` with shardings means inside another
    trace (JAX's nested ``pjit``)."""
    import functools

    @functools.wraps(fun)
    def constrained(*args, **kwargs):
        from minixla.lax.sharding import with_sharding_constraint
        if in_shardings is not UNSPECIFIED:
            if kwargs:
                raise ShardingError("jit does not support keyword arguments when in_shardings is "
                                    "specified (as jax.jit): pass them positionally")
            spec = tuple(in_shardings) if isinstance(in_shardings, (list, tuple)) else in_shardings
            if isinstance(spec, tuple) and len(spec) != len(args):
                flatten_shardings(spec, args, [])  # (raises the tree-prefix error)
            args = with_sharding_constraint(tuple(args), spec)
        out = fun(*args, **kwargs)
        if out_shardings is not UNSPECIFIED:
            spec = tuple(out_shardings) if isinstance(out_shardings, list) else out_shardings
            out = with_sharding_constraint(out, spec)
        return out
    return constrained
