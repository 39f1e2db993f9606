"""Journal use cases (SPEC §2): verify, digest, repair, checkpoint, log, export, import."""

import os
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.clock import canonical_at
from quotaledger.journal.target import check_target, is_pg_url
from quotaledger.projections.ledger import EVENT_KINDS
from quotaledger.usecases.decode import Answer, Event, Names, Request
from quotaledger.usecases.fields import Identifier, Rule, Time
from quotaledger.usecases.operator import Seq
from quotaledger.usecases.out_path import check_out_path

# -- request fields ----------------------------------------------------------------------


def parse_digest(name: str, text: str) -> tuple[int, str]:
    """`SEQ:HASH` as its seq and hash, or the `invalid_digest` error."""
    seq_text, _, hash_hex = text.partition(":")
    if not seq_text.isdigit() or len(hash_hex) != 64 or hash_hex.strip("0123456789abcdef"):
        raise InvalidInput(
            f"{name} {text!r} is not SEQ:HASH (a seq and 64 lowercase hex digits)",
            code=codes.INVALID_DIGEST,
        )
    return int(seq_text), hash_hex


def check_export_to(name: str, path: str) -> None:
    if path != "-":  # stdout
        check_out_path(name, path)


def check_import_source(name: str, path: str) -> None:
    """Refuse (exit 2) an `import FILE` that names nothing to import: the advice a
    missing journal gets ("a writing command creates it") would be wrong here."""
    check_target(path, option=name)
    if not is_pg_url(path) and not os.path.lexists(path):
        raise InvalidInput(
            f"no file {path} to import", code=codes.IMPORT_SOURCE_NOT_FOUND, path=path
        )


Digest = Annotated[
    str,
    msgspec.Meta(description="SEQ:HASH, as `digest` prints it"),
    Rule(parse_digest, always=True, code=codes.INVALID_DIGEST),
]
ExportTo = Annotated[
    str,
    msgspec.Meta(description="A new file to write, or - for stdout"),
    Rule(check_export_to, always=True, code=codes.INVALID_OPTION),
]
ImportSource = Annotated[
    str,
    msgspec.Meta(description="A verifying JSONL journal (or a postgresql:// URL)"),
    Rule(check_import_source, always=True, code=codes.IMPORT_SOURCE_NOT_FOUND),
]


class Head(msgspec.Struct):
    """The journal's head as answers show it."""

    seq: int
    hash: str
    journal_id: str | None


def head_of(head: dict[str, Any]) -> Head:
    return Head(head["seq"], head["hash"], head["journal_id"])


# -- verify ------------------------------------------------------------------------------


class VerifyRequest(Request):
    """Check the whole chain; with a digest, prove the journal only grew since it;
    with `decisions`, re-take every recorded decision as `audit` does."""

    digest: Digest | None = None
    decisions: bool = False


class TornTail(msgspec.Struct):
    seq: int
    offset: int
    reason: str


class DigestContained(msgspec.Struct):
    seq: int
    hash: str
    contained: bool


class CheckpointCheck(msgspec.Struct, kw_only=True):
    """The stored checkpoint against the fold from genesis: not used (and why), or
    used and matching."""

    seq: int
    hash: str
    used: bool
    reason: str | UnsetType = UNSET
    matches: bool | UnsetType = UNSET


class InsertedBy(msgspec.Struct):
    """One role that inserted records into a PostgreSQL journal (SPEC §2.6); `role`
    null for rows inserted before the store recorded roles."""

    role: str | None
    records: int
    first_seq: int
    last_seq: int


class NotReproducedDecision(msgspec.Struct):
    """A recorded decision the rules do not take again on the state before it."""

    seq: int
    hash: str
    kind: str
    goal: str | None
    run: str | None
    differences: list[str]


class DecisionsChecked(msgspec.Struct):
    """`verify --decisions`: how many recorded decisions were re-taken (all reproduced,
    or the answer is the error `decision_not_reproduced` listing those that were not)."""

    checked: int
    not_reproduced: list[NotReproducedDecision]


