"""What the journal commands print (verify, digest, repair, log)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from quotaledger.journal import JournalCorrupt
from quotaledger.render.output import plural, table
from quotaledger.usecases.journal import (
    DigestAnswer,
    Head,
    LogAnswer,
    RepairAnswer,
    VerifyAnswer,
)


def digest_text(answer: DigestAnswer) -> str:
    return answer.digest


def head_text(head: Head) -> str:
    return f"{head.seq}:{head.hash}"


def verify_text(answer: VerifyAnswer) -> str:
    """SPEC §8: `verify` prints OK and the head."""
    head = answer.head
    lines = [
        f"OK {head_text(head)} ({plural(answer.records, 'record')}, {answer.bytes:,} bytes, "
        f"journal {head.journal_id})"
    ]
    digest = answer.digest
    if not isinstance(digest, msgspec.UnsetType):
        lines.append(f"digest {digest.seq}:{digest.hash} is contained: the journal only grew")
    decisions = answer.decisions
    if not isinstance(decisions, msgspec.UnsetType):
        lines.append(f"{plural(decisions.checked, 'recorded decision')} re-taken: all reproduced")
    if not isinstance(answer.inserted_by, msgspec.UnsetType):
        for who in answer.inserted_by:
            role = "(not recorded)" if who.role is None else who.role
            lines.append(
                f"inserted by {role}: {plural(who.records, 'record')}, "
                f"seq {who.first_seq}..{who.last_seq}"
            )
    torn = answer.torn_tail
    if torn is not None:
        lines.append(
            f"torn tail after seq {torn.seq - 1} at byte {torn.offset:,} ({torn.reason}): "
            "never acknowledged; the next writer moves it aside"
        )
    return "\n".join(lines)


def repair_text(answer: RepairAnswer) -> str:
    kept = answer.truncated_after_seq
    if answer.quarantine is None:
        return f"nothing after seq {kept} to move; head {head_text(answer.head)}"
    text = (
        f"repaired: kept records 0..{kept}, moved {answer.quarantined_bytes:,} bytes to "
        f"{answer.quarantine}"
    )
    if not isinstance(answer.event, msgspec.UnsetType):
        text += f"; logged as seq {answer.event.seq} (journal.repaired)"
    return text


LOG_HEADER = ["SEQ", "AT", "GOAL", "KIND", "DATA"]


LOG_INSERTED_BY = "INSERTED BY"
"""The column a PostgreSQL journal adds (SPEC §2.6): the role that inserted the event."""


def _row(event: LogAnswer) -> list[str]:
    cells = [str(event.seq), event.at, event.goal or "-", event.kind, _summary(event.data)]
    if not isinstance(event.inserted_by, msgspec.UnsetType):
        cells.insert(4, "?" if event.inserted_by is None else event.inserted_by)
    return cells


def _header(rows: list[list[str]]) -> list[str]:
    if rows and len(rows[0]) > len(LOG_HEADER):
        return [*LOG_HEADER[:4], LOG_INSERTED_BY, LOG_HEADER[4]]
    return LOG_HEADER


def _line(event: LogAnswer) -> str:
    """The event as a JSON Lines line (the standard library's escapes, as ever)."""
    return json.dumps(msgspec.to_builtins(event), separators=(",", ":")) + "\n"


FOLLOW_WIDTHS = [6, 27, 16, 26]
"""--follow's columns (SEQ, AT, GOAL, KIND): fixed, as rows are printed as they come."""


def log_printed(events: Iterable[LogAnswer], *, as_json: bool, follow: bool) -> Iterator[str]:
    """What `log` prints, piece by piece as the events come: JSON Lines; with
    --follow, a header and then each event's row (fixed widths); else a count and a
    table (whose widths need every row), or `no events`. On a corrupt journal, the
    verified prefix's table, then the error. `serve` prints a CLI client's log with
    it too (render/answers.py)."""
    if as_json:
        for event in events:
            yield _line(event)
        return
    if follow:
        yield _fixed(LOG_HEADER, FOLLOW_WIDTHS)
        for event in events:
            yield _fixed(_row(event), FOLLOW_WIDTHS)
        return
    rows: list[list[str]] = []
    try:
        for event in events:
            rows.append(_row(event))
    except JournalCorrupt:
        yield table(rows, _header(rows)) + "\n"
        raise
    if not rows:
        yield "no events\n"
    else:
        yield plural(len(rows), "event") + "\n" + table(rows, _header(rows)) + "\n"


def _fixed(cells: list[str], widths: list[int]) -> str:
    padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=False)]
    return " ".join([*padded, *cells[len(widths) :]]).rstrip() + "\n"


def _summary(data: dict[str, Any], width: int = 80) -> str:
    text = json.dumps(data, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"
