"""The cache directory: one file per entry, written atomically, checked when read
(JAX's ``LRUCache`` in ``jax/_src/lru_cache.py`` and ``compilation_cache.py``).

An entry file ``minixla-<key>.mxc`` is::

    b"MXLACHE1"  sha256(body) (32 bytes)  body = u32 header length, header (JSON), payload

The header names the key, the program, the backend, the versions and the host target the
code was made for, and the compile time the entry saves. ``read`` checks the magic, the
checksum, the key, the format and versions, and the host CPU again; any mismatch (a truncated
or garbled file, a file from another minixla or another CPU, a directory in the entry's place)
is a ``CompilationCacheWarning`` and a miss, and the next write replaces the entry. Writes go to
a temporary file in the same directory and are renamed into place (``os.replace``), so a reader
never sees half an entry and concurrent writers of one key leave one whole entry. The least
recently used entries (by modification time, which a hit refreshes) are deleted once the
entries exceed the size cap; files this module did not write are never touched.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import time
import warnings

from minixla.cache import atomic

MAGIC = b"MXLACHE1"
PREFIX, SUFFIX = "minixla-", ".mxc"
_ENTRY_RE = re.compile(r"^minixla-[0-9a-f]{64}\.mxc$")
_TEMP_RE = re.compile(r"^\.minixla-([0-9a-f]{64}\..*|sources-.*)\.tmp$")
#: the source fingerprint's memo (``key.source_fingerprint``)
_MEMO_RE = re.compile(r"^minixla-sources-[0-9a-f]{64}\.txt$")
#: JAX's persistent-cache entries (``jax/_src/lru_cache.py``: ``<module name>-<key>-cache``, and
#: ``-atime`` stamps when JAX caps its cache's size); never evicted or cleared here
JAX_ENTRY_RE = re.compile(r"^(?P<name>.+)-(?P<key>[0-9a-f]{64})-(?P<kind>cache|atime)$")
#: temporary files older than this (seconds) are a crashed writer's: eviction removes them
STALE_TEMP_S = 3600.0


class CompilationCacheWarning(UserWarning):
    """A persistent-cache entry could not be read or written; minixla compiled normally."""


def warn(message: str) -> None:
    warnings.warn(f"minixla compilation cache: {message}", CompilationCacheWarning, stacklevel=2)


def entry_path(directory: str, key: str) -> str:
    return os.path.join(directory, f"{PREFIX}{key}{SUFFIX}")


def encode(header: dict, payload: bytes) -> bytes:
    h = json.dumps(header, sort_keys=True).encode()
    body = struct.pack("<I", len(h)) + h + payload
    return MAGIC + hashlib.sha256(body).digest() + body


class BadEntry(ValueError):
    """Why an entry file cannot be used."""


def decode(data: bytes, check: bool = True) -> tuple[dict, bytes]:
    """(header, payload) of an entry file's bytes; raises BadEntry."""
    if len(data) < len(MAGIC) + 36 or data[:len(MAGIC)] != MAGIC:
        raise BadEntry("not a minixla cache entry (bad magic or truncated)")
    digest, body = data[len(MAGIC):len(MAGIC) + 32], data[len(MAGIC) + 32:]
    if check and hashlib.sha256(body).digest() != digest:
        raise BadEntry("checksum mismatch (corrupted or truncated)")
    (n,) = struct.unpack("<I", body[:4])
    try:
        header = json.loads(body[4:4 + n])
    except ValueError:
        raise BadEntry("unreadable header") from None
    if not isinstance(header, dict):
        raise BadEntry("unreadable header")
    return header, body[4 + n:]


def read_header(path: str) -> dict:
    """The header of the entry at ``path``, without reading the payload; raises OSError/BadEntry."""
    with open(path, "rb") as f:
        head = f.read(len(MAGIC) + 36)
        if len(head) < len(MAGIC) + 36 or head[:len(MAGIC)] != MAGIC:
            raise BadEntry("not a minixla cache entry")
        (n,) = struct.unpack("<I", head[len(MAGIC) + 32:])
        try:
            return json.loads(f.read(n))
        except ValueError:
            raise BadEntry("unreadable header") from None


