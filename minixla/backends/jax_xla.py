"""The hand-off backend: replay an optimized ``HloModule`` as ``jax.lax`` calls under ``jax.jit``.

Real XLA then compiles it for whatever device JAX runs on (CPU, GPU or TPU). Each HLO opcode
maps to the ``jax.lax`` function with the same semantics (``jax_rules``); a ``fusion`` is
replayed by evaluating its fused computation inline, so XLA sees the same dataflow and is
free to fuse it again its own way.

XLA's whole-program rewrites. JAX eager, the reference, compiles one op at a time, so XLA's
AlgebraicSimplifier ("algsimp") never sees two ops together; the hand-off gives XLA the whole
program, and there algsimp rewrites compositions as if over the reals: ``log(exp(x))`` to ``x``
(89.0 where eager overflows to inf), ``exp(a)*exp(b)`` to ``exp(a+b)`` (1.0 where eager has
``inf*0 = NaN``), ``exp(a)/exp(b)``, ``sqrt(abs(x*x))`` to ``abs(x)``, ``abs(x*x)`` to ``x*x``
for a signed integer (a square is assumed non-negative; eager wraps), nested dynamic slices
merged without their clamps, a reshape moved across a dynamic-update-slice so that XLA:CPU's
in-place update reads what it has just written. Each is a public report (openxla/xla#45560,
#49176, #49121; jax-ml/jax#38099, #37919, #40849; tensorflow/tensorflow#123169, #117142) that
reproduces on jax 0.10's XLA:CPU, and a pass dump (``--xla_dump_hlo_pass_re=.*``) of the
hand-off's programs shows algsimp making them, in the fixed-point "simplification" pipeline
before layout assignment. So every op's result goes through ``lax.optimization_barrier``
(``OP_BARRIERS``): algsimp then matches no pattern that spans two ops, and rewrites each op
alone, exactly as it does for eager's one-op programs (a lone ``dot`` is canonicalized the
same way: turning algsimp off instead, ``xla_disable_hlo_passes=algsimp``, also stops the class
but made vector and degenerate-dim dots differ from eager and the attention benchmark 1.35x
slower). XLA's OptimizationBarrierExpander removes the barriers before layout assignment, so
fusion and code generation see the program as before (the cost, measured by ``python -m
benchmarks.handoff_passes``, is in the README: "The JAX hand-off backend"); the algsimp run
after layout assignment visits only the computations outside fusions. What the barriers
cannot stop is below the HLO: LLVM, hence the hidden run-time arguments (constants, a 1.0 per
float product) and ``xla_allow_excess_precision=false``. ``minixla/fuzz/rewrites.py`` builds
exactly these compositions at their overflow and wraparound bounds and checks the hand-off
against eager bit for bit.
"""
from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from minixla.core import errors
from minixla.hlo.lowering import parse_dim_labels

#: HLO opcode -> fn(instr, *operand_values) -> value
jax_rules: dict = {}

_SIMPLE = {
    "add": lax.add, "subtract": lax.sub, "multiply": lax.mul, "divide": lax.div,
    "maximum": lax.max, "minimum": lax.min, "and": lax.bitwise_and, "or": lax.bitwise_or,
    "negate": lax.neg, "abs": lax.abs, "sign": lax.sign, "floor": lax.floor, "ceil": lax.ceil,
    "exponential": lax.exp, "log": lax.log, "tanh": lax.tanh, "logistic": lax.logistic,
    "sqrt": lax.sqrt, "rsqrt": lax.rsqrt, "not": lax.bitwise_not, "power": lax.pow,
}
for _op, _fn in _SIMPLE.items():
    jax_rules[_op] = (lambda fn: lambda instr, *xs: fn(*xs))(_fn)

_COMPARE = {"EQ": lax.eq, "NE": lax.ne, "LT": lax.lt, "LE": lax.le, "GT": lax.gt, "GE": lax.ge}
jax_rules["compare"] = lambda instr, a, b: _COMPARE[instr.attrs["direction"]](a, b)
jax_rules["select"] = lambda instr, p, t, f: lax.select(p, t, f)


# (XLA rewrites `x * convert(pred)` to `select(pred, x, 0)`, 0 for x = inf where eager gives
# NaN: the barrier on every op's result, OP_BARRIERS, keeps the multiply a multiply)
jax_rules["convert"] = lambda instr, x: lax.convert_element_type(x, instr.shape.dtype)
jax_rules["broadcast"] = lambda instr, x: lax.broadcast_in_dim(x, instr.shape.dims, instr.attrs["dimensions"])
jax_rules["reshape"] = lambda instr, x: lax.reshape(x, instr.shape.dims)
jax_rules["transpose"] = lambda instr, x: lax.transpose(x, instr.attrs["dimensions"])
jax_rules["slice"] = lambda instr, x: lax.slice(x, *map(list, zip(*instr.attrs["slice"]))) \
    if instr.attrs["slice"] else x
