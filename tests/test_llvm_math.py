"""Accuracy and special-value tests for minixla/backends/llvm/math.py.

Every emitter is compiled into small kernels ``void f(T* noalias in,
T* noalias out, i64 n)`` -- one working on ``<16 x float>`` / ``<8 x double>``
vectors (with a scalar tail), one on scalars -- JIT-compiled for the host CPU
with the new pass manager, and run through ctypes on NumPy arrays.

Errors are measured in ulp of the result's dtype against NumPy: float64 as
the reference for float32, long double (64-bit mantissa on x86) for float64.
"""

import ctypes
import math
import re

import numpy as np

from minixla.config import config
import pytest
from llvmlite import ir
import llvmlite.binding as llvm

from minixla.backends.llvm import math as lmath

F32, F64 = np.float32, np.float64
VECTOR_LANES = {F32: 16, F64: 8}
LLVM_TYPES = {F32: ir.FloatType(), F64: ir.DoubleType()}
FUNCS = {
    "exp": lmath.emit_exp,
    "exp2": lmath.emit_exp2,
    "expm1": lmath.emit_expm1,
    "log": lmath.emit_log,
    "log1p": lmath.emit_log1p,
    "tanh": lmath.emit_tanh,
    "logistic": lmath.emit_logistic,
}


# ---------------------------------------------------------------------------
# JIT harness
# ---------------------------------------------------------------------------

def _define_kernel(module, name, emitter, elem_ty, lanes):
    """void name(T* noalias in, T* noalias out, i64 n): out[i] = emitter(in[i]).

    lanes > 1: a loop over <lanes x T> vectors, then a scalar tail loop.
    lanes == 1: a scalar loop (which LLVM is free to vectorize itself)."""
    i64 = ir.IntType(64)
    ptr = elem_ty.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, i64]), name)
    src, dst, n = fn.args
    src.add_attribute("noalias")
    dst.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    idx = b.alloca(i64)
    b.store(ir.Constant(i64, 0), idx)

    def loop(step, ty):
        head, body, done = (fn.append_basic_block() for _ in range(3))
        b.branch(head)
        b.position_at_end(head)
        i = b.load(idx)
        b.cbranch(b.icmp_signed("<=", b.add(i, ir.Constant(i64, step)), n), body, done)
        b.position_at_end(body)
        p_in = b.bitcast(b.gep(src, [i]), ty.as_pointer())
        p_out = b.bitcast(b.gep(dst, [i]), ty.as_pointer())
        align = 4 if isinstance(elem_ty, ir.FloatType) else 8
        b.store(emitter(b, b.load(p_in, align=align)), p_out, align=align)
        b.store(b.add(i, ir.Constant(i64, step)), idx)
        b.branch(head)
        b.position_at_end(done)

    if lanes > 1:
        loop(lanes, ir.VectorType(elem_ty, lanes))
    loop(1, elem_ty)
    b.ret_void()


def _target_machine():
    # A fresh one per use: an MCJIT engine takes ownership of its target
    # machine and frees it with itself.
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
        opt=3, jit=True)


def optimize(module):
    """IR module -> (optimized llvmlite.binding module, its target machine)."""
    tm = _target_machine()
    module.triple = llvm.get_process_triple()
    module.data_layout = str(tm.target_data)
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return mod, tm


class Compiled:
    """A JIT-compiled module; kernels are callable as numpy -> numpy."""

    def __init__(self, module):
        self.ir_text = str(module)
        mod, tm = optimize(module)
        self.engine = llvm.create_mcjit_compiler(mod, tm)
        self.engine.finalize_object()
        self._fns = {}

    def __call__(self, name, x):
        fn = self._fns.get(name)
        if fn is None:
            addr = self.engine.get_function_address(name)
            fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(addr)
            self._fns[name] = fn
        x = np.ascontiguousarray(x)
        out = np.empty_like(x)
        fn(x.ctypes.data, out.ctypes.data, x.size)
        return out


@pytest.fixture(scope="module")
def jit():
    module = ir.Module(name="test_llvm_math")
    for fname, emitter in FUNCS.items():
        for dtype in (F32, F64):
            ty = LLVM_TYPES[dtype]
            tag = f"{fname}_{dtype.__name__}"
            _define_kernel(module, f"{tag}_vec", emitter, ty, VECTOR_LANES[dtype])
            _define_kernel(module, f"{tag}_scalar", emitter, ty, 1)
    # odd vector widths must work too
    _define_kernel(module, "exp_float32_v3", lmath.emit_exp, ir.FloatType(), 3)
    _define_kernel(module, "log_float64_v5", lmath.emit_log, ir.DoubleType(), 5)
    _define_kernel(module, "tanh_float32_v4", lmath.emit_tanh, ir.FloatType(), 4)
    with config.override(minixla_fast_tanh=True):  # XLA's rational form, opt-in
        _define_kernel(module, "fasttanh_float32_vec", lmath.emit_tanh, ir.FloatType(), VECTOR_LANES[F32])
        _define_kernel(module, "fasttanh_float32_scalar", lmath.emit_tanh, ir.FloatType(), 1)
    return Compiled(module)


