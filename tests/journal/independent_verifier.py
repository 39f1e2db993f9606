"""An independent implementation of SPEC §2.1 (record format "quotaledger/1").

Written from the spec alone with `json` and `hashlib`: it imports nothing from
quotaledger, so a bug shared by quotaledger's reader and writer cannot hide here. It
verifies journals line by line, classifies what follows the verified prefix as
§2.4 does (torn tail or mid-log corruption), and writes journals of its own that
quotaledger must read and verify.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LINE_BYTES_MAX = 1 << 20
ZERO_HASH = "0" * 64
KEYS = ["v", "seq", "at", "kind", "goal", "data", "prev", "hash"]
AT_PATTERN = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")
HASH_SUFFIX = re.compile(rb',"hash":"([0-9a-f]{64})"\}$')

Schema = Callable[[dict[str, Any]], str | None]
"""Checks a payload; returns a reason if it does not match the kind's schema."""


def _exact_keys(required: dict[str, type], optional: dict[str, type] | None = None) -> Schema:
    optional = optional or {}

    def check(data: dict[str, Any]) -> str | None:
        unknown = set(data) - set(required) - set(optional)
        if unknown:
            return f"unknown fields {sorted(unknown)}"
        for name in required:
            if name not in data:
                return f"missing field {name}"
        for name, kind in {**required, **optional}.items():
            if name in data and (
                not isinstance(data[name], kind) or isinstance(data[name], bool) != (kind is bool)
            ):
                return f"field {name} is not {kind.__name__}"
        return None

    return check


def _genesis(data: dict[str, Any]) -> str | None:
    problem = _exact_keys({"journal_id": str, "format": str})(data)
    if problem is None and data["format"] != "quotaledger/1":
        problem = f"format {data['format']!r}"
    return problem


def _batch(data: dict[str, Any]) -> str | None:
    problem = _exact_keys({"records": int})(data)
    if problem is None and not 1 <= data["records"] <= 100_000:
        problem = f"records {data['records']} outside 1..100000"
    return problem


ENGINE_SCHEMAS: dict[str, Schema] = {
    "journal.created": _genesis,
    "journal.batch": _batch,
    "journal.repaired": _exact_keys(
        {
            "truncated_after_seq": int,
            "quarantine": str,
            "quarantined_bytes": int,
            "quarantined_sha256": str,
        }
    ),
}
TOY_SCHEMAS: dict[str, Schema] = {
    **ENGINE_SCHEMAS,
    "toy.note": _exact_keys({"n": int}, {"text": str}),
}


class Problem(Exception):
    def __init__(self, seq: int, offset: int, reason: str, self_verifying: bool) -> None:
        super().__init__(f"seq {seq} at byte {offset}: {reason}")
        self.seq = seq
        self.offset = offset
        self.reason = reason
        self.self_verifying = self_verifying


@dataclass
class Result:
    records: list[dict[str, Any]] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    verified_bytes: int = 0
    torn: Problem | None = None
    corrupt: Problem | None = None
    not_a_journal: bool = False
    """The file's first line is not a genesis record of quotaledger/1 (SPEC §2.4)."""

    @property
    def head_hash(self) -> str:
        return self.records[-1]["hash"] if self.records else ZERO_HASH


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def parse_self_verifying(line: bytes) -> tuple[dict[str, Any] | None, str]:
    """The record if `line` (no newline) is self-verifying: parses, hash matches."""
    if len(line) + 1 > LINE_BYTES_MAX:
        return None, "line exceeds 1 MiB"
    match = HASH_SUFFIX.search(line)
    if match is None:
        return None, "line does not end with a hash member"
    body = line[: match.start()] + b"}"
    if hashlib.sha256(body).hexdigest() != match.group(1).decode():
        return None, "hash mismatch"
    try:
        record = json.loads(line.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError):
        return None, "does not parse"
    if not isinstance(record, dict) or list(record) != KEYS:
        return None, f"fields are not {KEYS}"
    if record["v"] != 1 or isinstance(record["v"], bool):
        return None, "v is not 1"
    # The envelope around `data` must be the canonical compact encoding.
    # (Strings may be written with or without \u escapes of non-ASCII characters.)
    heads = [
        (
            f'{{"v":1,"seq":{record["seq"]},"at":{json.dumps(record["at"], ensure_ascii=a)},'
            f'"kind":{json.dumps(record["kind"], ensure_ascii=a)},'
            f'"goal":{json.dumps(record["goal"], ensure_ascii=a)},"data":'
        ).encode()
        for a in (True, False)
    ]
    head = next((h for h in heads if line.startswith(h)), heads[0])
    tail = ',"prev":"{}","hash":"{}"}}'.format(record["prev"], record["hash"]).encode()
    if not (line.startswith(head) and line.endswith(tail)):
        return None, "envelope is not canonical (order, whitespace)"
    data_bytes = line[len(head) : len(line) - len(tail)]
    if json.loads(data_bytes) != record["data"]:
        return None, "data member is not where it should be"
    return record, ""


