"""The demo's own journals (SPEC §7): `demo` never moves, rotates or deletes a journal
it did not write.

`<journal>.demo` names the journal_id of each journal the demo created at that path
(the one there and the `.previous` one); a run rotates the journal at the path to
`<journal>.previous` only when the marker names it, and replaces a `.previous` only
when the marker names that one too. Anything else is refused (`not_a_demo_journal`,
exit 2) and left as it is: `demo --journal prod.jsonl` given by mistake moves nothing.
"""

from __future__ import annotations

import contextlib
import os
import stat

import msgspec

from quotaledger.journal import InvalidInput, NotAJournal, NotRegularFile, codes
from quotaledger.journal.chain import not_a_journal
from quotaledger.journal.checkpoint import FILE_SUFFIXES
from quotaledger.journal.filecheck import first_line, insecure_reason, journal_id_of
from quotaledger.journal.fsutil import create_temp_beside, fsync_dir, write_all

MARKER_SUFFIX = ".demo"
PREVIOUS_SUFFIX = ".previous"


class DemoMarker(msgspec.Struct, forbid_unknown_fields=True):
    """What `<journal>.demo` holds: the journal_ids of the demo's journals there."""

    demo_journals: list[str]


_decode_marker = msgspec.json.Decoder(DemoMarker).decode
_encode_marker = msgspec.json.Encoder().encode


def _not_ours(path: str, why: str) -> InvalidInput:
    return InvalidInput(
        f"{path} {why}; the demo moves and replaces only journals it wrote: give the "
        "demo another --journal",
        code=codes.NOT_A_DEMO_JOURNAL,
        path=path,
    )


def marked_ids(path: str) -> set[str]:
    """The journal_ids `<path>.demo` names (none when there is no marker). A marker
    path holding anything else (a journal someone named so) is refused: the demo would
    replace it."""
    marker = path + MARKER_SUFFIX
    if not os.path.lexists(marker):
        return set()
    try:
        if not stat.S_ISREG(os.lstat(marker).st_mode):
            raise ValueError(marker)
        with open(marker, "rb") as f:
            named = set(_decode_marker(f.read(1 << 16)).demo_journals)
            # One that someone else may have written names nothing: it would let them
            # have the demo rotate a journal of their choosing away.
            return set() if insecure_reason(os.fstat(f.fileno())) else named
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        raise _not_ours(marker, "is not the demo's marker") from None


def _demo_journal_id(path: str, marked: set[str]) -> str:
    """The journal_id of the demo journal at `path`; refused unless the marker names it."""
    if not stat.S_ISREG(os.lstat(path).st_mode):  # a directory, FIFO, symlink: not a demo's
        raise NotRegularFile(
            f"{path} is not a regular file; the demo moves only its own", path=path
        )
    start = first_line(path) or b""
    if not_a_journal(start):  # a README given by mistake is not moved, let alone replaced
        raise NotAJournal(
            f"{path} is not a quotaledger journal; give the demo another --journal", path=path
        )
    journal_id = journal_id_of(path)
    if journal_id is None or journal_id not in marked:
        raise _not_ours(path, "holds a journal the demo did not write")
    return journal_id


def fresh_path(path: str) -> str | None:
    """Rotate the demo's earlier journal (and its checkpoint) to `<path>.previous`,
    replacing the one an earlier run moved there: one previous demo is kept, so running
    the demo again and again leaves no pile of journals. Every check comes before the
    first move: a refusal changes nothing. The path it moved to, if any."""
    marked = marked_ids(path)
    if not os.path.lexists(path) or (
        stat.S_ISREG(os.lstat(path).st_mode) and os.path.getsize(path) == 0
    ):
        return None  # nothing there to keep: the demo writes its journal here
    _demo_journal_id(path, marked)
    aside = path + PREVIOUS_SUFFIX
    if os.path.lexists(aside):
        _demo_journal_id(aside, marked)
    os.replace(path, aside)
    for suffix in FILE_SUFFIXES:  # its checkpoint's base and delta
        if os.path.lexists(path + suffix):
            os.replace(path + suffix, aside + suffix)
        elif os.path.lexists(aside + suffix):  # the older previous demo's
            os.unlink(aside + suffix)
    return aside


def remember(path: str, journal_id: str) -> None:
    """Name the journal the demo just created at `path` in its marker, beside the one
    at `.previous` (still the demo's to replace); written atomically."""
    keep = [journal_id]
    previous = journal_id_of(path + PREVIOUS_SUFFIX)
    if previous is not None and previous in marked_ids(path):
        keep.insert(0, previous)
    marker = path + MARKER_SUFFIX
    fd, temp = create_temp_beside(marker)
    try:
        try:
            write_all(fd, _encode_marker(DemoMarker(demo_journals=keep)) + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, marker)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_dir(marker)
