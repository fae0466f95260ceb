"""Reference solution of tutorial 06's exercise (see ``tutorials/exercises/ch06_saxpy.py``)."""
from llvmlite import ir

from minixla.backends.llvm.loops import for_loop


def emit_saxpy(module):
    f32 = ir.FloatType()
    fnty = ir.FunctionType(ir.VoidType(), [f32, ir.PointerType(), ir.PointerType(), ir.IntType(64)])
    fn = ir.Function(module, fnty, name="saxpy")
    a, x, y, n = fn.args
    x.add_attribute("noalias")
    y.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with for_loop(b, 0, n) as i:
        xp = b.gep(x, [i], inbounds=True, source_etype=f32)
        yp = b.gep(y, [i], inbounds=True, source_etype=f32)
        ax = b.fmul(a, b.load(xp, typ=f32))
        b.store(b.fadd(ax, b.load(yp, typ=f32)), yp)
    b.ret_void()
    return fn
