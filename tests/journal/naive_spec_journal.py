"""A second, deliberately naive implementation of SPEC §2.1, written from the spec text.

It shares no code with quotaledger (nor with independent_verifier.py): only the Python
standard library. `read_journal` checks every invariant §2.1 lists, line by line;
`SpecWriter` writes journals the way another program following the spec would (the
stdlib `json` encoder, its own key order inside `data`, optionally ASCII escapes).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

ENVELOPE_KEYS = ["v", "seq", "at", "kind", "goal", "data", "prev", "hash"]
ZERO_HASH = "0" * 64
MIB = 1024 * 1024
AT_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
HEX64_RE = re.compile(r"[0-9a-f]{64}")

# The payload members of every kind, as the spec's event tables list them (§2.1, §2.4,
# §3.1, §4.1, §5.1, §6, §12.2). `journal.repaired` is what `repair` logs (§2.4 "logged").
SPEC_KINDS: dict[str, set[str]] = {
    "journal.created": {"journal_id", "format"},
    # §2.4 item 5: a transaction of several records is led by its announcement.
    "journal.batch": {"records"},
    "capacity.configured": {"cases", "tokens"},
    "capacity.observed": {
        "run",
        "uncached_input",
        "cached_input",
        "output",
        "requests",
        "coverage",
        "source",
    },
    "capacity.admitted": {"request", "receipt"},
    "capacity.refused": {"request", "reasons", "figures"},
    "capacity.rejected": {
        "run",
        "retry_after_s",
        "cooldown_s",
        "clamped",
        "cooldown_until",
        "streak",
        "detail",
    },
    "capacity.released": {"run"},
    "capacity.queued": {"request", "reasons", "figures", "ttl_s"},
    "capacity.dequeued": {"run", "reason"},
    "host.phase_appended": {
        "lane",
        "phase",
        "deadline",
        "session",
        "profile",
        "basis",
        "bound",
        "handoff",
    },
    "host.attempt_started": {"lane", "phase", "attempt", "number", "session", "profile", "pid"},
    "host.process_exited": {"attempt", "exit_code", "signal"},
    "host.attempt_returned": {"attempt", "outcome", "failure", "cursor"},
    "host.stop_requested": set(),
    "host.stop_cleared": set(),
    "host.replan_opened": {"lane", "replan"},
    "host.replan_settled": {"lane", "replan"},
    "budget.configured": {"allowed_units", "window_hours"},
    "turn.opened": {"agent", "turn", "task"},
    "turn.writeback_verified": {"agent", "turn", "effect", "amount"},
    "quota.spent": {"agent", "turn", "effect", "amount", "spent_before", "spent_after"},
    "price.set": {
        "model",
        "input_usd_per_mtok",
        "cached_input_usd_per_mtok",
        "cache_write_usd_per_mtok",
        "output_usd_per_mtok",
    },
    # §12.1: a pool's own stream (its name in the envelope's goal).
    "pool.configured": {
        "limits",
        "cached_input_weight",
        "cooldown_base_s",
        "cooldown_max_s",
        "cap_tokens",
        "cap_usd",
        "cap_since",
        "explicit",
    },
    "pool.membership": {"goal"},
    "pool.cooldown": {
        "goal",
        "run",
        "retry_after_s",
        "cooldown_s",
        "clamped",
        "cooldown_until",
        "streak",
    },
    "probe.observed": {
        "command",
        "candidates",
        "input_revision",
        "exit_code",
        "timed_out",
        "duration_s",
        "memory",
        "reference_bytes",
        "attribution",
        "sidecar",
    },
}
# `journal.repaired` carries quotaledger's own bookkeeping; the spec names no members.
OPEN_KINDS = {"journal.repaired"}


class SpecViolation(Exception):
    def __init__(self, seq: int, offset: int, reason: str) -> None:
        super().__init__(f"seq {seq} at byte {offset}: {reason}")
        self.seq, self.offset, self.reason = seq, offset, reason


@dataclass
class Journal:
    records: list[dict[str, Any]] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)

    @property
    def head(self) -> dict[str, Any]:
        return self.records[-1]


def _pairs_in_order(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate keys {keys}")
    return {"__order__": keys, **dict(pairs)}


def read_journal(raw: bytes) -> Journal:
    """Verify a whole journal's bytes; raise SpecViolation at the first bad record."""
    out = Journal()
    offset, seq, prev = 0, 0, ZERO_HASH
    last_at: dict[Any, str] = {}
    while offset < len(raw):
        end = raw.find(b"\n", offset)
        if end < 0:
            raise SpecViolation(seq, offset, "unterminated line")
        line = raw[offset:end]
        if len(line) + 1 > MIB:
            raise SpecViolation(seq, offset, "line exceeds 1 MiB")
        try:
            text = line.decode("utf-8")
            top = json.loads(text, object_pairs_hook=lambda p: dict(p))
            order = json.loads(text, object_pairs_hook=_pairs_in_order)["__order__"]
        except (UnicodeDecodeError, ValueError) as exc:
            raise SpecViolation(seq, offset, f"does not parse: {exc}") from exc
        if order != ENVELOPE_KEYS:
            raise SpecViolation(seq, offset, f"envelope keys {order}")
        # The hash covers the line up to the closing quote of prev, then "}".
        suffix = ',"hash":"' + str(top["hash"]) + '"}'
        if not text.endswith(suffix) or not HEX64_RE.fullmatch(str(top["hash"])):
            raise SpecViolation(seq, offset, "hash member is not last/lowercase hex")
        body = line[: len(line) - len(suffix.encode())] + b"}"
        if hashlib.sha256(body).hexdigest() != top["hash"]:
            raise SpecViolation(seq, offset, "hash mismatch")
        if top["v"] != 1 or type(top["v"]) is not int:
            raise SpecViolation(seq, offset, "v is not 1")
        if top["seq"] != seq or type(top["seq"]) is not int:
            raise SpecViolation(seq, offset, f"seq {top['seq']} != {seq}")
        if top["prev"] != prev:
            raise SpecViolation(seq, offset, "prev does not chain")
        at = top["at"]
        if not isinstance(at, str) or not AT_RE.fullmatch(at):
            raise SpecViolation(seq, offset, f"at {at!r} not canonical")
        goal = top["goal"]
        if goal is not None and not isinstance(goal, str):
            raise SpecViolation(seq, offset, "goal not str/null")
        if goal in last_at and at < last_at[goal]:
            raise SpecViolation(seq, offset, "at goes back for its goal")
        last_at[goal] = at
        _check_payload(seq, offset, top)
        out.records.append(top)
        out.lines.append(line + b"\n")
        prev, seq, offset = top["hash"], seq + 1, end + 1
    if not out.records:
        raise SpecViolation(0, 0, "empty journal")
    return out