def run(jit, fname, x):
    """Run the vector and the scalar kernel; they must agree bit for bit."""
    tag = f"{fname}_{x.dtype.type.__name__}"
    vec = jit(f"{tag}_vec", x)
    sca = jit(f"{tag}_scalar", x)
    same = (vec.view(_uint(x.dtype)) == sca.view(_uint(x.dtype))) | (np.isnan(vec) & np.isnan(sca))
    assert same.all(), (x[~same][:5], vec[~same][:5], sca[~same][:5])
    return vec


def _uint(dtype):
    return np.uint32 if np.dtype(dtype) == np.float32 else np.uint64


# ---------------------------------------------------------------------------
# References and ulp errors
# ---------------------------------------------------------------------------

WIDE = {F32: np.float64, F64: np.longdouble}
LONGDOUBLE_IS_WIDER = np.finfo(np.longdouble).nmant >= 63


def _logistic(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


REFERENCES = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log,
    "log1p": np.log1p, "tanh": np.tanh, "fasttanh": np.tanh, "logistic": _logistic,
}


def reference(fname, x):
    with np.errstate(all="ignore"):
        return REFERENCES[fname](x.astype(WIDE[x.dtype.type]))


def ulp_errors(got, ref, dtype):
    """|got - ref| in ulps of dtype at ref; inf counts as 2^maxexp (one ulp
    beyond the largest finite number), so overflow at the rounding boundary
    is a 1-ulp error, not an infinite one."""
    fi = np.finfo(dtype)
    wide = WIDE[dtype]
    big = np.ldexp(wide(1), fi.maxexp)
    with np.errstate(all="ignore"):
        g = got.astype(wide)
        r = np.clip(ref.astype(wide), -big, big)
        g = np.where(np.isinf(g), np.copysign(big, g), g)
        _, e = np.frexp(np.abs(r))
        e = np.where(r == 0, fi.minexp, e)
        ulp = np.ldexp(wide(1), np.maximum(e - fi.nmant - 1, fi.minexp - fi.nmant).astype(np.int32))
        err = np.abs(g - r) / ulp
    both_nan = np.isnan(got) & np.isnan(ref)
    err = np.where(both_nan, 0, err)
    return np.where(np.isnan(err), np.inf, err).astype(np.float64)


def check_accuracy(jit, fname, x, max_ulp):
    got = run(jit, fname, x)
    err = ulp_errors(got, reference(fname, x), x.dtype.type)
    worst = int(np.argmax(err))
    assert err[worst] <= max_ulp, (
        f"{fname}({x[worst]!r}) = {got[worst]!r}, expected {reference(fname, x[worst:worst+1])[0]!r}: "
        f"{err[worst]:.2f} ulp > {max_ulp}")
    return float(err[worst])


# Max ulp allowed per (function, dtype): just above the worst case found by
# exhaustive (f32) / 1e7-point (f64) runs, recorded in math.py's docstrings. float32 exp, expm1,
# log, log1p, tanh and logistic are XLA:CPU's algorithms (math_xla.py: bit-identical to JAX,
# tests/test_llvm_xla_math.py), so their bounds are XLA's errors (every 257th normal float32; exp 5.46 next to its overflow).
BOUNDS = {
    ("exp", F32): 5.5, ("exp", F64): 1.1,
    ("exp2", F32): 1.1, ("exp2", F64): 1.1,
    ("expm1", F32): 6.0, ("expm1", F64): 1.5,
    ("log", F32): 1.2, ("log", F64): 0.9,
    ("log1p", F32): 2.5, ("log1p", F64): 0.9,
    ("tanh", F32): 4.7, ("tanh", F64): 1.4,
    ("fasttanh", F32): 4.9,  # minixla_fast_tanh: minixla's own rational fit of XLA's form
    ("logistic", F32): 2.5, ("logistic", F64): 2.5,
}


def bound(fname, dtype):
    b = BOUNDS[(fname, dtype)]
    return b if dtype is F32 or LONGDOUBLE_IS_WIDER else b + 1.0


rng = np.random.default_rng(20240601)