jax_rules["iota"] = lambda instr: lax.broadcasted_iota(instr.shape.dtype, instr.shape.dims,
                                                      instr.attrs["iota_dimension"])
# Constants are run-time arguments of the executable (see "Hidden arguments" below).
jax_rules["constant"] = lambda instr: _hidden_value(instr, lambda: jnp.asarray(instr.literal))
jax_rules["tuple"] = lambda instr, *xs: tuple(xs)

_REDUCERS = {"add": lax.add, "maximum": lax.max, "minimum": lax.min}


def _reduce(instr, x, init):
    reducer = _REDUCERS[instr.called[0].root.opcode]
    return lax.reduce(x, init, reducer, instr.attrs["dimensions"])


jax_rules["reduce"] = _reduce


def _dot(instr, a, b):
    a_ = instr.attrs
    dn = ((a_["lhs_contracting_dims"], a_["rhs_contracting_dims"]), (a_["lhs_batch_dims"], a_["rhs_batch_dims"]))
    # The default precision, as JAX eager uses it: on a GPU that is TF32-class for float32 dots
    # (an error ~1e-2 on a 128-long sum where HIGHEST gives ~1e-5), and eager is the reference.
    return lax.dot_general(a, b, dn, preferred_element_type=instr.shape.dtype)


jax_rules["dot"] = _dot


def _conv(instr, lhs, rhs):
    w = instr.attrs["window"]
    dn = lax.ConvDimensionNumbers(*parse_dim_labels(instr.attrs["dim_labels"]))
    return lax.conv_general_dilated(lhs, rhs, w["stride"], w["pad"], w["lhs_dilate"], w["rhs_dilate"],
                                    dimension_numbers=dn,
                                    feature_group_count=instr.attrs.get("feature_group_count", 1),
                                    preferred_element_type=instr.shape.dtype)


jax_rules["convolution"] = _conv
jax_rules["fusion"] = lambda instr, *xs: evaluate_computation(instr.fused_computation, xs)


def evaluate_computation(comp, args):
    """Evaluate ``comp`` on ``args`` (one per parameter) with ``jax.lax``; returns the root's value."""
    env = {}
    for instr in comp.instructions:
        if instr.opcode == "parameter":
            env[instr] = args[instr.parameter_number]
            continue
        rule = jax_rules.get(instr.opcode)
        if rule is None:
            raise errors.UnsupportedError(f"jax backend: no rule for HLO opcode '{instr.opcode}'")
        value = rule(instr, *[env[o] for o in instr.operands])
        if instr.opcode == "multiply" and jnp.issubdtype(value.dtype, jnp.inexact):
            one = _hidden_value(("one", np.dtype(value.dtype)), lambda: None)
            value = value if one is None else jnp.multiply(value, one)
        if OP_BARRIERS and instr.opcode not in _NO_BARRIER and getattr(_hidden, "values", None) is not None:
            value = lax.optimization_barrier(value)
        env[instr] = value
    return env[comp.root]


#: Whether every op's result goes through ``lax.optimization_barrier`` while a JaxExecutable
#: traces (see "XLA's whole-program rewrites" in the module docstring). Not on what only
#: regroups values (tuples), on a fusion's or a loop's result (the ops inside have theirs) or
#: on a constant (a hidden run-time argument already).
OP_BARRIERS = True
_NO_BARRIER = {"tuple", "get-tuple-element", "fusion", "constant", "while", "conditional", "opt-barrier"}


# Hidden arguments. XLA sees the whole program, and rewrites that JAX eager (one op at a time)
# never sees change bits, so the hand-off passes XLA values it cannot look into:
# * every constant is a run-time argument: XLA would fold `0.0 + x` to `x` (wrong for -0.0)
#   and `x / C` to `x * (1/C)`, and LLVM would fold `x - 0.0` to `x` (keeping a subnormal x
#   that eager flushes);
# * every float product is multiplied by a run-time 1.0: XLA lets LLVM contract `a * b + c`
#   into one FMA ("always allow FMA fusion" on CPU; no flag turns it off), rounding once where
#   eager rounds twice -- x*x + x differed in a third of random float32 inputs. LLVM may still
#   contract the product with the add, but as fma(round(a*b), 1.0, c) = round(round(a*b) + c).
_hidden = threading.local()


