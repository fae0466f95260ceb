"""Inline, vectorizable transcendental functions emitted as LLVM IR.

Why this module exists
----------------------
LLVM has intrinsics such as ``llvm.exp.v16f32``, but on the CPU they are lowered
to one libm call per lane (there is no vector math library behind them), which
made ``exp``-heavy kernels about 30x slower than XLA.  XLA:CPU avoids that by
emitting its own polynomial approximations inline (``xla/codegen/math/`` and the
older ``xla/service/cpu/llvm_ir_runtime.cc``); we do the same.

Every emitter here takes an ``ir.IRBuilder`` and a value of type ``float``,
``double``, ``<N x float>`` or ``<N x double>`` and returns a value of the same
type.  The emitted code is

* straight-line: no branches, only ``select`` -- so a loop around it vectorizes,
  and when it is given a vector it already *is* vector code;
* made only of ordinary arithmetic, integer operations on the bit patterns,
  and the intrinsics that become one instruction (``llvm.fma``, ``llvm.fabs``,
  ``llvm.copysign``, ``llvm.rint``) -- never a libm call;
* free of fast-math flags: the results are the same whether or not LLVM
  vectorizes, and NaN, infinities, -0.0 and subnormals keep IEEE meaning.
  Polynomials use explicit ``llvm.fma`` (one rounding per Horner step), which
  the semantics contract allows inside our own approximations.

The shape of each function is the classic one (Cody & Waite, fdlibm):

1. *range reduction*: map x to a small interval where a low-degree polynomial
   is accurate (``x = k*ln2 + r`` for exp, ``x = 2^e * m`` for log);
2. a *minimax polynomial* on that interval;
3. *reconstruction*: undo the reduction exactly (scale by ``2^k``, add
   ``e*ln2``);
4. *special values* patched in with ``select`` at the end.

float32 goes to ``math_xla.py`` for exp, expm1, log, log1p, tanh, logistic, erf and erfc:
XLA:CPU's own algorithms, so the bits are JAX's (the float32 methods and errors described below
are minixla's earlier fits, still used by exp2 and by ``minixla_fast_tanh``'s tanh). float64
uses the methods below.

Half-precision types (f16, bf16) are not handled here: compute in float32
and round the result, as XLA does.

Accuracy is measured against NumPy (float64 as the reference for float32,
long double for float64) in units in the last place (ulp) of the result;
each docstring states the largest error found -- over all 2^32 inputs for
float32, over 1e7 random inputs for float64.  ``tests/test_llvm_math.py``
checks those bounds on a sample, and the special values exactly.

The polynomial coefficients are minimax (Remez) fits computed with mpmath at
60 digits, then rounded to the target precision; run this file as a script
(``python -m minixla.backends.llvm.math``, needs ``mpmath``) to re-derive them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

from minixla.backends.llvm import math_xla

__all__ = [
    "emit_exp",
    "emit_exp2",
    "emit_expm1",
    "emit_log",
    "emit_log1p",
    "emit_tanh",
    "emit_logistic",
    "emit_erf",
    "emit_erfc",
    "emit_rsqrt",
    "MATH_EMITTERS",
]


# ---------------------------------------------------------------------------
# 1. The numbers, one table per floating-point format
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Format:
    """Everything that differs between float32 and float64."""

    name: str  # LLVM intrinsic suffix: "f32" / "f64"
    bits: int  # width of the matching integer type
    mant_bits: int  # explicit mantissa bits (23 / 52)
    bias: int  # exponent bias (127 / 1023)
    # ln2 split in two: LN2_HI is ln2 rounded to this format, LN2_LO the
    # rounded remainder.  ``x - k*LN2_HI`` is computed exactly by an fma (see
    # _reduce_ln2), so together they behave like ln2 with twice the precision.
    ln2_hi: float
    ln2_lo: float
    log2e: float  # 1/ln2 rounded; only used to pick k, so rounding is harmless
    # exp: inputs outside [exp_lo, exp_hi] give 0 / +inf anyway; clamping keeps
    # the exponent arithmetic in range.  exp(x) rounds to 0 below
    # ln(2^-150) = -103.97 (f32) / ln(2^-1075) = -745.13 (f64) and overflows
    # above ln(2^128) = 88.72 / ln(2^1024) = 709.78.
    exp_lo: float
    exp_hi: float
    # expm1(x) rounds to -1 below -17.3 (f32) / -37.4 (f64).
    expm1_lo: float
    # exp2: 2^x is 0 below -150 (f32) / -1075 (f64), inf from 128 / 1024.
    exp2_lo: float
    exp2_hi: float
    # Q(r) ~ (e^r - 1 - r) / r^2 on [-ln2/2, ln2/2], coefficients of r^0, r^1, ...
    exp_q: tuple
    # G(z) ~ (2*atanh(s) - 2*s) / s^3, z = s^2 in [0, (3-2*sqrt2)^2]
    log_g: tuple
    # T(z) ~ (tanh(x) - x) / x^3, z = x^2 in [0, 0.625^2]
    tanh_t: tuple
    # tanh(x) ~ x P(z) / Q(z), z = x^2, |x| <= tanh_clamp (f32 only; P(0) = Q(0) = 1)
    tanh_p: tuple = ()
    tanh_q: tuple = ()
    tanh_clamp: float = 0.0


_F32 = _Format(
    name="f32", bits=32, mant_bits=23, bias=127,
    ln2_hi=0.6931471824645996, ln2_lo=-1.9046542121259336e-09,
    log2e=1.4426950216293335,
    exp_lo=-104.0, exp_hi=89.0, expm1_lo=-20.0, exp2_lo=-151.0, exp2_hi=129.0,
    # Remez, relative error of the fit 2^-22.9 (degree 4; e^r has degree 6)
    exp_q=(0.5, 0.16666578, 0.041666854, 0.008363141, 0.0013901285),
    # Remez, relative error 2^-21.8 (degree 2; log1p series up to s^7)
    log_g=(0.66666687, 0.39988765, 0.29580513),
    # Remez, relative error 2^-22.9 (degree 4; tanh odd polynomial of degree 11)
    tanh_t=(-0.33333328, 0.13332771, -0.053850953, 0.020997357, -0.0060969414),
    # minimax rational, relative error of the fit 2^-30.4 on [0, 8.5] (x P(x^2)/Q(x^2) of
    # degree 11/8, the form of XLA's / Eigen's f32 tanh, fitted here: see _rational_fit)
    tanh_p=(1.0, 0.13705368, 0.0039002984, 2.8657949e-05, 3.2176327e-08, -1.3415378e-11),
    tanh_q=(1.0, 0.470387, 0.027362645, 0.00039951803, 1.3331522e-06),
    tanh_clamp=8.5,
)

_F64 = _Format(
    name="f64", bits=64, mant_bits=52, bias=1023,
    ln2_hi=0.6931471805599453, ln2_lo=2.3190468138462996e-17,
    log2e=1.4426950408889634,
    exp_lo=-746.0, exp_hi=710.0, expm1_lo=-40.0, exp2_lo=-1076.0, exp2_hi=1025.0,
    # Remez, relative error 2^-52.1 (degree 9; e^r has degree 11)
    exp_q=(0.5000000000000001, 0.16666666666666644, 0.041666666666624344,
           0.00833333333335618, 0.0013888888917121425, 0.00019841269784702861,
           2.480152142270869e-05, 2.7557355491050247e-06, 2.7620034098799e-07,
           2.5068165882732464e-08),
    # Remez, relative error 2^-51.0 (degree 6; series up to s^15)
    log_g=(0.666666666666667, 0.3999999999989918, 0.28571428626106177,
           0.22222211115826268, 0.18182890369327984, 0.1533168400243779,
           0.14616875727366235),
    # Remez, relative error 2^-56.2 (degree 11; odd polynomial of degree 25)
    tanh_t=(-0.3333333333333333, 0.13333333333333042, -0.053968253967897235,
            0.02186948851901796, -0.00886323510343777, 0.003592121753498646,
            -0.0014557754294467107, 0.000589660740753017, -0.0002375909038824821,
            9.257164524656236e-05, -3.120162204020129e-05, 6.485405371362336e-06),
)

# Below this |x|, tanh uses its odd polynomial; above, 1 - 2/(e^{2|x|} + 1).
# At 0.625 the subtraction loses less than a bit (tanh >= 0.55 there), and
# the polynomial interval stays small enough for a short series.
_TANH_SMALL = 0.625


# ---------------------------------------------------------------------------
# 2. A thin wrapper over IRBuilder: constants of the right (vector) type,
#    intrinsics, and short names so the algorithms below read like math.
# ---------------------------------------------------------------------------

class _Emitter:
    def __init__(self, b: ir.IRBuilder, x: ir.Value):
        ty = x.type
        lanes = ty.count if isinstance(ty, ir.VectorType) else None
        elem = ty.element if lanes is not None else ty
        if isinstance(elem, ir.FloatType):
            fmt = _F32
        elif isinstance(elem, ir.DoubleType):
            fmt = _F64
        else:
            raise TypeError(
                f"minixla math emitters take float/double scalars or vectors, got {ty}")
        self.b, self.fmt, self.fty = b, fmt, ty
        ity = ir.IntType(fmt.bits)
        self.ity = ir.VectorType(ity, lanes) if lanes is not None else ity
        # Intrinsic name mangling, e.g. llvm.fma.v16f32 / llvm.fma.f64.
        self.suffix = f"v{lanes}{fmt.name}" if lanes is not None else fmt.name

    # -- constants (a Python scalar splats across vector lanes) --
    def c(self, v: float) -> ir.Constant:
        return ir.Constant(self.fty, v)

    def ci(self, v: int) -> ir.Constant:
        return ir.Constant(self.ity, v)

    # -- intrinsics --
    def _intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        fname = f"{name}.{self.suffix}"
        module = self.b.module
        fn = module.globals.get(fname)  # others may have declared it already
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(self.fty, [self.fty] * len(args)), fname)
        return self.b.call(fn, args)

    def fma(self, a, b, c):  # a*b + c with one rounding
        return self._intrinsic("llvm.fma", a, b, c)

    def fabs(self, a):
        return self._intrinsic("llvm.fabs", a)

    def copysign(self, mag, sign):
        return self._intrinsic("llvm.copysign", mag, sign)

    def rint(self, a):  # round to nearest, ties to even (one vrndscale)
        return self._intrinsic("llvm.rint", a)

    # -- plain IEEE arithmetic (no fast-math flags, ever) --
    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    # -- comparisons: ordered ones are false when an operand is NaN --
    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def ge(self, a, b):
        return self.b.fcmp_ordered(">=", a, b)

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def select(self, cond, a, b):
        return self.b.select(cond, a, b)

    # -- helpers shared by several functions --
    def horner(self, x, coeffs):
        """coeffs[0] + x*(coeffs[1] + x*(...)), one fma per step."""
        acc = self.c(coeffs[-1])
        for coef in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(coef))
        return acc

    def clamp(self, x, lo, hi):
        """min(max(x, lo), hi) for x that is not NaN.  NaN is sent to `hi`
        (the unordered compare is true for NaN), so later integer
        conversions never see NaN (fptosi of NaN is poison in LLVM); callers
        put NaN back with a final select."""
        x = self.select(self.b.fcmp_unordered(">", x, self.c(hi)), self.c(hi), x)
        return self.select(self.lt(x, self.c(lo)), self.c(lo), x)

    def pow2(self, k):
        """2.0**k for an integer vector k in the normal exponent range:
        write k + bias into the exponent field."""
        bits = self.b.shl(self.b.add(k, self.ci(self.fmt.bias)), self.ci(self.fmt.mant_bits))
        return self.b.bitcast(bits, self.fty)

    def to_int(self, a):
        return self.b.fptosi(a, self.ity)

    def to_float(self, k):
        return self.b.sitofp(k, self.fty)


# ---------------------------------------------------------------------------
# 3. exp and its relatives: x = k*ln2 + r,  e^x = 2^k * e^r
# ---------------------------------------------------------------------------

def _reduce_ln2(m: _Emitter, x, with_tail=False):
    """Return (k as int, r) with x = k*ln2 + r, |r| <~ ln2/2; with_tail=True
    returns (k, r, r_lo) where r + r_lo is x - k*ln2 to about twice the
    precision.

    Cody-Waite with an fma: ``t = fma(k, -LN2_HI, x)`` is *exact*, because the
    exact result is a multiple of ulp(LN2_HI) (or of ulp(x)) below 1 in
    magnitude, which fits in the mantissa (and for |x| < 1, Sterbenz's lemma
    applies).  The second step adds the tail ``-k*LN2_LO`` with one rounding;
    what that rounding lost is ``(t - r) - k*LN2_LO`` (t - r is exact).
    """
    f = m.fmt
    kf = m.rint(m.mul(x, m.c(f.log2e)))  # k only needs to be nearly right
    t = m.fma(kf, m.c(-f.ln2_hi), x)
    r = m.fma(kf, m.c(-f.ln2_lo), t)
    if not with_tail:
        return m.to_int(kf), r
    r_lo = m.fma(kf, m.c(-f.ln2_lo), m.sub(t, r))
    return m.to_int(kf), r, r_lo


def _expm1_poly(m: _Emitter, r, r_lo=None):
    """e^r - 1 for |r| <= ln2/2 (a little beyond is fine): r + r^2 * Q(r),
    or e^(r + r_lo) - 1 ~= r + (r^2 * Q(r) + r_lo) when the tail is given.

    Keeping "e^r - 1" instead of "e^r" lets expm1 reuse this, and the final
    fma rounds only once, so the result is good to ~0.5 ulp of e^r - 1."""
    q = m.horner(r, m.fmt.exp_q)
    if r_lo is None:
        return m.fma(m.mul(r, r), q, r)
    return m.add(r, m.fma(m.mul(r, r), q, r_lo))


def _scale_one_plus(m: _Emitter, p, k):
    """(1 + p) * 2^k for an integer k whose 2^k may be out of range.

    2^k itself can overflow (k = 128 in f32) or be subnormal, so we multiply
    in two steps by 2^(k>>1) and 2^(k - (k>>1)), both normal numbers.  The
    first product is exact (power-of-two scaling of a normal number); the
    second rounds once, which gives correctly rounded gradual underflow
    (subnormal results) and exact overflow to +inf."""
    k1 = m.b.ashr(k, m.ci(1))
    k2 = m.b.sub(k, k1)
    s1 = m.pow2(k1)
    y = m.fma(p, s1, s1)  # (1 + p) * s1, rounded once
    return m.mul(y, m.pow2(k2))


def emit_exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e^x.

    Method: clamp x to [lo, hi] (beyond them the result is 0 / +inf anyway);
    ``x = k*ln2 + r`` with k = rint(x/ln2) and a Cody-Waite two-constant
    reduction done with fma; ``e^r - 1 = r + r^2 Q(r)`` with a minimax Q
    (degree 4 for f32, 9 for f64); result ``(1 + (e^r - 1)) * 2^k`` with 2^k
    applied in two halves so overflow and subnormal results round correctly.

    Measured max error: f32 1.08 ulp (all 2^32 inputs; subnormal results
    included), f64 1.06 ulp (1e7 random points in [-750, 712] and [-1, 1]).
    The two roundings (of e^r - 1, then of 1 + it) and the rounding of r
    make up most of it; carrying r's rounding error along would reach 0.9
    ulp for three more instructions.

    Special values: exp(nan) = nan, exp(+inf) = +inf, exp(-inf) = +0,
    exp(±0) = 1, x > 88.72 (f32) / 709.78 (f64) -> +inf, gradual underflow
    down to 2^-149 / 2^-1074, then +0.

    XLA counterpart: ``exponential``; XLA:CPU's ``GenerateVF32Exp``
    (``xla/service/cpu/llvm_ir_runtime.cc``, a Cephes polynomial) clamps the
    exponent and flushes results below 2^-126 to 0 -- this one keeps gradual
    underflow; newer XLA has ``xla/codegen/math/exp.cc`` for f64.
    """
    m = _Emitter(b, x)
    if m.fmt is _F32:  # XLA:CPU's algorithm, bit for bit (math_xla.py)
        return math_xla.exp(m, x)
    f = m.fmt
    xc = m.clamp(x, f.exp_lo, f.exp_hi)
    k, r = _reduce_ln2(m, xc)
    y = _scale_one_plus(m, _expm1_poly(m, r), k)
    # NaN was clamped to exp_hi above; give it back (x + x quiets an sNaN).
    return m.select(m.isnan(x), m.add(x, x), y)


