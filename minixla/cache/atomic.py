"""Atomic file writes for the caches (the persistent compilation cache's entries, its source
memo, the GEMM library's object files): a reader -- another process, a later run -- sees the
old file or the whole new one, never a partial file, because the data goes to a temporary file
in the same directory first and ``os.replace`` (atomic on POSIX) puts it in place."""
from __future__ import annotations

import os
import tempfile


def write_atomically(path: str, data: bytes, prefix: str) -> None:
    """Write ``data`` to ``path`` atomically, through ``<prefix>*.tmp`` in ``path``'s directory.
    Raises ``OSError`` (unwritable directory, full disk, ...) after removing the temporary file."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            _write_all(f, data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_all(f, data: bytes) -> None:
    """(Separate so a test can simulate a full disk.)"""
    f.write(data)