def _hidden_value(key, otherwise):
    """The traced hidden argument for ``key`` while a JaxExecutable traces, else ``otherwise()``."""
    values = getattr(_hidden, "values", None)
    return values[key] if values is not None else otherwise()


def _hidden_arguments(module) -> list:
    """``[(key, value)]``: every constant of ``module``, then a 1.0 per float dtype multiplied."""
    instrs = [i for c in module.computations for i in c.instructions]
    constants = [(i, np.asarray(i.literal)) for i in instrs if i.opcode == "constant"]
    products = {np.dtype(i.shape.dtype) for i in instrs if i.opcode == "multiply"
                and jnp.issubdtype(i.shape.dtype, jnp.inexact)}
    fmas = {np.dtype(i.shape.dtype) for i in instrs if i.opcode == "fma"}
    return (constants + [(("one", dt), np.ones((), dt)) for dt in sorted(products, key=str)]
            + [(("negzero", dt), np.asarray(-0.0, dt)) for dt in sorted(fmas, key=str)])


#: XLA debug options for every compile (xla/debug_options_flags.cc).
COMPILER_OPTIONS = {"xla_allow_excess_precision": False}


class JaxExecutable:
    """A module compiled by real XLA through ``jax.jit``. Call with numpy arrays; returns a list.

    A sharded module (``module.config["device_assignment"]``, set by ``jit(in_shardings=...,
    out_shardings=...)`` or a ``with_sharding_constraint``) runs on those devices: its
    parameters' ``sharding`` and ``config["output_shardings"]`` become ``jax.jit``'s
    ``in_shardings``/``out_shardings`` (``minixla.sharding.api.to_jax_sharding``), each "Sharding"
    custom-call a ``jax.lax.with_sharding_constraint``, and XLA's SPMD partitioner does the
    rest. It takes ``jax.Array`` s as they are (``takes_device_arrays``; one laid out otherwise
    is moved to the compiled sharding) and returns ``jax.Array`` s with the output shardings.
    """

    def __init__(self, module):
        self.module = module
        entry = module.entry
        self.n_outputs = len(entry.root.operands) if entry.root.opcode == "tuple" else 1

        n = len(entry.parameters)
        hidden = _hidden_arguments(module)
        devices = _program_devices(module)
        self.takes_device_arrays = devices is not None
        if devices is None:
            in_shardings = out_shardings = None
            self._hidden = [jax.device_put(value) for _, value in hidden]  # (on the device once)
        else:
            from minixla.sharding.api import to_jax_sharding
            from minixla.sharding.hlo_sharding import HloSharding
            user = module.config.get("user_shardings", {})  # (what the user wrote, if in this device order)
            replicated = to_jax_sharding(HloSharding.replicate(), devices, None, *user.values())
            # (an argument without a sharding is replicated, as jax.jit's in_shardings=None)
            in_shardings = [replicated if "sharding" not in p.attrs else
                            to_jax_sharding(p.attrs["sharding"], devices, user.get(("parameter", k)))
                            for k, p in enumerate(entry.parameters)] + [replicated] * len(hidden)
            outs = module.config.get("output_shardings") or [None] * self.n_outputs
            out_shardings = [None if h is None else to_jax_sharding(h, devices, user.get(("output", k)))
                             for k, h in enumerate(outs)]
            self._hidden = [jax.device_put(value, replicated) for _, value in hidden]

        def run(*args):
            _hidden.values = {key: a for (key, _), a in zip(hidden, args[n:])}
            _hidden.devices = devices
            try:
                out = evaluate_computation(entry, args[:n])
            finally:
                _hidden.values = _hidden.devices = None
            return list(out) if entry.root.opcode == "tuple" else [out]
        specs = [jax.ShapeDtypeStruct(p.shape.dims, p.shape.dtype) for p in entry.parameters]
        specs += [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in self._hidden]
        t0 = time.perf_counter()
        # XLA keeps f16/bf16 intermediates of a fusion in f32 unless told not to; JAX eager rounds
        # after every op, and so do we (a bf16 square then + f32 gave 251.5 instead of 251.25).
        jitted = jax.jit(run) if devices is None else jax.jit(run, in_shardings=in_shardings,
                                                               out_shardings=out_shardings)
        self._compiled = jitted.lower(*specs).compile(COMPILER_OPTIONS)
        self.compile_ms = (time.perf_counter() - t0) * 1e3
        #: the shardings XLA compiled each argument for (None for a one-device program)
        self.input_shardings = list(self._compiled.input_shardings[0])[:n] if devices is not None else None
        self._specified = ["sharding" in p.attrs for p in entry.parameters]

    def __call__(self, *args):
        if self.input_shardings is None:
            return [np.asarray(x) for x in self._compiled(*args, *self._hidden)]
        placed = []
        for k, (a, s) in enumerate(zip(args, self.input_shardings)):
            if isinstance(a, jax.Array) and a.sharding.is_equivalent_to(s, a.ndim):
                placed.append(a)
                continue
            if isinstance(a, jax.Array) and getattr(a, "_committed", False) and self._specified[k]:
                from minixla.sharding.hlo_sharding import ShardingError
                raise ShardingError(  # (as jax.jit: a committed array is not moved behind your back)
                    f"Sharding passed to jit does not match the sharding on the respective arg: "
                    f"flat argument {k} ({a.dtype}{list(a.shape)}) is laid out as {a.sharding}, the "
                    f"program was compiled for {s} (jax.device_put it there first)")
            placed.append(jax.device_put(a, s))  # (numpy, or an argument without in_shardings)
        return list(self._compiled(*placed, *self._hidden))