def emit_exp2(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """2^x.

    Method: clamp; k = rint(x), r = x - k (exact, |r| <= 1/2); 2^r = e^(r ln2)
    with ``t = r*ln2`` formed as ``fma(r, LN2_HI, r*LN2_LO)`` (so t is accurate
    to half an ulp) and then the same polynomial and two-step scaling as exp.
    Integer x gives exactly 2^x (r = 0, so p = 0 and only the exact scaling
    remains).

    Measured max error: f32 1.07 ulp (all 2^32 inputs), f64 1.06 ulp (1e7
    random points in [-1080, 1030]).

    Special values: exp2(nan) = nan, exp2(+inf) = +inf, exp2(-inf) = +0,
    exp2(n) exact for integers n, overflow to +inf at 128 / 1024, gradual
    underflow to 2^-149 / 2^-1074.

    XLA counterpart: none as an HLO op (JAX lowers ``lax.exp2`` to
    ``exp(x * ln2)``, which loses accuracy for large |x|); shares XLA's exp
    scheme.
    """
    m = _Emitter(b, x)
    f = m.fmt
    xc = m.clamp(x, f.exp2_lo, f.exp2_hi)
    kf = m.rint(xc)
    r = m.sub(xc, kf)  # exact: x and k are close and k is an integer
    t = m.fma(r, m.c(f.ln2_hi), m.mul(r, m.c(f.ln2_lo)))
    y = _scale_one_plus(m, _expm1_poly(m, t), m.to_int(kf))
    return m.select(m.isnan(x), m.add(x, x), y)


def emit_expm1(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e^x - 1, accurate near 0 (relative error) where exp(x) - 1 cancels.

    Method: clamp to [lo, hi] (below lo the result is -1 after rounding);
    reduce ``x = k*ln2 + r (+ r_lo)`` as in exp, but keeping the rounding
    error r_lo of r; ``p = e^r - 1`` by the same polynomial, kept as an
    unrounded pair p_hi + p_lo.  Then ``e^x - 1 = 2^k*p + (2^k - 1)``; with
    k1 = k>>1, k2 = k - k1 we evaluate
    ``(2^k1 * p + (2^k1 - 2^-k2)) * 2^k2`` -- the inner constant is exact for
    small k (so k = 0 returns p itself), each fma rounds once, and the outer
    factor is an exact power of two (or overflows to +inf correctly at the
    top end).

    Measured max error: f32 1.33 ulp (all 2^32 inputs), f64 1.40 ulp (1e7
    random points in [-50, 712], [-2, 2] and log-uniform tiny |x|).

    Special values: expm1(nan) = nan, expm1(+inf) = +inf, expm1(-inf) = -1,
    expm1(±0) = ±0, expm1(tiny) = tiny (subnormals included), overflow at the
    same x as exp.

    XLA counterpart: ``exponential-minus-one``; XLA's elemental emitter
    (``EmitExpm1`` in ``xla/service/elemental_ir_emitter.cc``) switches
    between a short Taylor series near 0 and ``exp(x) - 1``.
    """
    m = _Emitter(b, x)
    if m.fmt is _F32:  # XLA:CPU's algorithm, bit for bit (math_xla.py)
        return math_xla.expm1(m, x)
    f = m.fmt
    xc = m.clamp(x, f.expm1_lo, f.exp_hi)
    k, r, r_lo = _reduce_ln2(m, xc, with_tail=True)
    # p = e^(r + r_lo) - 1 = r + h, kept unrounded as p_hi + p_lo (Fast2Sum,
    # exact because |h| < |r|): for k = 1, 2 the result is 2^k*p + (2^k - 1)
    # with little cancellation-free headroom, and the rounding error of a
    # plain p would be magnified to a full ulp.
    h = m.fma(m.mul(r, r), m.horner(r, f.exp_q), r_lo)
    p_hi = m.add(r, h)
    p_lo = m.sub(h, m.sub(p_hi, r))
    k1 = m.b.ashr(k, m.ci(1))
    k2 = m.b.sub(k, k1)
    s1 = m.pow2(k1)
    inv_s2 = m.pow2(m.b.neg(k2))
    inner = m.fma(s1, p_hi, m.sub(s1, inv_s2))
    y = m.mul(m.fma(s1, p_lo, inner), m.pow2(k2))
    # The reduction turns x = -0.0 into r = +0.0; zeros return themselves.
    y = m.select(m.eq(x, m.c(0.0)), x, y)
    return m.select(m.isnan(x), m.add(x, x), y)


# ---------------------------------------------------------------------------
# 4. log and log1p: x = 2^e * m with m in [sqrt(1/2), sqrt(2))
# ---------------------------------------------------------------------------

def _log_finite_positive(m: _Emitter, x, correction=None):
    """log(x) + correction for finite x > 0 (other inputs give garbage,
    patched later).  `correction` is a term below ulp(x)/x (log1p's c/u),
    added in before the last two roundings rather than after them.

    1. Subnormals have no implicit leading 1: scale them by 2^mant_bits first
       (an exact multiplication) and remember to subtract mant_bits from e.
    2. Split the bits: e = biased exponent - bias; m = mantissa with the
       exponent field of 1.0, so m is in [1, 2).  If m > sqrt2, halve it and
       bump e, so m is in [sqrt(1/2), sqrt(2)) and f = m - 1 (exact) is in
       [-0.29, 0.42]: the series below converges fast and log(1) is exactly 0.
    3. log(1 + f) = 2*atanh(s), s = f/(2+f), |s| < 0.1716:
       ``log1p(f) = f - hf + s*(hf + R)``, hf = f^2/2, R = s^2 * G(s^2)
       (fdlibm's arrangement: f - hf carries almost all of the value and is
       nearly exact; the rounding errors of s and G only touch the small term).
    4. log(x) = e*ln2 + log1p(f): ``fma(e, LN2_HI, log1p(f) + e*LN2_LO)`` --
       the fma makes e*LN2_HI exact without needing zero low bits in LN2_HI.
    """
    f = m.fmt
    b = m.b
    tiny = m.lt(x, m.c(2.0 ** (1 - f.bias)))  # below the smallest normal
    x = m.select(tiny, m.mul(x, m.c(2.0 ** f.mant_bits)), x)
    e_adjust = m.select(tiny, m.ci(-f.mant_bits), m.ci(0))

    bits = b.bitcast(x, m.ity)
    e = b.sub(b.lshr(bits, m.ci(f.mant_bits)), m.ci(f.bias))
    e = b.add(e, e_adjust)
    mant_mask = (1 << f.mant_bits) - 1
    one_bits = f.bias << f.mant_bits  # bit pattern of 1.0
    mant = b.bitcast(b.or_(b.and_(bits, m.ci(mant_mask)), m.ci(one_bits)), m.fty)

    big = b.fcmp_ordered(">", mant, m.c(math.sqrt(2.0)))
    mant = m.select(big, m.mul(mant, m.c(0.5)), mant)
    e = m.select(big, b.add(e, m.ci(1)), e)

    fr = m.sub(mant, m.c(1.0))  # exact (Sterbenz)
    s = m.div(fr, m.add(fr, m.c(2.0)))
    z = m.mul(s, s)
    big_r = m.mul(z, m.horner(z, f.log_g))
    hf = m.mul(m.mul(fr, fr), m.c(0.5))
    ef = m.to_float(e)
    # log1p(f) + e*LN2_LO = f - (hf - (s*(hf + R) + e*LN2_LO))
    if correction is None:
        low_bits = m.mul(ef, m.c(f.ln2_lo))
    else:
        low_bits = m.fma(ef, m.c(f.ln2_lo), correction)
    tail = m.fma(s, m.add(hf, big_r), low_bits)
    lo = m.sub(fr, m.sub(hf, tail))
    return m.fma(ef, m.c(f.ln2_hi), lo)


def _log_specials(m: _Emitter, x, y):
    """Patch the IEEE special cases of log into y."""
    y = m.select(m.eq(x, m.c(math.inf)), m.c(math.inf), y)
    y = m.select(m.eq(x, m.c(0.0)), m.c(-math.inf), y)  # +0 and -0
    # x < 0 or x is NaN (the unordered compare is true for NaN) -> NaN
    return m.select(m.b.fcmp_unordered("<", x, m.c(0.0)), m.c(math.nan), y)


def emit_log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Natural logarithm.

    Method: exponent/mantissa split (subnormals pre-scaled by 2^23 / 2^52),
    mantissa folded into [sqrt(1/2), sqrt(2)), then
    ``log1p(f) = f - f^2/2 + s*(f^2/2 + s^2 G(s^2))`` with s = f/(2+f) and a
    minimax G (degree 2 for f32, 6 for f64), and ``+ e*ln2`` in split
    precision via fma.  See _log_finite_positive for the details.

    Measured max error: f32 0.84 ulp (all 2^32 inputs), f64 0.86 ulp (8e6
    random bit patterns over all positive finite numbers including
    subnormals, and values in [0.5, 2]).

    Special values: log(+0) = log(-0) = -inf, log(x<0) = nan, log(nan) = nan,
    log(+inf) = +inf, log(1) = +0 exactly, log(subnormal) accurate.

    XLA counterpart: ``log``; XLA:CPU's ``GenerateVF32Log``
    (``xla/service/cpu/llvm_ir_runtime.cc``, a Cephes polynomial in m - 1)
    clamps inputs to the smallest normal first, so log(subnormal) is wrong
    there; here subnormals are renormalized.
    """
    m = _Emitter(b, x)
    if m.fmt is _F32:  # XLA:CPU's algorithm, bit for bit (math_xla.py)
        return math_xla.log(m, x)
    return _log_specials(m, x, _log_finite_positive(m, x))


def emit_log1p(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log(1 + x), accurate for tiny x.

    Method: u = 1 + x rounds; the rounding error c = x - (u - 1) is exact
    when it matters (|x| < 1, Fast2Sum).  Then
    ``log1p(x) = log(u) + log(1 + c/u) ~= log(u) + c/u``, with log(u) from the
    log code (accurate near 1 because f = u - 1 is exact there) and c/u
    added inside it, before its last two roundings.

    Measured max error: f32 0.86 ulp (all 2^32 inputs), f64 0.82 ulp (9e6
    random points in [-1, 10], log-uniform tiny ±x, and up to 1e300).

    Special values: log1p(-1) = -inf, log1p(x < -1) = nan, log1p(nan) = nan,
    log1p(+inf) = +inf, log1p(±0) = ±0, log1p(tiny) = tiny.

    XLA counterpart: ``log-plus-one``; XLA's elemental emitter
    (``EmitLog1p``; newer ``xla/codegen/math/log1p.cc``) switches between a
    short series near 0 and ``log(1 + x)``.
    """
    m = _Emitter(b, x)
    if m.fmt is _F32:  # XLA:CPU's algorithm, bit for bit (math_xla.py)
        return math_xla.log1p(m, x)
    u = m.add(m.c(1.0), x)
    c = m.sub(x, m.sub(u, m.c(1.0)))
    y = _log_finite_positive(m, u, correction=m.div(c, u))
    y = _log_specials(m, u, y)
    y = m.select(m.eq(x, m.c(math.inf)), x, y)  # c = inf - inf would be NaN
    return m.select(m.eq(x, m.c(0.0)), x, y)  # keep the sign of zero


# ---------------------------------------------------------------------------
# 5. tanh and logistic, built on exp
# ---------------------------------------------------------------------------

def emit_tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Hyperbolic tangent.

    float32 (with ``minixla_fast_tanh``; by default float32 takes the exp-based method below,
    1.33 ulp: derivatives like ``1 - tanh^2`` amplify a 4.8-ulp tanh past what users comparing
    with JAX expect) -- method: a = min(|x|, 8.5) (NaN stays NaN); ``a P(a^2) / Q(a^2)`` with a
    minimax rational of degree 11/8 (P(0) = Q(0) = 1 exactly, so tiny a returns a itself);
    min(result, 1); ``copysign(result, x)``. 9 fma, 1 division, no exp: 17 vector
    instructions instead of 40 for the exp-based form below (measured 1.2 -> 0.57 ns per
    element, one core, 256-bit, in cache; see docs/elementwise_math.md). This is the form
    XLA:CPU uses (``EmitFastTanh``: Eigen's degree 13/6 rational clamped at ~7.9), with our
    own coefficients (``_rational_fit``).

    Measured max error (f32): 4.82 ulp (every non-negative float below 10, exhaustively; the
    function is odd and above 8.5 the result is exactly 1); XLA:CPU's tanh through ``jax.jit``:
    4.64 ulp (every 7th float of [0, 12]). The error is the rounding of the two polynomials
    and of the division near tanh ~ 1; the fit itself is 2^-30.4 relative (0.01 ulp).

    float64 -- method: on a = |x|
    * a < 0.625: odd minimax polynomial ``a + a^3 T(a^2)`` (T of degree 4 for
      f32, 11 for f64), one final fma so tiny a returns a exactly;
    * a >= 0.625: ``1 - 2/(e^{2a} + 1)`` (no harmful cancellation: the result
      is >= 0.55); e^{2a} = +inf for large a gives exactly 1, so no clamp
      is needed;
    then ``copysign(result, x)``.  Both sides are computed and one is
    selected, so the code stays branch-free.

    Measured max error: f64 1.34 ulp (1.2e7 random points: log-uniform |x| from 1e-30 to
    30, uniform [-10, 10]); the worst cases are just above 0.625, on the exp side. (The same
    form in f32 measured 1.33 ulp over all inputs; it is ``_emit_tanh_via_exp``.)

    Special values: tanh(±0) = ±0, tanh(±inf) = ±1, tanh(nan) = nan,
    tanh(tiny) = tiny (tanh(1e-20) = 1e-20, subnormals too), |x| >= 8.5 (f32)
    / > 19.1 (f64) gives exactly ±1.

    XLA counterpart: ``tanh``; XLA:CPU's ``GenerateVF32Tanh`` calls
    ``llvm_ir::EmitFastTanh`` (``xla/service/llvm_ir/math_ops.cc``): x itself
    for tiny |x|, otherwise a clamped odd rational approximation (Eigen's).
    """
    m = _Emitter(b, x)
    from minixla.config import config
    if m.fmt.tanh_p and config.minixla_fast_tanh:
        return _emit_tanh_rational(m, x)
    if m.fmt is _F32:  # XLA:CPU's algorithm, bit for bit (math_xla.py)
        return math_xla.tanh(m, x)
    return _emit_tanh_via_exp(m, x)


def _emit_tanh_rational(m: _Emitter, x):
    f = m.fmt
    a = m.fabs(x)
    # (the ordered compare is false for NaN: NaN goes through and stays NaN)
    a = m.select(m.b.fcmp_ordered(">", a, m.c(f.tanh_clamp)), m.c(f.tanh_clamp), a)
    z = m.mul(a, a)
    y = m.div(m.mul(a, m.horner(z, f.tanh_p)), m.horner(z, f.tanh_q))
    y = m.select(m.b.fcmp_ordered(">", y, m.c(1.0)), m.c(1.0), y)  # rounding must not pass 1
    return m.copysign(y, x)


def _emit_tanh_via_exp(m: _Emitter, x):
    b = m.b
    a = m.fabs(x)
    z = m.mul(a, a)
    small = m.fma(m.mul(a, z), m.horner(z, m.fmt.tanh_t), a)
    e2a = emit_exp(b, m.add(a, a))
    large = m.sub(m.c(1.0), m.div(m.c(2.0), m.add(e2a, m.c(1.0))))
    # NaN: `a < 0.625` is false, so the large branch (NaN from exp) is taken.
    y = m.select(m.lt(a, m.c(_TANH_SMALL)), small, large)
    return m.copysign(y, x)


def emit_logistic(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """The logistic sigmoid 1/(1 + e^-x).

    Method: with e = exp(-|x|), which is in (0, 1] and never overflows,
    ``1/(1 + e)`` for x >= 0 and ``e/(1 + e)`` for x < 0 (the same value,
    multiplied through by e^x).  The negative side therefore follows e^x
    down into the subnormals instead of computing 1 - (something near 1).

    Measured max error: f32 2.40 ulp (all 2^32 inputs), f64 2.38 ulp (8e6
    random points in [-760, 760] and [-5, 5]): exp's ~1 ulp, the rounding of
    1 + e and the division add up, worst near x = -4.

    Special values: logistic(-inf) = 0, logistic(+inf) = 1,
    logistic(nan) = nan, logistic(0) = 0.5, logistic(-100) in f32 =
    3.7e-44 (subnormal, not 0).

    XLA counterpart: ``logistic``; XLA rewrites it (``LogisticExpander``)
    as ``1/(1 + exp(-x))`` before code generation.
    """
    m = _Emitter(b, x)
    if m.fmt is _F32:  # XLA:CPU's algorithm, bit for bit (math_xla.py)
        return math_xla.logistic(m, x)
    e = emit_exp(b, m.b.fneg(m.fabs(x)))
    num = m.select(m.ge(x, m.c(0.0)), m.c(1.0), e)
    # NaN: e is NaN, so num/(1 + e) is NaN either way.
    return m.div(num, m.add(m.c(1.0), e))


def emit_erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """The error function, float32 only (float64 calls libm: ``scalar_ops.libm_call``).

    Method: XLA:CPU's, bit for bit (``math_xla.erf``): ``x P(x^2) / Q(x^2)`` with P of degree 4
    and Q of degree 6 in x^2, +-1 from |x| = 3.8325. erf(nan) = nan, erf(+-inf) = +-1."""
    m = _Emitter(b, x)
    if m.fmt is not _F32:
        raise TypeError(f"emit_erf is float32 only, got {x.type}")
    return math_xla.erf(m, x)


def emit_erfc(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 - erf(x) without the cancellation, float32 only (float64 calls libm).

    Method: XLA:CPU's expansion of ``chlo.erfc``, bit for bit (``math_xla.erfc``): 1 - x P(x^2)
    below |x| = 1, ``exp(-x^2)/|x| * R(1/x^2)`` above (two rationals, split at |x| = 2), 0 once
    x^2 > 88.72, 2 - that for negative x. erfc(nan) = nan, erfc(+inf) = 0, erfc(-inf) = 2."""
    m = _Emitter(b, x)
    if m.fmt is not _F32:
        raise TypeError(f"emit_erfc is float32 only, got {x.type}")
    return math_xla.erfc(m, x)


def emit_rsqrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1/sqrt(x), float32 only (float64 is ``1 / sqrt(x)``: ``scalar_ops``), x86 only.

    Method: XLA:CPU's, bit for bit (``math_xla.rsqrt``): the CPU's ``rsqrtps`` estimate and one
    Newton-Raphson step; the estimate itself for ±0 (±inf), +inf (0), negatives (NaN) and
    subnormals (read as zero). ~1-2 ulp, not correctly rounded, as XLA's."""
    m = _Emitter(b, x)
    if m.fmt is not _F32:
        raise TypeError(f"emit_rsqrt is float32 only, got {x.type}")
    return math_xla.rsqrt(m, x)


# HLO opcode names (and jax.lax primitive names) -> emitter.
MATH_EMITTERS = {
    "rsqrt": emit_rsqrt,
    "exponential": emit_exp,
    "exp": emit_exp,
    "exp2": emit_exp2,
    "exponential-minus-one": emit_expm1,
    "expm1": emit_expm1,
    "log": emit_log,
    "log-plus-one": emit_log1p,
    "log1p": emit_log1p,
    "tanh": emit_tanh,
    "logistic": emit_logistic,
    "erf": emit_erf,
    "erfc": emit_erfc,
}


# ---------------------------------------------------------------------------
# Appendix: where the coefficients come from
# ---------------------------------------------------------------------------

def _remez(fn, lo, hi, degree, grid=4000, iters=30):
    """Minimax polynomial (relative error) of `degree` for fn on [lo, hi].

    The classic Remez exchange: solve for a polynomial whose relative error
    equioscillates on degree+2 reference points, move the references to the
    extrema of the new error curve (found on a dense grid), repeat."""
    import mpmath as mp

    n = degree + 2
    refs = sorted((lo + hi) / 2 + (hi - lo) / 2 * mp.cos(mp.pi * j / (n - 1))
                  for j in range(n))
    dense = [lo + (hi - lo) * mp.mpf(i) / grid for i in range(grid + 1)]
    fdense = [fn(t) for t in dense]
    for _ in range(iters):
        a = mp.matrix(n, n)
        rhs = mp.matrix(n, 1)
        for j, t in enumerate(refs):
            ft = fn(t)
            for i in range(degree + 1):
                a[j, i] = t ** i
            a[j, degree + 1] = (-1) ** j * abs(ft)  # error weighted by |f|
            rhs[j] = ft
        sol = mp.lu_solve(a, rhs)
        coeffs = [sol[i] for i in range(degree + 1)]
        err = [(mp.polyval(coeffs[::-1], t) - ft) / ft for t, ft in zip(dense, fdense)]
        extrema = []  # alternating-sign local maxima of |err|
        for i, e in enumerate(err):
            if (i == 0 or abs(e) >= abs(err[i - 1])) and (
                    i == len(err) - 1 or abs(e) >= abs(err[i + 1])):
                if extrema and mp.sign(e) == mp.sign(err[extrema[-1]]):
                    if abs(e) > abs(err[extrema[-1]]):
                        extrema[-1] = i
                else:
                    extrema.append(i)
        while len(extrema) > n:
            extrema.pop(0 if abs(err[extrema[0]]) < abs(err[extrema[-1]]) else -1)
        if len(extrema) < n:
            break
        refs = [dense[i] for i in extrema]
    return coeffs, max(abs(e) for e in err)


def _rational_fit(fn, hi, num_degree, den_degree, points=6000, iters=60):
    """x P(x^2) / Q(x^2) ~ fn(x) on (0, hi], P(0) = Q(0) = 1, minimizing the largest relative
    error: Sanathanan-Koerner iterations (the linearized residual ``P - g Q`` divided by the
    previous Q) with Lawson's reweighting towards minimax, in float64 on z = x^2 scaled to
    [0, 1]. Returns (P, Q) coefficients in z and the fit's relative error."""
    import numpy as np
    t = np.cos(np.pi * (np.arange(points) + 0.5) / points)
    x = np.sort(hi * (1 + t) / 2)
    x = x[x > 1e-4]
    g = np.array([float(fn(v)) for v in x]) / x  # fn(x) / x as a function of z
    scale = hi * hi
    u = x * x / scale
    weights, q_prev, best = np.ones_like(u), np.ones_like(u), None
    for _ in range(iters):
        a = np.hstack([np.vander(u, num_degree + 1, increasing=True)[:, 1:],
                       -g[:, None] * np.vander(u, den_degree + 1, increasing=True)[:, 1:]])
        row = weights / (g * q_prev)
        sol = np.linalg.lstsq(a * row[:, None], (g - 1) * row, rcond=None)[0]
        p, q = np.r_[1.0, sol[:num_degree]], np.r_[1.0, sol[num_degree:]]
        q_prev = np.polyval(q[::-1], u)
        err = (np.polyval(p[::-1], u) / q_prev - g) / g
        if best is None or np.abs(err).max() < best[0]:
            best = (np.abs(err).max(), p, q)
        weights = weights * np.sqrt(np.abs(err)) + 1e-300
        weights /= weights.max()
    e, p, q = best
    return [c / scale ** k for k, c in enumerate(p)], [c / scale ** k for k, c in enumerate(q)], e


def _derive_tables():  # pragma: no cover - run by hand
    import mpmath as mp
    import numpy as np

    mp.mp.dps = 60

    def exp_q(r):  # (e^r - 1 - r) / r^2
        return mp.mpf(1) / 2 + r / 6 if abs(r) < 1e-12 else (mp.exp(r) - 1 - r) / r ** 2

    def log_g(z):  # (2 atanh(s) - 2 s) / s^3, z = s^2
        s = mp.sqrt(z)
        return mp.mpf(2) / 3 + 2 * z / 5 if z < 1e-20 else (2 * mp.atanh(s) - 2 * s) / s ** 3

    def tanh_t(z):  # (tanh(x) - x) / x^3, z = x^2
        t = mp.sqrt(z)
        return -mp.mpf(1) / 3 + 2 * z / 15 if z < 1e-20 else (mp.tanh(t) - t) / t ** 3

    ln2 = mp.log(2)
    fits = [("exp_q", exp_q, -ln2 / 2, ln2 / 2, 4, 9),
            ("log_g", log_g, mp.mpf(0), (3 - 2 * mp.sqrt(2)) ** 2, 2, 6),
            ("tanh_t", tanh_t, mp.mpf(0), mp.mpf(_TANH_SMALL) ** 2, 4, 11)]
    for name, fn, lo, hi, deg32, deg64 in fits:
        for deg, np_type in ((deg32, np.float32), (deg64, np.float64)):
            coeffs, err = _remez(fn, lo, hi, deg)
            vals = ", ".join(str(np_type(float(c))) if np_type is np.float32 else repr(float(c))
                             for c in coeffs)
            print(f"{np_type.__name__} {name}=({vals})  # relative error "
                  f"2^{float(mp.log(err, 2)):.1f}")
    p, q, err = _rational_fit(mp.tanh, float(_F32.tanh_clamp), 5, 4)
    print("float32 tanh_p=(" + ", ".join(str(np.float32(c)) for c in p) + ")")
    print("float32 tanh_q=(" + ", ".join(str(np.float32(c)) for c in q) + f")  # relative error "
          f"2^{float(mp.log(err, 2)):.1f}")
    for np_type in (np.float32, np.float64):
        hi = np_type(float(ln2))
        print(np_type.__name__, "ln2_hi =", repr(float(hi)),
              "ln2_lo =", repr(float(np_type(float(ln2 - mp.mpf(float(hi)))))))


if __name__ == "__main__":  # pragma: no cover
    _derive_tables()
