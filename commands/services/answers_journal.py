"""The journal and probe answer shapes (SPEC §2, §6), typed like `answers.py`.

Each TypedDict lists its keys in the order the answer is built, which is the order
they are printed (that order is public too). `head` and `checkpoint` stay
`dict[str, Any]`: the journal layer builds them (`Head.to_json`, `check_checkpoint`),
and a service may not reach below it for a type.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from quotaledger.services.answers import EventJson

# -- journal (SPEC §2) ----------------------------------------------------------------


class TornTailJson(TypedDict):
    seq: int
    offset: int
    reason: str


class DigestContainedJson(TypedDict):
    seq: int
    hash: str
    contained: bool


class VerifyDigestPart(TypedDict, total=False):
    """What `verify --digest` adds: the proof the journal only grew since the digest."""

    digest: DigestContainedJson


class VerifyAnswer(TypedDict):
    ok: bool
    head: dict[str, Any]
    records: int
    bytes: int
    torn_tail: TornTailJson | None
    digest: NotRequired[DigestContainedJson]
    checkpoint: dict[str, Any] | None


class DigestAnswer(TypedDict):
    ok: bool
    seq: int
    hash: str
    journal_id: str | None
    digest: str


class RepairAnswer(TypedDict):
    ok: bool
    appended: bool
    truncated_after_seq: int
    quarantine: str | None
    quarantined_bytes: int
    head: dict[str, Any]
    event: NotRequired[EventJson]


class CheckpointAnswer(TypedDict):
    ok: bool
    seq: int
    hash: str
    offset: int
    projection_version: str


class ExportAnswer(TypedDict):
    ok: bool
    to: str
    records: int
    bytes: int
    head: dict[str, Any]


class ImportAnswer(TypedDict):
    ok: bool
    appended: bool
    records: int
    head: dict[str, Any]
    event: EventJson


class RecordJson(TypedDict):
    """One event as `log` prints it."""

    seq: int
    at: str
    kind: str
    goal: str | None
    data: Any
    prev: str
    hash: str


# -- probe (SPEC §6) ------------------------------------------------------------------


class LatestProbeAnswer(TypedDict):
    ok: bool
    goal: str
    count: int
    latest: dict[str, Any] | None