def _program_devices(module):
    """The jax devices of a sharded module's logical devices, or None (one device)."""
    ids = module.config.get("device_assignment")
    if ids is None:
        return None
    by_id = {d.id: d for d in jax.devices()}
    missing = [i for i in ids if i not in by_id]
    if missing:
        from minixla.sharding.hlo_sharding import ShardingError
        raise ShardingError(f"the program's mesh names devices {missing}, which this process does not "
                            f"have (jax.devices(): {len(by_id)} devices)")
    return [by_id[i] for i in ids]


def compile_module(module, assignment=None) -> JaxExecutable:
    """Backend entry point (same signature as the LLVM backend's; the buffer assignment is unused:
    XLA does its own)."""
    return JaxExecutable(module)


# ---------------------------------------------------------------------------------------
# The rest of the lax surface (issue 3).

for _op, _fn in {
    "exponential-minus-one": lax.expm1, "log-plus-one": lax.log1p, "cbrt": lax.cbrt, "sine": lax.sin,
    "cosine": lax.cos, "tan": lax.tan, "erf": lax.erf, "erfc": lax.erfc, "is-finite": lax.is_finite,
    "remainder": lax.rem, "atan2": lax.atan2, "xor": lax.bitwise_xor, "shift-left": lax.shift_left,
    "shift-right-logical": lax.shift_right_logical, "shift-right-arithmetic": lax.shift_right_arithmetic,
    "clamp": lax.clamp,
}.items():
    jax_rules[_op] = (lambda fn: lambda instr, *xs: fn(*xs))(_fn)

jax_rules["round-nearest-afz"] = lambda instr, x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)
jax_rules["round-nearest-even"] = lambda instr, x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
jax_rules["bitcast-convert"] = lambda instr, x: lax.bitcast_convert_type(x, instr.shape.dtype)
jax_rules["reverse"] = lambda instr, x: lax.rev(x, instr.attrs["dimensions"])
jax_rules["pad"] = lambda instr, x, v: lax.pad(x, v, instr.attrs["padding_config"])
jax_rules["concatenate"] = lambda instr, *xs: lax.concatenate(xs, instr.attrs["dimensions"][0])


def _clamped_starts(idx, dims, sizes):
    # HLO clamps a start to [0, dim - size]; jax.lax would first count a negative one from the
    # end (the lowering already did that), so clamp here and give it no negative to wrap.
    return [lax.clamp(jnp.zeros_like(i), i, jnp.asarray(d - n, i.dtype)) for i, d, n in zip(idx, dims, sizes)]


jax_rules["dynamic-slice"] = lambda instr, x, *idx: lax.dynamic_slice(
    x, _clamped_starts(idx, x.shape, instr.attrs["dynamic_slice_sizes"]), instr.attrs["dynamic_slice_sizes"])
jax_rules["dynamic-update-slice"] = lambda instr, x, u, *idx: lax.dynamic_update_slice(
    x, u, _clamped_starts(idx, x.shape, u.shape))


def _gather(instr, x, indices):
    a = instr.attrs
    dn = lax.GatherDimensionNumbers(a["offset_dims"], a["collapsed_slice_dims"], a["start_index_map"])
    return lax.gather(x, indices, dn, a["slice_sizes"], mode=lax.GatherScatterMode.CLIP)


jax_rules["gather"] = _gather

_SCATTERS = {"parameter": lax.scatter, "add": lax.scatter_add, "multiply": lax.scatter_mul,
             "minimum": lax.scatter_min, "maximum": lax.scatter_max}


