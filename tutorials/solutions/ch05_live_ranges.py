"""Reference solution of tutorial 05's exercise (see ``tutorials/exercises/ch05_live_ranges.py``)."""

BITCASTS = {"reshape", "bitcast"}


def live_ranges(module) -> dict:
    schedule = module.entry.instructions
    step = {instr: n for n, instr in enumerate(schedule)}
    value = {}  # instruction -> the value it names
    for instr in schedule:
        value[instr] = value[instr.operands[0]] if instr.opcode in BITCASTS else instr
    last_use = {}
    for instr in schedule:
        for o in instr.operands:
            last_use[value[o]] = step[instr]
    root = module.entry.root
    returned = {value[o] for o in (root.operands if root.opcode == "tuple" else [root])}
    out = {}
    for instr in schedule:
        if value[instr] is not instr or instr.opcode in ("parameter", "constant", "tuple"):
            continue
        end = len(schedule) if instr in returned else max(last_use.get(instr, step[instr]), step[instr])
        out[instr.name] = (step[instr], end)
    return out