@pytest.fixture(autouse=True)
def _reseed():
    """Each test draws the same inputs however the tests are selected."""
    global rng
    rng = np.random.default_rng(20240601)


def uniform(lo, hi, n, dtype):
    return rng.uniform(lo, hi, n).astype(dtype)


def log_uniform(lo_exp, hi_exp, n, dtype, signed=True):
    """|x| log-uniform over [10^lo_exp, 10^hi_exp], random sign."""
    x = 10.0 ** rng.uniform(lo_exp, hi_exp, n)
    if signed:
        x *= rng.choice([-1.0, 1.0], n)
    return x.astype(dtype)


def positive_bit_patterns(n, dtype):
    """Uniform over the bit patterns of positive finite numbers: every binade
    (subnormals included) gets about the same number of samples."""
    if dtype is F32:
        bits = rng.integers(1, 0x7F800000, n, dtype=np.uint32)
    else:
        bits = rng.integers(1, 0x7FF0000000000000, n, dtype=np.uint64)
    return bits.view(dtype)


def near(values, dtype, k=64):
    """The k floats on each side of each value."""
    out = []
    for v in values:
        c = np.asarray(v, dtype)
        up = c.copy()
        down = c.copy()
        for _ in range(k):
            up = np.nextafter(up, dtype(np.inf))
            down = np.nextafter(down, dtype(-np.inf))
            out += [up, down]
        out.append(c)
    return np.array(out, dtype)


SUBNORMALS = {F32: [1e-45, 1e-40, 1.17e-38], F64: [5e-324, 1e-310, 2.2e-308]}


# ---------------------------------------------------------------------------
# Accuracy
# ---------------------------------------------------------------------------

def test_exp_f32(jit):
    # XLA's expf: results below 2^-126 are flushed to 0 (tested in test_subnormal_results)
    x = np.concatenate([
        uniform(-87.33, 90, 1_000_000, F32),
        near([88.72283, -87.3, 0.0, 0.34657359, -0.34657359], F32),
        log_uniform(-45, 1, 20_000, F32), np.array(SUBNORMALS[F32], F32),
    ])
    check_accuracy(jit, "exp", x, bound("exp", F32))


def test_exp_f64(jit):
    x = np.concatenate([
        uniform(-750, 712, 300_000, F64), uniform(-1, 1, 50_000, F64),
        near([709.782712893384, -708.3964185322641, -744.4400719213812, -745.1332191019412], F64),
        log_uniform(-320, 1, 20_000, F64), np.array(SUBNORMALS[F64]),
    ])
    check_accuracy(jit, "exp", x, bound("exp", F64))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_exp2(jit, dtype):
    lo, hi = (-160, 130) if dtype is F32 else (-1080, 1030)
    x = np.concatenate([uniform(lo, hi, 300_000, dtype), uniform(-1, 1, 50_000, dtype),
                        near([127.0, -126.0, -149.0, -150.0] if dtype is F32
                             else [1023.0, -1022.0, -1074.0, -1075.0], dtype),
                        log_uniform(-40, 0, 10_000, dtype)])
    check_accuracy(jit, "exp2", x, bound("exp2", dtype))
    # integers give exact powers of two (NumPy's own float32 exp2(127) is
    # one ulp off, so compare with ldexp)
    n = np.arange(lo, hi, dtype=dtype)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(run(jit, "exp2", n), np.ldexp(dtype(1), n.astype(np.int32)))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_expm1(jit, dtype):
    lo, hi = (-30, 90) if dtype is F32 else (-50, 712)
    x = np.concatenate([uniform(lo, hi, 300_000, dtype), uniform(-2, 2, 100_000, dtype),
                        log_uniform(-40 if dtype is F32 else -300, 0, 50_000, dtype),
                        near([0.34657359, -0.34657359, 1.0397208, -1.0397208, 88.72283], dtype),
                        np.array(SUBNORMALS[dtype], dtype)])
    check_accuracy(jit, "expm1", x, bound("expm1", dtype))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_log(jit, dtype):
    x = np.concatenate([positive_bit_patterns(500_000, dtype),
                        uniform(0.5, 2.0, 100_000, dtype),
                        near([1.0, 0.7071067811865476, 1.4142135623730951, 2.0, 0.5], dtype, 256),
                        np.array(SUBNORMALS[dtype], dtype), np.array([np.finfo(dtype).max], dtype)])
    if dtype is F32:  # XLA's logf: subnormal inputs in test_subnormal_results
        x = x[x >= np.finfo(F32).tiny]
    check_accuracy(jit, "log", x, bound("log", dtype))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_log1p(jit, dtype):
    x = np.concatenate([uniform(-1, 10, 200_000, dtype),
                        log_uniform(-40 if dtype is F32 else -300, 0, 100_000, dtype),
                        log_uniform(0, 30 if dtype is F32 else 300, 50_000, dtype, signed=False),
                        near([-1.0, -0.5, 0.0, 1.0, 0.41421356], dtype),
                        np.array(SUBNORMALS[dtype], dtype)])
    x = x[x >= -1]
    check_accuracy(jit, "log1p", x, bound("log1p", dtype))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_tanh(jit, dtype):
    x = np.concatenate([log_uniform(-30, 1.5, 300_000, dtype), uniform(-10, 10, 200_000, dtype),
                        uniform(-25, 25, 50_000, dtype),
                        near([0.625, -0.625, 4.014, 8.5, -8.5, 9.01, 19.06], dtype, 256),
                        np.array(SUBNORMALS[dtype], dtype)])
    check_accuracy(jit, "tanh", x, bound("tanh", dtype))
    assert (np.abs(run(jit, "tanh", x)) <= 1).all()  # rounding never leaves [-1, 1]
    if dtype == F32:
        check_accuracy(jit, "fasttanh", x, bound("fasttanh", dtype))
        assert (np.abs(run(jit, "fasttanh", x)) <= 1).all()


