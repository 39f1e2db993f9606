"""SHA-256 for the journal, without loading OpenSSL for a few lines.

`hashlib` loads OpenSSL's libcrypto on import: about 10 million instructions and the
page faults of mapping it, some 5% of a whole CLI call that hashes one or two lines
(a runner calls the CLI once per event). CPython's built-in SHA-256 costs nothing to
load but hashes a 380-byte line in about 1.6 µs against OpenSSL's 0.55 µs. So a
process hashes with the built-in until it has hashed `BULK_BYTES`, and with OpenSSL
from then on: a short command never loads libcrypto, a fold or a bulk append pays the
load once and then hashes at OpenSSL's speed. Both compute SHA-256: the digests are
the same bytes (tests/journal/test_sha256.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hashlib import _Hash

BULK_BYTES = 1 << 20
"""After this many bytes hashed in a process, OpenSSL's load has paid for itself."""

_hashed_bytes = 0
_bulk: _Hash | None = None


try:  # CPython's own SHA-256: Python 3.11
    from _sha256 import sha256 as _builtin_sha256
except ImportError:
    try:  # Python 3.12 and later
        from _sha2 import sha256 as _builtin_sha256
    except ImportError:  # a build without CPython's own hashes: OpenSSL only
        _builtin_sha256 = None

_SMALL: _Hash | None = None if _builtin_sha256 is None else _builtin_sha256()


def empty_sha256_for(size_bytes: int) -> _Hash:
    """An empty SHA-256 context to `copy()` for each of the next `size_bytes` bytes'
    digests. Copying a context skips the algorithm lookup `hashlib.sha256(data)`
    makes in OpenSSL's provider tables on every call (about 2 µs right after a
    durable append's fdatasync, when those tables are no longer in cache)."""
    global _hashed_bytes, _bulk
    _hashed_bytes += size_bytes
    if _SMALL is not None and _hashed_bytes < BULK_BYTES:
        return _SMALL
    if _bulk is None:
        import hashlib

        _bulk = hashlib.sha256()
    return _bulk


def sha256_hex(data: bytes) -> str:
    """The lowercase hex SHA-256 of `data`."""
    digest = empty_sha256_for(len(data)).copy()
    digest.update(data)
    return digest.hexdigest()