def read(directory: str, key: str, expect: dict) -> tuple[dict, bytes] | None:
    """(header, payload) of the entry under ``key``, or None (a miss). ``expect``: header fields
    that must match (format, versions, target). A bad entry warns and reads as a miss."""
    path = entry_path(directory, key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):  # (no such entry, or no such directory)
        return None
    except OSError as e:  # a directory in its place, no permission, an I/O error
        warn(f"cannot read entry {path}: {e.strerror or e}; compiling")
        return None
    try:
        header, payload = decode(data)
        if header.get("key") != key:
            raise BadEntry("entry holds another key")
        for field, value in expect.items():
            if header.get(field) != value:
                what = "CPU" if field == "target" else field
                raise BadEntry(f"written for another {what} ({header.get(field)!r:.120})")
    except BadEntry as e:
        warn(f"ignoring entry {path}: {e}; it will be rewritten")
        return None
    try:
        os.utime(path)  # most recently used (the LRU order is by modification time)
    except OSError:
        pass
    return header, payload


def write(directory: str, key: str, header: dict, payload: bytes, max_size: int, keep=()) -> bool:
    """Write the entry atomically, then evict past ``max_size`` bytes (-1: no cap), never this
    entry or those of the keys in ``keep``. Never raises: a failure warns and returns False."""
    try:
        data = encode(dict(header, key=key), payload)
        if 0 <= max_size < len(data):
            return False  # (it would evict everything, itself included)
        os.makedirs(directory, exist_ok=True)
        path = entry_path(directory, key)
        if os.path.isdir(path) and not os.path.islink(path):
            try:
                os.rmdir(path)  # (an empty directory in the entry's place: take the place back)
            except OSError:
                pass
        atomic.write_atomically(path, data, prefix=f".{PREFIX}{key}.")
    except Exception as e:  # unwritable directory, full disk, a directory in the way, ...
        warn(f"cannot write entry for key {key[:16]}... to {directory}: {e}; not cached")
        return False
    if max_size >= 0:
        evict(directory, max_size, keep=(key, *keep))
    return True


def entries(directory: str) -> list[tuple[str, int, float]]:
    """``(path, bytes, last use)`` of every entry file in ``directory``, oldest use first
    (files of other names -- JAX's entries, anything else -- are not listed)."""
    out = []
    try:
        it = list(os.scandir(directory))
    except OSError:
        return out
    for e in it:
        if not _ENTRY_RE.match(e.name):
            continue
        try:
            if not e.is_file(follow_symlinks=False):
                continue
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        out.append((e.path, st.st_size, st.st_mtime))
    out.sort(key=lambda t: t[2])
    return out


def evict(directory: str, max_size: int, keep=()) -> int:
    """Delete least recently used entries until they total at most ``max_size`` bytes (and
    crashed writers' stale temporary files), except those of the keys in ``keep`` (a key or a
    sequence of keys). Returns the number of entries deleted."""
    now = time.time()
    try:
        for e in os.scandir(directory):
            if _TEMP_RE.match(e.name):
                try:
                    if now - e.stat(follow_symlinks=False).st_mtime > STALE_TEMP_S:
                        os.unlink(e.path)
                except OSError:
                    pass
    except OSError:
        pass
    listed = entries(directory)
    total = sum(size for _, size, _ in listed)
    deleted = 0
    keep_paths = {entry_path(directory, k) for k in ((keep,) if isinstance(keep, str) else keep or ())}
    for path, size, _ in listed:
        if total <= max_size:
            break
        if path in keep_paths:
            continue
        try:
            os.unlink(path)
            deleted += 1
        except FileNotFoundError:
            pass  # (another process evicted it)
        except OSError:
            continue
        total -= size
    return deleted


def jax_entries(directory: str) -> list[tuple[str, str, int, float]]:
    """``(path, module name, bytes, last modification)`` of JAX's entry files in ``directory``
    (``JAX_ENTRY_RE``; its ``-atime`` stamps are not entries)."""
    out = []
    try:
        it = list(os.scandir(directory))
    except OSError:
        return out
    for e in it:
        m = JAX_ENTRY_RE.match(e.name)
        if m is None or m["kind"] != "cache":
            continue
        try:
            if e.is_file(follow_symlinks=False):
                st = e.stat(follow_symlinks=False)
                out.append((e.path, m["name"], st.st_size, max(st.st_mtime, st.st_atime)))
        except OSError:
            pass
    return out


def clear(directory: str) -> int:
    """Delete every entry (only minixla's entry files, and the source fingerprint's memo).
    Returns how many entries."""
    n = 0
    for path, _, _ in entries(directory):
        try:
            os.unlink(path)
            n += 1
        except OSError:
            pass
    for path in memos(directory):
        try:
            os.unlink(path)
        except OSError:
            pass
    return n


def memos(directory: str) -> list[str]:
    """The source fingerprint's memo files in ``directory`` (``key.source_fingerprint``)."""
    try:
        return [e.path for e in os.scandir(directory) if _MEMO_RE.match(e.name)]
    except OSError:
        return []