@pytest.mark.parametrize("dtype", [F32, F64])
def test_logistic(jit, dtype):
    lo, hi = (-87.3, 120) if dtype is F32 else (-760, 760)  # (f32: XLA's, flushed below 2^-126)
    x = np.concatenate([uniform(lo, hi, 300_000, dtype), uniform(-5, 5, 100_000, dtype),
                        log_uniform(-30, 0, 10_000, dtype)])
    check_accuracy(jit, "logistic", x, bound("logistic", dtype))


# ---------------------------------------------------------------------------
# Special values: exact, sign of zero included
# ---------------------------------------------------------------------------

INF, NAN = math.inf, math.nan
SPECIALS = {
    "exp": [(NAN, NAN), (INF, INF), (-INF, 0.0), (0.0, 1.0), (-0.0, 1.0), (1000.0, INF), (-1000.0, 0.0)],
    "exp2": [(NAN, NAN), (INF, INF), (-INF, 0.0), (0.0, 1.0), (-0.0, 1.0), (10.0, 1024.0),
             (-10.0, 1 / 1024), (1e6, INF), (-1e6, 0.0)],
    "expm1": [(NAN, NAN), (INF, INF), (-INF, -1.0), (0.0, 0.0), (-0.0, -0.0), (-100.0, -1.0),
              (1e-30, 1e-30), (-1e-30, -1e-30), (1000.0, INF)],
    "log": [(NAN, NAN), (INF, INF), (-INF, NAN), (0.0, -INF), (-0.0, -INF), (-1.0, NAN),
            (1.0, 0.0)],
    "log1p": [(NAN, NAN), (INF, INF), (-INF, NAN), (-1.0, -INF), (-2.0, NAN), (0.0, 0.0),
              (-0.0, -0.0), (1e-30, 1e-30), (-1e-30, -1e-30)],
    "tanh": [(NAN, NAN), (INF, 1.0), (-INF, -1.0), (0.0, 0.0), (-0.0, -0.0), (1e-20, 1e-20),
             (-1e-20, -1e-20), (20.0, 1.0), (-20.0, -1.0), (1e30, 1.0), (-1e30, -1.0)],
    "logistic": [(NAN, NAN), (INF, 1.0), (-INF, 0.0), (0.0, 0.5), (-0.0, 0.5), (1000.0, 1.0),
                 (-1000.0, 0.0)],
}


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("fname", sorted(SPECIALS))
def test_special_values(jit, fname, dtype):
    x = np.array([i for i, _ in SPECIALS[fname]], dtype)
    want = np.array([o for _, o in SPECIALS[fname]], dtype)
    got = run(jit, fname, x)
    for xi, g, w in zip(x, got, want):
        if np.isnan(w):
            assert np.isnan(g), (fname, xi, g)
        else:
            assert g == w and np.signbit(g) == np.signbit(w), (fname, xi, g, w)


