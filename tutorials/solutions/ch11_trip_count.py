"""Reference solution of tutorial 11's exercise (see ``tutorials/exercises/ch11_trip_count.py``)."""


def _const(instr):
    if instr.opcode == "constant" and instr.shape.rank == 0 and instr.shape.dtype.kind in "iu":
        return int(instr.literal)
    return None


def _element(instr, param):
    if instr.opcode == "get-tuple-element" and instr.operands[0] is param:
        return instr.attrs["index"]
    return None


def trip_count(loop):
    cond, body = loop.called
    init = loop.operands[0]
    root = cond.root
    if init.opcode != "tuple" or root.opcode != "compare" or root.attrs["direction"] not in ("LT", "LE"):
        return None
    k = _element(root.operands[0], cond.parameters[0])
    n = _const(root.operands[1])
    if k is None or n is None or _const(init.operands[k]) is None or body.root.opcode != "tuple":
        return None
    start = _const(init.operands[k])
    step = body.root.operands[k]
    if step.opcode != "add":
        return None
    p = body.parameters[0]
    for a, b in (step.operands, step.operands[::-1]):
        s = _const(b)
        if _element(a, p) == k and s is not None and s > 0:
            n += root.attrs["direction"] == "LE"
            return max(0, -(-(n - start) // s))
    return None