def hashes(line: bytes) -> bool:
    """SPEC §2.4's "self-verifying": the line ends with a hash member matching the
    SHA-256 of the rest and parses as a JSON object, whatever its `v` or members."""
    match = HASH_SUFFIX.search(line)
    if match is None:
        return False
    if hashlib.sha256(line[: match.start()] + b"}").hexdigest() != match.group(1).decode():
        return False
    try:
        return isinstance(json.loads(line.decode("utf-8")), dict)
    except (UnicodeDecodeError, ValueError):
        return False


GENESIS_SHAPE = re.compile(
    rb'\{"v":1,"seq":0,"at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z",'
    rb'"kind":"journal\.created","goal":null,"data":\{"journal_id":"[0-9a-f]{32}",'
    rb'"format":"quotaledger/1"\},"prev":"0{64}","hash":"[0-9a-f]{64}"\}\n'
)


def _is_genesis_prefix(data: bytes) -> bool:
    """Whether `data` could be the first bytes of a genesis line (checked by padding
    it with the bytes of a real genesis line's shape and matching the whole)."""
    sample = (
        b'{"v":1,"seq":0,"at":"2000-01-01T00:00:00.000000Z","kind":"journal.created",'
        b'"goal":null,"data":{"journal_id":"' + b"0" * 32 + b'","format":"quotaledger/1"},'
        b'"prev":"' + b"0" * 64 + b'","hash":"' + b"0" * 64 + b'"}\n'
    )
    return 0 < len(data) < len(sample) and GENESIS_SHAPE.fullmatch(data + sample[len(data) :])