def test_subnormal_results(jit):
    # float64: gradual underflow, not flush to zero
    x = np.array([-708.5, -740.0, -745.0], F64)
    np.testing.assert_array_equal(run(jit, "exp", x), np.exp(x))
    assert run(jit, "exp2", np.array([-149.0, -1074.0], F64))[1] == 5e-324
    x = np.array([1e-45, 1e-40, 1e-310], F64)
    np.testing.assert_array_equal(run(jit, "log", x), np.log(x))
    # float32 is XLA's: exp and logistic flush results below ~2^-126.5 to +0 (2^k is built in the
    # exponent field, k >= -127), log clamps a subnormal input to the smallest normal (in the
    # compiled kernels denormals read as zero first, so there it is -inf, as in XLA)
    x = np.array([-100.0, -103.0, -87.8, -90.0], F32)
    np.testing.assert_array_equal(run(jit, "exp", x), np.zeros(4, F32))
    assert run(jit, "exp", np.array([-87.3], F32))[0] > 2.0 ** -126
    assert run(jit, "logistic", np.array([-100.0], F32))[0] == 0.0
    x = np.array([1e-45, 1e-40, 1.1e-38], F32)
    np.testing.assert_array_equal(run(jit, "log", x), run(jit, "log", np.array([2.0 ** -126] * 3, F32)))


def test_log_exact_at_powers_of_two(jit):
    for dtype, lowest, max_ulp in ((F32, -126, 0.6), (F64, -1074, 0.5 + 1e-9)):
        # (f32 is XLA's k*C1 + k*C2: within 0.6 ulp there, not always correctly rounded)
        fi = np.finfo(dtype)
        k = np.arange(lowest, fi.maxexp)
        x = np.ldexp(np.ones(k.size, dtype), k)
        err = ulp_errors(run(jit, "log", x), reference("log", x), dtype)
        assert err.max() <= max_ulp, err.max()


# ---------------------------------------------------------------------------
# Odd vector widths, IR hygiene, vectorization
# ---------------------------------------------------------------------------

def test_odd_vector_widths(jit):
    x = uniform(-20, 20, 1001, F32)
    np.testing.assert_array_equal(jit("exp_float32_v3", x), jit("exp_float32_scalar", x))
    np.testing.assert_array_equal(jit("tanh_float32_v4", x), jit("tanh_float32_scalar", x))
    y = positive_bit_patterns(1001, F64)
    np.testing.assert_array_equal(jit("log_float64_v5", y), jit("log_float64_scalar", y))


ALLOWED_CALLS = re.compile(r"@\"?llvm\.(fma|fabs|copysign|rint|floor)\.(v\d+)?f(32|64)\"?\(")


def test_ir_has_no_libm_calls_and_no_fast_math(jit):
    calls = [line for line in jit.ir_text.splitlines() if " call " in line]
    assert calls
    bad = [line for line in calls if not ALLOWED_CALLS.search(line)]
    assert not bad, bad[:3]
    for flag in ("fast", "nnan", "ninf", "nsz", "contract", "afn", "reassoc", "arcp"):
        assert not re.search(rf"\bf(add|sub|mul|div|neg|cmp)\s+{flag}\b", jit.ir_text), flag
        assert not re.search(rf"call {flag}\b", jit.ir_text), flag


@pytest.mark.parametrize("fname", sorted(FUNCS))
def test_scalar_loops_vectorize_without_calls(fname):
    """The scalar kernels alone: LLVM's loop vectorizer turns them into packed
    code (everything is branch-free), and nothing becomes a library call."""
    features = llvm.get_host_cpu_features()
    if not features.get("fma") or not features.get("avx2"):
        pytest.skip("host without FMA/AVX2: llvm.fma may lower to a libm call")
    module = ir.Module(name=f"scalar_{fname}")
    for dtype in (F32, F64):
        _define_kernel(module, f"{fname}_{dtype.__name__}", FUNCS[fname], LLVM_TYPES[dtype], 1)
    mod, tm = optimize(module)
    asm = tm.emit_assembly(mod)
    assert not re.search(r"\bcall[q]?\s", asm), "a library call in the generated code"
    # packed fma / division on ymm or zmm registers, for both dtypes
    assert re.search(r"v(fmadd|fnmadd|div)\w*ps\s+.*%[yz]mm", asm), "float loop not vectorized"
    assert re.search(r"v(fmadd|fnmadd|div)\w*pd\s+.*%[yz]mm", asm), "double loop not vectorized"


def test_rejects_non_float_types():
    b = ir.IRBuilder(ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []), "g")
                     .append_basic_block())
    with pytest.raises(TypeError):
        lmath.emit_exp(b, ir.Constant(ir.IntType(32), 1))


def test_emitter_table():
    for op in ("exponential", "log", "tanh", "logistic", "exponential-minus-one", "log-plus-one"):
        assert callable(lmath.MATH_EMITTERS[op])
    assert lmath.MATH_EMITTERS["exponential"] is lmath.emit_exp
