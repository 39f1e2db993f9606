"""The journal's SHA-256: CPython's built-in hash for a few lines, OpenSSL's in bulk.

Both must give the same digest for every input, and the switch must happen once the
process has hashed `BULK_BYTES`: a record hashed by either verifies under the other.
"""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from quotaledger.journal import sha256 as journal_sha256
from quotaledger.journal.record import encode_line, self_verify


@given(st.binary(max_size=4096))
def test_both_implementations_give_hashlibs_digest(data: bytes) -> None:
    expected = hashlib.sha256(data).hexdigest()
    assert journal_sha256.sha256_hex(data) == expected
    for empty in (journal_sha256._SMALL, hashlib.sha256()):
        assert empty is not None
        digest = empty.copy()
        digest.update(data)
        assert digest.hexdigest() == expected


def test_a_short_process_hashes_without_openssl_and_bulk_work_uses_it(monkeypatch) -> None:
    monkeypatch.setattr(journal_sha256, "_hashed_bytes", 0)
    small = journal_sha256.empty_sha256_for(1000)
    assert small is journal_sha256._SMALL
    assert type(small).__module__ in ("_sha256", "_sha2")
    bulk = journal_sha256.empty_sha256_for(journal_sha256.BULK_BYTES)
    assert type(bulk) is type(hashlib.sha256())  # OpenSSL's, once the load has paid
    assert journal_sha256.empty_sha256_for(10) is bulk  # and from then on


def test_lines_hashed_by_either_implementation_verify(monkeypatch) -> None:
    lines = []
    for hashed in (0, journal_sha256.BULK_BYTES):  # the built-in, then OpenSSL
        monkeypatch.setattr(journal_sha256, "_hashed_bytes", hashed)
        lines.append(encode_line(1, "2026-12-01T00:00:00.000000Z", "k.x", None, b"{}", "0" * 64))
    assert lines[0] == lines[1]
    for hashed in (0, journal_sha256.BULK_BYTES):
        monkeypatch.setattr(journal_sha256, "_hashed_bytes", hashed)
        assert self_verify(lines[0][0][:-1]) is not None
