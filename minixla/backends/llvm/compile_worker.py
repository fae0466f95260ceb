"""The compile worker: a process of its own that turns kernel IR into object code.

``compile_server.py`` starts it (``python -c`` loading this file by path) and talks to it over
its stdin/stdout. It imports nothing of minixla but ``target.py`` (loaded by path too), so
it starts in ~0.2 s and never pulls in numpy or jax.

Frames, little-endian::

    request:  u64 id, u32 n, n bytes of LLVM IR text (one kernel module, or several separated
                                   by NUL bytes: linked into the first and compiled as one)
    reply:    u64 id, u8 status, u32 n, n bytes  (status 0: an ELF object file,
                                                   status 1: the error message, UTF-8)

The first reply, id 0, says the worker is ready. The worker compiles exactly as the parent
would (``target.parse`` / ``target.optimize`` / the host target machine), so an object from
here is the same machine code the parent would have generated. End of input: it exits.
"""
import importlib.util
import os
import signal
import struct
import sys

REQUEST = struct.Struct("<QI")
REPLY = struct.Struct("<QBI")


def _load_target():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "target.py")
    spec = importlib.util.spec_from_file_location("minixla_compile_worker_target", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read_exact(stream, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the terminal is for the parent
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    target = _load_target()
    machine = target.host_target_machine()

    def reply(rid: int, status: int, payload: bytes) -> None:
        stdout.write(REPLY.pack(rid, status, len(payload)) + payload)
        stdout.flush()

    reply(0, 0, b"")
    while (head := _read_exact(stdin, REQUEST.size)) is not None:
        rid, n = REQUEST.unpack(head)
        text = _read_exact(stdin, n)
        if text is None:
            return
        try:
            first, *rest = text.decode().split(target.BUNDLE_SEPARATOR)
            module = target.parse(first)
            for other in rest:
                module.link_in(target.parse(other))
            target.optimize(module)
            reply(rid, 0, machine.emit_object(module))
        except Exception as e:  # a bad module: the parent compiles it itself and reports
            reply(rid, 1, f"{type(e).__name__}: {e}".encode())


if __name__ == "__main__":
    main()