def _scatter(instr, x, indices, updates):
    a = instr.attrs
    root = instr.called[0].root
    if root.opcode == "parameter" and root.parameter_number != 1:
        raise errors.UnsupportedError("jax backend: scatter region must return the update or combine")
    dn = lax.ScatterDimensionNumbers(a["update_window_dims"], a["inserted_window_dims"],
                                     a["scatter_dims_to_operand_dims"])
    return _SCATTERS[root.opcode](x, indices, updates, dn, mode=lax.GatherScatterMode.FILL_OR_DROP)


jax_rules["scatter"] = _scatter
_REDUCERS.update({"multiply": lax.mul, "and": lax.bitwise_and, "or": lax.bitwise_or})


def _reduce_window(instr, x, init):
    w = instr.attrs["window"]
    reducer = _REDUCERS[instr.called[0].root.opcode]
    return lax.reduce_window(x, init, reducer, w["size"], w["stride"], w["pad"], w["lhs_dilate"],
                             w["rhs_dilate"])


jax_rules["reduce-window"] = _reduce_window


def _fma(instr, a, b, c):
    """minixla.lax.fma (issue 14): ``a * b + c``, which XLA contracts into one fma itself. When
    ``c`` is a product too (``x0 * x0 + x1 * x1``), LLVM may contract either product (it took
    ``c``'s in ~5% of maxwell's rows), so ``c`` is added to a hidden run-time -0.0 first (the
    identity for every value, NaN and both zeros included): the add's other operand is then no
    product, and only ``a * b`` is contracted with it."""
    z = _hidden_value(("negzero", np.dtype(instr.shape.dtype)), lambda: None)
    return a * b + (c if z is None else c + z)


jax_rules["fma"] = _fma

# sort (issue 14): jax.lax.sort's comparator is the one minixla's sort means; XLA's CSE merges
# the sorts of one multi-operand sort's results.
jax_rules["sort"] = lambda instr, *xs: lax.sort(
    xs, dimension=instr.attrs["dimensions"][0], is_stable=instr.attrs["is_stable"],
    num_keys=instr.attrs["num_keys"])[instr.attrs["result_index"]]


# rng_bit_generator (issue 14): XLA expands the instruction itself (its RngBitGeneratorExpander)
_RNG_ALGORITHMS = {"rng_default": lax.RandomAlgorithm.RNG_DEFAULT, "rng_three_fry": lax.RandomAlgorithm.RNG_THREE_FRY,
                   "rng_philox": lax.RandomAlgorithm.RNG_PHILOX}
jax_rules["rng-bit-generator"] = lambda instr, key: lax.rng_bit_generator(
    key, tuple(instr.attrs["bits_dims"]), dtype=np.dtype(instr.attrs["bits_type"]),
    algorithm=_RNG_ALGORITHMS[instr.attrs["algorithm"]])[instr.attrs["result_index"]]

# ---------------------------------------------------------------------------------------
# Control flow: a ``while`` is ``lax.while_loop`` and a ``conditional`` is ``lax.switch`` over
# the called computations, evaluated with these same rules (XLA then compiles real loops).

jax_rules["get-tuple-element"] = lambda instr, t: t[instr.attrs["index"]]
# optimization_barrier: XLA's own barrier (its passes honour it; its CPU backend then removes it)
jax_rules["opt-barrier"] = lambda instr, t: tuple(lax.optimization_barrier(tuple(t)))


def _while(instr, state):
    cond, body = instr.called
    return lax.while_loop(lambda s: evaluate_computation(cond, [s]),
                          lambda s: tuple(evaluate_computation(body, [s])), tuple(state))


def _conditional(instr, index, *operands):
    n = len(instr.called)
    if index.dtype == np.bool_:  # true_computation, false_computation
        branches, index = instr.called[::-1], lax.convert_element_type(index, np.int32)
        operands = operands[::-1]
    else:  # HLO runs the last branch for any index out of range; lax.switch would clamp a negative one to 0
        branches = instr.called
        index = jnp.where((index < 0) | (index >= n), jnp.int32(n - 1), index)
    fns = [(lambda c, k: lambda ops: evaluate_computation(c, [ops[k]]))(c, k) for k, c in enumerate(branches)]
    return lax.switch(index, fns, tuple(operands))




def _sharding_custom_call(instr, x):
    """A "Sharding" custom-call: ``jax.lax.with_sharding_constraint`` over the program's devices
    (the identity in a one-device program)."""
    devices = getattr(_hidden, "devices", None)
    if devices is None:
        return x
    from minixla.sharding.api import to_jax_sharding
    return lax.with_sharding_constraint(x, to_jax_sharding(instr.attrs["sharding"], devices))


jax_rules["custom-call"] = _sharding_custom_call
jax_rules["while"] = _while
jax_rules["conditional"] = _conditional