class VerifyAnswer(Answer, kw_only=True):
    ok: bool
    head: Head
    records: int
    bytes: int
    torn_tail: TornTail | None
    digest: DigestContained | UnsetType = UNSET
    checkpoint: CheckpointCheck | None
    inserted_by: list[InsertedBy] | UnsetType = UNSET
    """On PostgreSQL: who inserted what (a forged but well-chained record shows here)."""
    decisions: DecisionsChecked | UnsetType = UNSET


# -- digest, checkpoint ------------------------------------------------------------------


class DigestRequest(Request):
    """The head as SEQ:HASH, for anchoring elsewhere."""


class DigestAnswer(Answer):
    ok: bool
    seq: int
    hash: str
    journal_id: str | None
    digest: str


class CheckpointRequest(Request):
    """Write the projection state after the last record."""


class CheckpointAnswer(Answer):
    ok: bool
    seq: int
    hash: str
    offset: int
    projection_version: str


# -- repair ------------------------------------------------------------------------------


class RepairRequest(Request):
    """Move every record after `truncate_after` to a quarantine file."""

    truncate_after: Seq
    at: Time | None = None


class RepairAnswer(Answer):
    ok: bool
    appended: bool
    truncated_after_seq: int
    quarantine: str | None
    quarantined_bytes: int
    head: Head
    event: Event | UnsetType = UNSET


# -- log ---------------------------------------------------------------------------------


def kind_matches(kind: str, wanted: str) -> bool:
    return kind == wanted or kind.startswith(wanted + ".")


class LogRequest(Request):
    """Events in journal order, filtered (`kind` exactly or as a prefix; `run`: the
    events that name it), the first `limit` or the `last` N; with `follow`, then what
    is appended."""

    goal: Identifier | None = None
    run: Identifier | None = None
    kind: str | None = None
    since: Time | None = None
    until: Time | None = None
    limit: Seq | None = None
    last: Seq | None = None
    follow: bool = False

    def check(self, names: Names) -> None:
        if self.limit is not None and self.last is not None:
            raise InvalidInput(
                f"give {names('limit')} N (the first N) or {names('last')} N (the last N), "
                "not both",
                code=codes.INVALID_OPTION,
            )
        wanted = self.wanted_kind()
        if wanted is not None and not any(kind_matches(known, wanted) for known in EVENT_KINDS):
            raise InvalidInput(
                f"{names('kind')} {self.kind!r} names no event kind or domain "
                "(e.g. capacity, capacity.observed, journal)",
                code=codes.UNKNOWN_KIND,
            )
        # Checked like every time (SPEC §7): an empty --since is a mistake, not "all".
        since_at = _range_end(names("since"), self.since)
        until_at = _range_end(names("until"), self.until)
        if since_at is not None and until_at is not None and until_at < since_at:
            raise InvalidInput(
                f"{names('since')} {since_at} is after {names('until')} {until_at}",
                code=codes.INVALID_OPTION,
            )

    def wanted_kind(self) -> str | None:
        """The kind without trailing dots: `capacity.` and `capacity` are one domain."""
        return None if self.kind is None else self.kind.rstrip(".")


def _range_end(name: str, text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return canonical_at(text)
    except InvalidInput as error:
        raise InvalidInput(f"{name}: {error.message}", code=error.code) from None


class LogAnswer(msgspec.Struct):
    """One event as `log` gives it (a JSON Lines line); its `data` is the payload
    as journaled."""

    seq: int
    at: str
    kind: str
    goal: str | None
    data: Any
    prev: str
    hash: str
    inserted_by: str | UnsetType | None = UNSET
    """On PostgreSQL: the role that inserted the record (null: not recorded)."""


# -- export, import ----------------------------------------------------------------------


class ExportRequest(Request):
    """Write every verified record, byte for byte, to a new file (`-`: stdout)."""

    to: ExportTo


class ExportAnswer(Answer):
    ok: bool
    to: str
    records: int
    bytes: int
    head: Head


class ImportRequest(Request):
    """Load a verified JSONL journal into this (empty) journal, hashes preserved;
    refused if a recorded decision does not reproduce, unless `allow_unreproduced`."""

    file: ImportSource
    allow_unreproduced: bool = False


class ImportAnswer(Answer):
    ok: bool
    appended: bool
    records: int
    head: Head
    event: Event