def _not_a_journal(data: bytes) -> bool:
    if not data.strip(b"\x00") or _is_genesis_prefix(data):
        return False  # empty, or what a crash while it was created leaves
    try:
        first = json.loads(data.split(b"\n", 1)[0].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return True
    if not isinstance(first, dict) or first.get("kind") != "journal.created":
        return True
    payload = first.get("data")
    return not (isinstance(payload, dict) and payload.get("format") == "quotaledger/1")


def _chain(
    record: dict[str, Any],
    seq: int,
    prev: str,
    last_at: dict[Any, str],
    schemas: dict[str, Schema],
) -> str | None:
    if type(record["seq"]) is not int or record["seq"] != seq:
        return f"seq {record['seq']} where {seq} was expected"
    if record["prev"] != prev:
        return "prev does not match"
    if not isinstance(record["at"], str) or not AT_PATTERN.match(record["at"]):
        return "at is not canonical"
    if record["goal"] is not None and not isinstance(record["goal"], str):
        return "goal is not a string or null"
    genesis = seq == 0
    if genesis != (record["kind"] == "journal.created") or (
        genesis and (record["goal"] is not None or record["prev"] != ZERO_HASH)
    ):
        return "genesis misplaced"
    previous = last_at.get(record["goal"])
    if previous is not None and record["at"] < previous:
        return "at goes back in time for its goal"
    if not isinstance(record["data"], dict):
        return "data is not an object"
    schema = schemas.get(record["kind"])
    if schema is None:
        return f"unknown kind {record['kind']}"
    return schema(record["data"])


def verify(data: bytes, schemas: dict[str, Schema] | None = None) -> Result:
    """Verify `data` record by record; classify what follows the verified prefix.

    A `journal.batch` record announces that the next `records` records are one
    transaction (SPEC §2.4 item 5): they count only all together. If the data ends
    before the last of them, or one of them is torn, the torn tail begins at the
    announcement; if one of them is corrupt, the verified prefix ends before it."""
    schemas = ENGINE_SCHEMAS if schemas is None else schemas
    result = Result()
    last_at: dict[Any, str] = {}
    offset = 0
    if _not_a_journal(data):
        result.not_a_journal = True
        return result
    batch: tuple[int, int, int] | None = None  # (announcement seq, its offset, last seq)
    kept = (0, 0, dict(last_at))  # records, bytes, times: the prefix before an open batch

    def fail(problem: Problem, torn: bool) -> Result:
        if batch is not None:  # a transaction counts whole or not at all
            count, verified, _ = kept
            del result.records[count:], result.lines[count:]
            result.verified_bytes = verified
            if torn:
                problem = Problem(batch[0], batch[1], problem.reason, False)
        if torn:
            result.torn = problem
        else:
            result.corrupt = problem
        return result

    while offset < len(data):
        seq = len(result.records)
        prev = result.head_hash
        newline = data.find(b"\n", offset)
        if newline < 0:
            return fail(Problem(seq, offset, "unterminated last line", False), True)
        line = data[offset:newline]
        record, why = parse_self_verifying(line)
        if record is None:
            if hashes(line):  # whole and hashed, yet not a record: never torn
                return fail(Problem(seq, offset, why, True), False)
            problem = Problem(seq, offset, why, False)
            later = data[newline + 1 :].split(b"\n")[:-1]  # complete lines only
            return fail(problem, not any(hashes(other) for other in later))
        reason = _chain(record, seq, prev, last_at, schemas)
        if reason is None and record["kind"] == "journal.batch":
            if batch is not None:
                reason = "a journal.batch record inside a transaction"
            else:
                kept = (len(result.records), result.verified_bytes, dict(last_at))
                batch = (seq, offset, seq + record["data"]["records"])
        if reason is not None:
            return fail(Problem(seq, offset, reason, True), False)
        last_at[record["goal"]] = record["at"]
        result.records.append(record)
        result.lines.append(line)
        offset = newline + 1
        if batch is not None and seq == batch[2]:
            batch = None  # the transaction is whole
        if batch is None:
            result.verified_bytes = offset
    if batch is not None:
        return fail(Problem(batch[0], batch[1], "incomplete transaction", False), True)
    return result


def verify_strict(data: bytes, schemas: dict[str, Schema] | None = None) -> Result:
    """Every byte must verify: no torn tail, no corruption."""
    result = verify(data, schemas)
    problem = result.corrupt or result.torn
    if problem is not None:
        raise problem
    return result


class Writer:
    """Writes quotaledger/1 records from the spec, with json.dumps instead of msgspec."""

    def __init__(self, journal_id: str, at: str, *, ensure_ascii: bool = True) -> None:
        self.ensure_ascii = ensure_ascii
        self.lines: list[bytes] = []
        self.prev = ZERO_HASH
        genesis = {"journal_id": journal_id, "format": "quotaledger/1"}
        self.append("journal.created", None, genesis, at)

    def append(self, kind: str, goal: str | None, data: dict[str, Any], at: str) -> bytes:
        def dump(value: Any) -> str:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=self.ensure_ascii)

        body = (
            f'{{"v":1,"seq":{len(self.lines)},"at":{dump(at)},"kind":{dump(kind)},'
            f'"goal":{dump(goal)},"data":{dump(data)},"prev":{dump(self.prev)}}}'
        ).encode()
        digest = hashlib.sha256(body).hexdigest()
        line = body[:-1] + f',"hash":"{digest}"}}\n'.encode()
        self.lines.append(line)
        self.prev = digest
        return line

    def batch(self, events: list[tuple[str, str | None, dict[str, Any], str]], at: str) -> None:
        """One transaction of several events: a journal.batch record announcing them."""
        self.append("journal.batch", None, {"records": len(events)}, at)
        for kind, goal, data, event_at in events:
            self.append(kind, goal, data, event_at)

    def bytes(self) -> bytes:
        return b"".join(self.lines)