def _check_payload(seq: int, offset: int, top: dict[str, Any]) -> None:
    kind, data = top["kind"], top["data"]
    if not isinstance(data, dict):
        raise SpecViolation(seq, offset, "data is not an object")
    if seq == 0:
        if kind != "journal.created" or top["goal"] is not None or top["prev"] != ZERO_HASH:
            raise SpecViolation(seq, offset, "bad genesis")
        if data.get("format") != "quotaledger/1" or not re.fullmatch(
            r"[0-9a-f]{32}", str(data.get("journal_id"))
        ):
            raise SpecViolation(seq, offset, "bad genesis data")
    elif kind == "journal.created":
        raise SpecViolation(seq, offset, "second genesis")
    if kind in OPEN_KINDS:
        return
    if kind not in SPEC_KINDS:
        raise SpecViolation(seq, offset, f"unknown kind {kind}")
    later = LATER_MEMBERS.get(kind, set())
    if not SPEC_KINDS[kind] <= set(data) <= SPEC_KINDS[kind] | later:
        raise SpecViolation(seq, offset, f"{kind} members {sorted(data)}")


# §3.1: "Payload members added after the first version have defaults and may be absent
# from a line".
LATER_MEMBERS: dict[str, set[str]] = {
    # §12.4: caps (the members pool.configured has, §12.1, and what was counted since
    # cap_since) and the model an observation's dollars come from.
    "capacity.configured": {
        "explicit",
        "cap_tokens",
        "cap_usd",
        "cap_since",
        "cap_counted",
        "pool",
        "priority",
    },
    # §12.4 for a pool as for a goal: what was counted since cap_since when it was set,
    # and the pool's running total then (the fold keeps the total after it).
    "pool.configured": {"cap_counted", "cap_total"},
    # §12.1: a goal joins with its terms, or leaves.
    "pool.membership": {"share", "borrowing_limit", "lending_limit", "priority", "left"},
    "capacity.observed": {"cache_write_input", "provider", "model"},
    "capacity.rejected": {"provider"},
    # §12.2: a promotion names its queue entry; a refusal on promotion, its reasons.
    "capacity.admitted": {"queued"},
    "capacity.dequeued": {"reasons"},
}


class SpecWriter:
    """Writes records the way an independent program following §2.1 would."""

    def __init__(self, *, ascii_escapes: bool = False, reverse_data_keys: bool = True) -> None:
        self.ascii = ascii_escapes
        self.reverse = reverse_data_keys
        self.lines: list[bytes] = []
        self.prev = ZERO_HASH
        self.journal_id = uuid.uuid4().hex

    def _dump(self, value: Any) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=self.ascii)

    def _reorder(self, value: Any) -> Any:
        if isinstance(value, dict):
            items = [(k, self._reorder(v)) for k, v in value.items()]
            return dict(reversed(items) if self.reverse else items)
        if isinstance(value, list):
            return [self._reorder(v) for v in value]
        return value

    def append(self, at: str, kind: str, goal: str | None, data: dict[str, Any]) -> str:
        seq = len(self.lines)
        body = (
            '{"v":1,"seq":' + str(seq) + ',"at":' + self._dump(at) + ',"kind":' + self._dump(kind)
        )
        body += ',"goal":' + self._dump(goal) + ',"data":' + self._dump(self._reorder(data))
        body += ',"prev":"' + self.prev + '"}'
        raw = body.encode("utf-8")
        digest = hashlib.sha256(raw).hexdigest()
        self.lines.append(raw[:-1] + b',"hash":"' + digest.encode() + b'"}\n')
        self.prev = digest
        return digest

    def genesis(self, at: str) -> str:
        return self.append(
            at, "journal.created", None, {"journal_id": self.journal_id, "format": "quotaledger/1"}
        )

    def bytes(self) -> bytes:
        return b"".join(self.lines)
