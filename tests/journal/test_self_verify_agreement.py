"""`chain.scan` inlines the self-verify check (the hot loop of every fold and verify);
`record.self_verify` is the same rule as a function. Both must give the same verdict
on every line, good or bad (issue 17 item 4): fed the same lines, scan visits exactly
the records self_verify returns, and refuses exactly the lines it rejects, for the
reason the classification gives them.
"""

from __future__ import annotations

from hashlib import sha256
from typing import Any

import hypothesis.strategies as st
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings

from quotaledger.journal.chain import Head, scan, why_not_a_record, why_not_self_verifying
from quotaledger.journal.clock import AT_US_MAX, format_us
from quotaledger.journal.limits import LINE_BYTES_MAX
from quotaledger.journal.record import (
    BATCH_KIND,
    GENESIS_KIND,
    Record,
    encode_line,
    hash_matches,
    self_verify,
)

PREV = "ab" * 32
LINE_TOO_LONG = "line exceeds 1 MiB"


def _any_payload(kind: str) -> Any:
    return lambda raw: raw  # every payload decodes: only the line's own checks count


def _scan_one(line: bytes, record: Record | None) -> tuple[list[Record], Any]:
    """Scan `line` alone, the head placed where the record it holds (if any) chains."""
    head = Head(5, PREV) if record is None else Head(record.seq, record.prev)
    visited: list[Record] = []
    failure = scan(line + b"\n", head, _any_payload, lambda r, p, raw: visited.append(r))
    return visited, failure


def _self_hashed(body: bytes) -> bytes:
    """`body` (a JSON object) with a hash member that matches it, as a writer makes one."""
    digest = sha256(body).hexdigest()
    return body[:-1] + b',"hash":"' + digest.encode() + b'"}'


def assert_same_verdict(line: bytes) -> None:
    record = self_verify(line)
    visited, failure = _scan_one(line, record)
    if record is None:
        assert visited == []
        assert failure is not None and failure.offset == 0
        if len(line) >= LINE_BYTES_MAX:
            expected = LINE_TOO_LONG
        elif hash_matches(line):
            expected = why_not_a_record(line)
        else:
            expected = why_not_self_verifying(line)
        assert failure.reason == expected
        return
    # Self-verifying: whatever scan says next is about the chain, never the line.
    chains = record.seq >= 1 and record.kind not in (GENESIS_KIND, BATCH_KIND)
    if failure is not None:
        assert failure.reason not in (
            LINE_TOO_LONG,
            why_not_self_verifying(line),
            why_not_a_record(line) if hash_matches(line) else None,
        )
        assert not chains or "canonical" in failure.reason
    else:
        assert visited == [record]


def _good(seq: int, at_us: int, kind: str, goal: str | None, data: Any, prev: str) -> bytes:
    line, _ = encode_line(seq, format_us(at_us), kind, goal, msgspec.json.encode(data), prev)
    return line[:-1]


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
good_lines = st.builds(
    _good,
    st.integers(1, 2**40),
    st.integers(0, AT_US_MAX),
    st.sampled_from(["capacity.observed", "capacity.admitted", "x.y", "journal.repaired"]),
    st.none() | st.text(min_size=1, max_size=8),
    st.dictionaries(st.text(max_size=6), _json, max_size=4),
    st.just(PREV) | st.text("0123456789abcdef", min_size=64, max_size=64),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(good_lines)
def test_good_lines_get_the_same_verdict(line: bytes) -> None:
    assert self_verify(line) is not None
    assert_same_verdict(line)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(good_lines, st.data())
def test_mutated_lines_get_the_same_verdict(line: bytes, data: st.DataObject) -> None:
    where = data.draw(st.integers(0, len(line) - 1))
    how = data.draw(st.sampled_from(["flip", "cut", "insert", "rehash"]))
    if how == "flip":
        mutated = (
            line[:where] + bytes([line[where] ^ data.draw(st.integers(1, 255))]) + line[where + 1 :]
        )
    elif how == "cut":
        mutated = line[:where]
    elif how == "insert":
        mutated = line[:where] + data.draw(st.binary(min_size=1, max_size=3)) + line[where:]
    else:  # an edited body hashed again: self-verifying, but maybe not a record of ours
        body = line[: -(len(',"hash":"') + 64 + 2)] + b"}"
        edited = body[:where] + data.draw(st.binary(max_size=3)) + body[where + 1 :]
        mutated = _self_hashed(edited)
    assert_same_verdict(mutated.replace(b"\n", b" "))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_get_the_same_verdict(line: bytes) -> None:
    assert_same_verdict(line.replace(b"\n", b""))


GOOD = _good(7, 1_764_000_000_000_000, "capacity.observed", "g", {"a": 1}, PREV)
HASH_AT = len(GOOD) - 66


@pytest.mark.parametrize(
    "line",
    [
        GOOD,
        GOOD[:HASH_AT] + GOOD[HASH_AT:].upper(),  # upper-case hex
        GOOD[:HASH_AT] + b"\\u00" + b"%x" % GOOD[HASH_AT] + GOOD[HASH_AT + 1 :],  # escaped
        GOOD + b" ",
        GOOD + b"\r",
        b" " + GOOD,
        b"\x00" * 40,
        b"",
        _self_hashed(GOOD[:-1].replace(b'"v":1', b'"v":2', 1) + b"}"),  # hash of a hash
        _self_hashed(
            msgspec.json.encode(
                {"v": 2, "seq": 7, "at": "x", "kind": "k", "goal": None, "data": {}, "prev": PREV}
            )
        ),
        _self_hashed(GOOD[: -(len(',"hash":"') + 64 + 2)] + b',"extra":1}'),
        _self_hashed(GOOD[: -(len(',"hash":"') + 64 + 2)] + b',"hash":"' + b"0" * 64 + b'"}'),
        _self_hashed(b'{"v":1}'),
        _self_hashed(b"[1]"),
    ],
)
def test_hand_made_lines_get_the_same_verdict(line: bytes) -> None:
    assert_same_verdict(line)


@pytest.mark.parametrize("size", [LINE_BYTES_MAX - 1, LINE_BYTES_MAX, LINE_BYTES_MAX + 1])
def test_lines_at_the_size_limit_get_the_same_verdict(size: int) -> None:
    short = _good(7, 1_764_000_000_000_000, "capacity.observed", "g", {"pad": ""}, PREV)
    line = _good(
        7, 1_764_000_000_000_000, "capacity.observed", "g", {"pad": "x" * (size - len(short))}, PREV
    )
    assert len(line) == size
    assert_same_verdict(line)
