"""Differential fuzzing against JAX eager.

1. ``test_random_programs``: hypothesis builds a random program — a DAG of 1–30 ``numpy``/``lax``
   ops over 1–3 inputs with random shapes (0- and 1-sized dims included), dtypes (f32, f16,
   bf16, i32, i8, u8, bool, mixed so promotion is exercised) and special values (NaN, ±inf,
   -0.0, integer extremes). The program is one list of op specs interpreted by the same code
   with ``np_ = jax.numpy`` (eagerly, under ``jax.disable_jit()``: the reference) and with
   ``np_ = minixla.numpy`` (compiled by ``minixla.jit`` on both backends).

   What must match: integer and bool results exactly; float results bit-for-bit (including the
   sign of zero and NaN positions) unless a transcendental function or a variance fed them, in
   which case within a few ulp (``INEXACT_RTOL``). To keep that contract checkable the
   generator tracks, per value, whether it is *exact* (bit-reproducible) and *nice* (an input
   value moved around: small multiples of 1/4, so float sums and dots of them are exact in any
   order). Ops that amplify a last-bit difference into a different answer (floor, compare,
   argmax, float->int, ...) only read exact values; float sums/products/dots only read nice
   ones, and product reductions only short axes. Reductions stay short (<= 5 per axis), which
   also keeps clear of a documented XLA:CPU divergence: its long max/min reductions may drop a
   NaN, while XLA's semantics (and minixla) propagate it.

   The JAX hand-off backend is compared with the sign of zero ignored: XLA:CPU compiles a
   fused ``0.0 + x`` without honouring signed zeros (it gives -0.0 for x = -0.0 where JAX
   eager's lone add gives +0.0), which a replay through ``jax.jit`` cannot prevent.

   ``MINIXLA_FUZZ_EXAMPLES`` sets the number of programs (default 25 for CI; the same programs
   every run unless ``MINIXLA_FUZZ_RANDOM=1``, then split a deep run over processes with
   ``--hypothesis-seed=N``); a failing program
   is printed as its op list, shrunk by hypothesis. The generator lives in
   ``minixla/fuzz/programs.py``; ``tests/test_fuzz_transforms.py`` runs the same programs
   through ``grad``/``vjp``, ``jvp`` and ``vmap``. Every mismatch found so far is pinned in
   ``test_regressions``.

2. ``test_malformed_calls_raise_minixla_errors``: random malformed calls (wrong shapes, axes,
   dtypes, indices, dimension numbers) run in a subprocess — so a crash (segfault, SIGFPE) is a
   failure, not a dead test run — and each must raise a minixla error (or the ``IndexError``
   JAX raises) whose message starts with the op the caller called (``where``, ``add`` for
   ``x + y``, ``getitem`` for ``x[i]``, ``jnp.sin`` for a JAX function given a traced value),
   names every operand's shape and dtype (``f32[2,3]``) where shapes are at stake, and the
   caller's ``file:line``. The kinds of call (broadcasting, axes, reshapes, indexing, traced
   shapes, bad and complex dtypes, JAX functions on traced values, non-array arguments) are
   drawn in turn, their shapes at random. ``MINIXLA_FUZZ_BAD_CALLS`` sets the count (default 200).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import minixla
import minixla.numpy as mnp
from minixla import lax as mlax
from minixla.fuzz.programs import BF16, build, compare, programs, run_program
from minixla.testing import eager_reference, reference_device

N_EXAMPLES = int(os.environ.get("MINIXLA_FUZZ_EXAMPLES", "25"))
N_BAD_CALLS = int(os.environ.get("MINIXLA_FUZZ_BAD_CALLS", "200"))
#: CI runs the same programs every time; MINIXLA_FUZZ_RANDOM=1 draws new ones (with pytest's
#: ``--hypothesis-seed=N`` a deep run can be split over processes with different seeds).
DERANDOMIZE = not os.environ.get("MINIXLA_FUZZ_RANDOM")


@settings(max_examples=N_EXAMPLES, deadline=None, derandomize=DERANDOMIZE, print_blob=True,
          suppress_health_check=list(HealthCheck))
@given(programs(), st.data())
def test_random_programs(prog, data):
    inputs, n_ops, _ = prog
    program, vals = build(data.draw, inputs, n_ops)
    if not program:
        return
    n = len(vals)
    outputs = sorted({n - 1} | set(data.draw(st.lists(st.integers(len(inputs), n - 1), max_size=2))))
    note = "\n".join(f"  v{len(inputs) + j} = {op}{tuple(ids)} {p}" for j, (op, ids, p) in enumerate(program))
    if os.environ.get("MINIXLA_FUZZ_LOG"):  # the program about to run, for post-mortems of a crash
        with open(os.environ["MINIXLA_FUZZ_LOG"], "w") as fh:
            fh.write(f"inputs {[(x.dtype.name, x.shape, x.tolist()) for x in inputs]}\n{note}\noutputs {outputs}\n")
    try:
        run_program(inputs, program, outputs, vals)
    except Exception as e:
        raise AssertionError(f"program over inputs {[(x.dtype.name, x.shape) for x in inputs]}:\n{note}\n"
                             f"outputs {outputs}\n{e}") from e


# ---------------------------------------------------------------------------------------
# Mismatches the fuzzer found, pinned with the right (JAX's) values.

def _as_called(np_, name, *args, **kwargs):
    """``np_.name(*args)``; a jitted ``jax.numpy`` function as a JAX user gets it (jit on, even
    inside the eager reference's ``disable_jit``: ``minixla.fuzz.programs._as_jax_runs_it``)."""
    if np_ is jnp:
        with jax.disable_jit(False):
            return getattr(jnp, name)(*args, **kwargs)
    return getattr(np_, name)(*args, **kwargs)


def test_regressions():
    cases = [
        # jnp.remainder(int, 0) is 0 in JAX (a zero divisor is replaced by 1), not lax.rem's x
        (lambda np_, a: np_.remainder(a, 0), np.array([-8, 5], np.int32), np.array([0, 0], np.int32)),
        # jnp.power of integers only looks at the exponent's low 6 bits, as jax.numpy does
        (lambda np_, a: np_.power(a, a - 6), np.array([-3, 2, 3], np.int32), None),
        # lax.dynamic_slice counts a negative start from the end before clamping, as JAX does
        (lambda np_, a: jax.lax.dynamic_slice(a, (np.int32(-1),), (2,)) if np_ is jnp else
         mlax.dynamic_slice(a, (np.int32(-1),), (2,)), np.arange(5, dtype=np.float32),
         np.array([3.0, 4.0], np.float32)),
        # jnp.take defaults to mode='fill': NaN for an out-of-range index
        (lambda np_, a: np_.take(a, np.array([0, 9], np.int32)), np.arange(3, dtype=np.float32),
         np.array([0.0, np.nan], np.float32)),
        # jnp.mean divides by the count as XLA rewrites it inside JAX: sum * (1/n)
        (lambda np_, a: np_.mean(a, 0), np.array([[4.5, -6.25], [-14.75, -13.75], [-15.5, -10.5]], np.float32),
         np.array([-8.583334, -10.166667], np.float32)),
        # the JAX hand-off must not let XLA simplify `0.0 + x` to `x` (x = -0.0 gives +0.0)
        (lambda np_, a: np_.add(np_.isnan(np_.isnan(a)), np_.ceil(a)), np.array([-0.25], np.float32),
         np.array([0.0], np.float32)),
        # constant folding of a bfloat16 program (np.finfo rejected bfloat16)
        (lambda np_, a: np_.add(np_.isnan(np_.isnan(a)), a.astype(BF16)), np.array([11.25], np.float32), None),
        # x.at[i].min(v) on bool computes in the promoted dtype, then converts back (JAX's rule)
        (lambda np_, a: (a > 0).at[0].min(-1.5), np.array([0.5, -1.0], np.float32), np.array([True, False])),
        # uint8 x.at[i].set(-1.5): the update converts like XLA's convert (saturating), to 0
        (lambda np_, a: a.astype(np_.uint8).at[0].set(-1.5), np.array([7.0, 3.0], np.float32),
         np.array([0, 3], np.uint8)),
        # XLA rewrites x * convert(pred) to select(pred, x, 0): the hand-off must keep inf * False = NaN
        (lambda np_, a: np_.floor_divide(a, 0) * np_.isnan(np_.floor_divide(a, 0)), np.array([11.25], np.float32),
         np.array([np.nan], np.float32)),
        # var of one element folds to a 0-d float constant that the simplifier then inspects
        (lambda np_, a: np_.transpose(np_.var(np_.isnan(a))), np.array([7], np.int32), np.array(0.0, np.float32)),
        # the HLO start -3 + 2 = -1 clamps to 0: the hand-off must not let jax.lax wrap it again
        (lambda np_, a: jax.lax.dynamic_slice(a, (0, 0, -3), (1, 1, 1)) if np_ is jnp else
         mlax.dynamic_slice(a, (0, 0, -3), (1, 1, 1)), np.array([[[11.25, np.nan]]], np.float32),
         np.array([[[11.25]]], np.float32)),
        (lambda np_, a: jax.lax.dynamic_update_slice(a, a[:, :, :1] * 2, (0, 0, -3)) if np_ is jnp else
         mlax.dynamic_update_slice(a, a[:, :, :1] * 2, (0, 0, -3)), np.array([[[11.25, np.nan]]], np.float32),
         np.array([[[22.5, np.nan]]], np.float32)),
        # jnp.mean is a jitted function in JAX, where XLA folds the division by the count into a
        # multiply by its reciprocal at every rank (a scalar too): -7 * (1/3), not -7/3
        (lambda np_, a: _as_called(np_, "mean", a), np.array([3, -2, -8], np.int32), np.array(-2.3333335, np.float32)),
        # an integer mean divides, truncating (a reciprocal in uint8 would be 0)
        (lambda np_, a: np_.mean(a, axis=0, dtype=np_.uint8), np.array([[200, 100], [100, 3], [50, 4]], np.uint8),
         np.array([31, 35], np.uint8)),
        # XLA contracts a*b + c into an FMA (one rounding); JAX eager rounds the product first
        (lambda np_, a: a * a + a, np.array([1.1, -0.7, 3.3], np.float32),
         np.array([2.31, -0.21000001, 14.19], np.float32)),
        (lambda np_, a: np_.sum(a * a) - a * 1.7, np.array([1.1, -0.7, 3.3], np.float32), None),
        # f32[1] @ bool[1]: XLA makes the one-term dot select(p, x, 0) (+0.0, not -0.75 * 0.0 = -0.0);
        # with a broadcast in between it stays a multiply
        (lambda np_, a: np_.matmul(a, np_.isnan(a)), np.array([-0.75], np.float32), np.array(0.0, np.float32)),
        (lambda np_, a: np_.matmul(np_.isnan(a), np_.array([np_.inf], np_.float32)), np.array([-0.75], np.float32),
         np.array(0.0, np.float32)),
        (lambda np_, a: np_.matmul(a.reshape(1, 1), np_.isnan(a)), np.array([-0.75], np.float32),
         np.array([-0.0], np.float32)),
        (lambda np_, a: np_.matmul(a.astype(np_.float16), np_.isnan(a)), np.array([-0.75], np.float32),
         np.array(-0.0, np.float16)),
        # 0 // bool_array is a weak int32 in JAX (it adds to int8 as int8): broadcasting the weak 0
        # (or where's weak 1) into a constant array must not make it strong
        (lambda np_, a: np_.floor_divide(0, a > 0) + a, np.array([[3, -2]], np.int8), np.array([[3, -3]], np.int8)),
        (lambda np_, a: np_.remainder(0, a > 0) + a, np.array([[3, -2]], np.int8), np.array([[3, -2]], np.int8)),
        (lambda np_, a: np_.fmod(0, a > 0) + a, np.array([[3, -2]], np.int8), np.array([[3, -2]], np.int8)),
        (lambda np_, a: np_.where(a > 0, 1, 2) + a, np.array([[3, -2]], np.int8), np.array([[4, 0]], np.int8)),
        # ... and so does a one-element mean with keepdims
        (lambda np_, a: _as_called(np_, "mean", a, keepdims=True), np.array([[0, 3, 0], [-4, -4, -9]], np.int32),
         np.array([[-2.3333335]], np.float32)),
        (lambda np_, a: np_.true_divide(a.reshape(1, 1), 6), np.array([-14.0], np.float32),
         np.array([[-2.3333333]], np.float32)),
        (lambda np_, a: np_.true_divide(a, 6), np.array([-14.0, 1.0], np.float32),
         np.array([-2.3333335, 0.16666667], np.float32)),
        # a static out-of-range int index clamps, as JAX's gather does (no IndexError on a jnp array)
        (lambda np_, a: a[5], np.arange(3, dtype=np.float32), np.array(2.0, np.float32)),
        (lambda np_, a: a[-4], np.arange(3, dtype=np.float32), np.array(0.0, np.float32)),
        (lambda np_, a: a[np.array([5, -7, 1])], np.arange(3, dtype=np.float32), np.array([2.0, 0.0, 1.0], np.float32)),
        # an out-of-range .at[] update is dropped (scatter mode 'drop')
        (lambda np_, a: a.at[7].set(9.0), np.arange(3, dtype=np.float32), np.array([0.0, 1.0, 2.0], np.float32)),
        (lambda np_, a: a.at[np.array([0, 7])].add(9.0), np.arange(3, dtype=np.float32),
         np.array([9.0, 1.0, 2.0], np.float32)),
        # bool operands: add is logical or; floor_divide, remainder and shifts compute in int32
        (lambda np_, a: np_.add(a > 0, a < 1), np.array([-1.0, 0.5, 2.0], np.float32), np.array([True] * 3)),
        (lambda np_, a: np_.floor_divide(a > 0, a < 1), np.array([-1.0, 0.5, 2.0], np.float32),
         np.array([0, 1, -2], np.int32)),
        (lambda np_, a: np_.remainder(a > 0, a < 1), np.array([-1.0, 0.5, 2.0], np.float32),
         np.array([0, 0, 0], np.int32)),
        (lambda np_, a: np_.left_shift(a > 0, a < 1), np.array([-1.0, 0.5, 2.0], np.float32),
         np.array([0, 2, 1], np.int32)),
        (lambda np_, a: np_.right_shift(a > 0, a < 1), np.array([-1.0, 0.5, 2.0], np.float32),
         np.array([0, 0, 1], np.int32)),
        (lambda np_, a: np_.rint(a > 0), np.array([-1.0, 0.5, 2.0], np.float32), np.array([0.0, 1.0, 1.0], np.float32)),
        # empty gathers: from a non-empty and from an empty operand
        (lambda np_, a: a[np.array([], np.int32)], np.arange(3, dtype=np.float32), np.zeros(0, np.float32)),
        (lambda np_, a: a[:, np.array([0, 2])], np.zeros((0, 3), np.float32), np.zeros((0, 2), np.float32)),
        (lambda np_, a: np_.take(a, np.array([[]], np.int32), axis=0), np.arange(3, dtype=np.int8),
         np.zeros((1, 0), np.int8)),
    ]
    for fn, x, want in cases:
        for backend in ("llvm", "jax"):
            ref = np.asarray(eager_reference(lambda a: fn(jnp, jnp.asarray(a)), x, backend=backend))
            if want is not None and reference_device(backend).platform == "cpu":  # (pinned on a CPU)
                compare("JAX", ref, want, exact=True)
            compare(backend, minixla.jit(lambda a: fn(mnp, a), backend=backend)(x), ref, exact=True,
                    signed_zeros=backend == "llvm")


# ---------------------------------------------------------------------------------------
# Malformed calls, in a subprocess.

BAD_CALLS_SCRIPT = textwrap.dedent(r'''
    import json, random, re, sys, traceback
    import jax, jax.numpy as jnp
    import numpy as np
    import minixla, minixla.numpy as mnp
    from minixla import lax, nn
    from minixla.core.avals import short_dtype_name
    from minixla.core.errors import MinixlaError

    rng = random.Random(int(sys.argv[2]))
    f32, i32, c64 = np.float32, np.int32, np.complex64

    def arr(shape, dtype=f32):
        return np.ones(shape, dtype)

    def rshape():
        return tuple(rng.choice([0, 1, 2, 3, 4]) for _ in range(rng.randint(0, 3)))

    def run(fn, args, backend):
        return minixla.jit(fn, backend=backend, frontend="minixla")(*args)  # (no switch to JAX)

    #: errors about the jitted function's own arguments point here (the call), not at a lambda
    CALL_LINE = run.__code__.co_firstlineno + 1
    LAMBDA, CALL = "lambda", "call"

    def case(k):
        """(op the message must start with, fn, args, whose line, shapes named?) for one
        malformed call of kind k, with random shapes where the kind allows."""
        a, b = rshape(), rshape()
        while b == a or (len(a) == len(b) == 0):
            b = rshape() + (rng.choice([5, 6]),)
        bad_axis = rng.choice([3, 4, -5, 7])
        n = np.int32(rng.choice([0, 2, 3]))
        cases = [
            ("add", lambda x, y: lax.add(x, y), (arr(a + (2,)), arr(b + (3,)))),
            ("add", lambda x, y: lax.add(x, y), (arr(a), arr(a, i32))),
            ("add", lambda x, y: mnp.add(x, y), (arr(a + (2,)), arr(b + (3,)))),
            ("add", lambda x, y: x + y, (arr(a + (2,)), arr(b + (3,)))),
            ("multiply", lambda x, y: x * y, (arr((2, 3)), arr((4,)))),
            ("where", lambda c, x, y: mnp.where(c, x, y), (arr(a + (2,), bool), arr(b + (3,)), arr((1,)))),
            ("where", lambda x, y: mnp.where(x > 0, x, y), (arr((2, 3)), arr((4,)))),
            ("reshape", lambda x: mnp.reshape(x, (7, -1)), (arr((2, 3)),)),
            ("reshape", lambda x, m: x.reshape((m, -1)), (arr((2, 3)), n)),
            ("transpose", lambda x: lax.transpose(x, (0, 0, 1)), (arr((2, 3, 4)),)),
            ("transpose", lambda x: mnp.transpose(x, (1, 1)), (arr((2, 3)),)),
            ("slice", lambda x: lax.slice(x, (1, 0), (5, 2)), (arr((3, 3)),)),
            ("sum", lambda x: mnp.sum(x, axis=bad_axis), (arr((2, 3)),)),
            ("mean", lambda x: x.mean(axis=bad_axis), (arr((2, 3)),)),
            ("dot_general", lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ()))), (arr((2, 3)), arr((4, 5)))),
            ("conv_general_dilated", lambda x, y: lax.conv_general_dilated(x, y, (1, 1), "SAME"), (arr((1, 3, 5, 5)), arr((2, 4, 3, 3)))),
            ("gather", lambda x, i: lax.gather(x, i, lax.GatherDimensionNumbers((1,), (0,), (0, 1)), (1, 3)), (arr((4, 3)), arr((2, 1), i32))),
            ("dynamic_slice", lambda x: lax.dynamic_slice(x, (0, 0), (5, 1)), (arr((3, 3)),)),
            ("concatenate", lambda x, y: mnp.concatenate([x, y], 0), (arr((2, 3)), arr((2, 4)))),
            ("stack", lambda x, y: mnp.stack([x, y]), (arr((2, 3)), arr((2, 4)))),
            ("pad", lambda x: lax.pad(x, 0.0, [(0, 0, -1)]), (arr((3,)),)),
            ("getitem", lambda x: x[1.5], (arr((3, 2)),)),
            ("getitem", lambda x: x[0], (arr((0, 2)),)),
            ("getitem", lambda x: x[0, 0, 0], (arr((3, 2)),)),
            ("at[].set", lambda x, y: x.at[0].set(y), (arr((3, 2)), arr((5,)))),
            ("matmul", lambda x, y: x @ y, (arr((2, 3)), arr((2, 3)))),
            ("einsum", lambda x, y: mnp.einsum("ij,jk->ik", x, y), (arr((2, 3)), arr((4, 5)))),
            ("tensordot", lambda x, y: mnp.tensordot(x, y, 1), (arr((2, 3)), arr((4, 5)))),
            ("take_along_axis", lambda x, i: mnp.take_along_axis(x, i, 0), (arr((2, 3)), arr((2,), i32))),
            ("shift_left", lambda x: lax.shift_left(x, x), (arr((3,)),)),
            ("argmax", lambda x: mnp.argmax(x, 0), (arr((0, 3)),)),
            ("scatter", lambda x, i, u: lax.scatter(x, i, u, lax.ScatterDimensionNumbers((1,), (0,), (0,))), (arr((4, 3)), arr((2, 1), i32), arr((2, 5)))),
            ("select_n", lambda p, x, y: lax.select_n(p, x, y), (arr(a + (3,), bool), arr((2, 7)), arr((2, 7)))),
            ("squeeze", lambda x: mnp.squeeze(x, 1), (arr((2, 3)),)),
            ("broadcast_to", lambda x: mnp.broadcast_to(x, (2, 2)), (arr((3,)),)),
            ("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 4), (0,)), (arr((3,)),)),
            ("softmax", lambda x: nn.softmax(x, axis=bad_axis), (arr((2, 3)),)),
            ("one_hot", lambda x, m: nn.one_hot(x, m), (arr((3,), i32), n)),
            ("ones", lambda m: mnp.ones(m), (n,)),
            ("zeros", lambda m: mnp.zeros((m, 2)), (n,)),
            ("arange", lambda m: mnp.arange(m), (n,)),
            ("astype", lambda x: x.astype("foo"), (arr((2, 3)),)),
            ("convert_element_type", lambda x: lax.convert_element_type(x, "bar"), (arr((2,)),)),
            ("astype", lambda x: x.astype(c64), (arr(a),)),
            ("add", lambda x: x + 1j, (arr(a),)),
            ("zeros", lambda x: x + mnp.zeros(3, c64), (arr((3,)),), LAMBDA, False),
            ("jit", lambda x: x + 1, (arr(a, c64),), CALL, False),
            ("jit", lambda x, s: x + 1, (arr((2,)), "text"), CALL, False),
            ("jnp.sin", lambda x: jnp.sin(x), (arr(a),), LAMBDA, False),
            ("jnp.sum", lambda x: jnp.sum(x) + 1, (arr(a),), LAMBDA, False),
            ("jax.lax.add", lambda x: jax.lax.add(x, 1.0), (arr(a),), LAMBDA, False),
            ("jnp.asarray", lambda x: jnp.asarray(x), (arr(a),), LAMBDA, False),
            ("jax.random.normal", lambda k: jax.random.normal(k, (3,)), (arr((2,), np.uint32),), LAMBDA, False),
        ]
        c = cases[k % len(cases)]
        return c + (LAMBDA, True) if len(c) == 3 else c

    def check(op, fn, args, line, shapes, msg):
        """What the message lacks of: the op (first), the caller's file:line, the shapes."""
        lacks = []
        if not re.match(re.escape(op) + r"[:( ]", msg):
            lacks.append(f"the op '{op}' first")
        lineno = fn.__code__.co_firstlineno if line == LAMBDA else CALL_LINE
        if f"{fn.__code__.co_filename}:{lineno} " not in msg:
            lacks.append(f"the line {lineno}")
        if shapes:
            for x in args:
                s = f"{short_dtype_name(x.dtype)}[{','.join(map(str, x.shape))}]"
                if s not in msg:
                    lacks.append(f"the shape {s}")
        return lacks

    failures = []
    n = int(sys.argv[1])
    for j in range(n):
        op, fn, args, line, shapes = case(j)
        try:
            run(fn, args, rng.choice(["llvm", "jax"]))
        except (MinixlaError, IndexError, TypeError) as e:
            msg = str(e)
            if not isinstance(e, (MinixlaError, IndexError)):
                failures.append(f"{op}: not a minixla error: {type(e).__name__}: {msg[:200]}")
            elif lacks := check(op, fn, args, line, shapes, msg):
                failures.append(f"{op}: the message lacks {', '.join(lacks)}: {type(e).__name__}: {msg[:400]}")
        except Exception as e:
            failures.append(f"{op}: {type(e).__name__}: {traceback.format_exc()[-400:]}")
        else:
            failures.append(f"{op}: no error for {[getattr(x, 'shape', x) for x in args]}")
    print(json.dumps({"n": n, "failures": failures[:30], "n_failures": len(failures)}))
''')


def test_malformed_calls_raise_minixla_errors(tmp_path):
    script = tmp_path / "bad_calls.py"
    script.write_text(BAD_CALLS_SCRIPT)
    r = subprocess.run([sys.executable, str(script), str(N_BAD_CALLS), "0"], capture_output=True, text=True,
                       timeout=600, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert r.returncode == 0, f"the process crashed (rc={r.returncode}):\n{r.stderr[-3000:]}"
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["n"] == N_BAD_CALLS and report["n_failures"] == 0, report
