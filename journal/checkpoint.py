"""Checkpoints: the projection state after record N, stored beside the journal.

`<journal>.checkpoint` (the base) holds every goal's state in its own section with an
index (journal/sections.py); `<journal>.checkpoint.delta`, when there is one, holds
the sections of the goals that changed since, and names its base: a writer refreshing
the checkpoint rewrites only what changed, and the base only when the delta has grown
past a fraction of it. Each file is written atomically (temp file, fsync, rename,
fsync the directory) and used only after the record ending its prefix is found in the
log with exactly its seq and hash, and its projection version matches the code (the
journal checks, see journal/fold.py). A file that is insecure, cut short or damaged
is ignored with a warning, never trusted.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
from collections.abc import Iterable, Iterator, Sequence

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.filecheck import holds_journal, insecure_reason
from quotaledger.journal.fsutil import create_temp_beside, fsync_dir
from quotaledger.journal.sections import (
    TRAILER_BYTES,
    Damaged,
    Entry,
    Header,
    Section,
    SectionFile,
    header_of_tail,
    layout,
)

CHECKPOINT_SUFFIX = ".checkpoint"
DELTA_SUFFIX = ".delta"
FILE_SUFFIXES = (CHECKPOINT_SUFFIX, CHECKPOINT_SUFFIX + DELTA_SUFFIX)
"""A journal's checkpoint files, beside it: the base and the delta."""
PEEK_BYTES = 4096
"""Enough of a checkpoint file's end for its header."""


class Checkpoint:
    """A stored checkpoint: its base, and the delta completing it (if any). What it
    says about the journal (seq, hash, offset...) is the newest file's header."""

    def __init__(self, base: SectionFile, delta: SectionFile | None = None) -> None:
        self.base = base
        self.delta = delta
        top = (delta or base).header
        self.top: Header = top
        self.seq, self.hash, self.offset = top.seq, top.hash, top.offset
        self.journal_id = top.journal_id
        self.projection_version = top.projection_version
        self.null_goal_last_at = top.null_goal_last_at
        self.latest_at = top.latest_at

    @property
    def files(self) -> Sequence[SectionFile]:
        return (self.base,) if self.delta is None else (self.delta, self.base)

    def entry(self, goal: str) -> tuple[SectionFile, Entry] | None:
        """Where the goal's section is: the delta's, else the base's."""
        for file in self.files:
            found = file.entry(goal)
            if found is not None:
                return file, found
        return None

    def entries(self) -> Iterator[tuple[SectionFile, Entry]]:
        """Every goal's newest entry."""
        seen: set[str] = set()
        for file in self.files:
            for entry in file.entries():
                if entry.goal not in seen:
                    seen.add(entry.goal)
                    yield file, entry


def checkpoint_path(journal_path: str) -> str:
    return journal_path + CHECKPOINT_SUFFIX


def delta_path(checkpoint: str) -> str:
    return checkpoint + DELTA_SUFFIX


def write_checkpoint(
    path: str, header: Header, sections: Iterable[Section], *, delta: bool
) -> SectionFile:
    """Write a base (replacing any delta, which names the old base) or a delta beside
    it, atomically; the file as written (mapped: a handle's next refresh copies its
    unchanged sections from it, whoever renames another file over it meanwhile)."""
    written = write_checkpoint_file(delta_path(path) if delta else path, layout(header, sections))
    if not delta:
        remove_delta(path)
    return written


def write_checkpoint_file(path: str, parts: Sequence[bytes | memoryview]) -> SectionFile:
    """Write one checkpoint file atomically: temp file, fsync, rename, fsync the dir."""
    if holds_journal(path):  # a cache is never worth a journal that has its name (SPEC §7)
        raise InvalidInput(
            f"{path} holds a journal, not a checkpoint; no checkpoint replaces it: "
            "rename that journal",
            code=codes.OUT_IS_JOURNAL,
            path=path,
        )
    # Unique per writer: two handles (threads or processes) may refresh at once.
    fd, tmp = create_temp_beside(path, flags=os.O_RDWR)
    try:
        try:
            with os.fdopen(os.dup(fd), "wb", buffering=1 << 20) as out:
                for part in parts:
                    out.write(part)
            os.fsync(fd)
            written = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        # A failed checkpoint (a full disk, say) leaves no temp file behind.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path)
    return SectionFile(written)


def remove_delta(path: str) -> None:
    """After a new base: the old delta names the old base and would only be skipped."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(delta_path(path))


def read_checkpoint(path: str) -> Checkpoint | None:
    """The checkpoint at `path` (and its delta), or None (with a warning) if it is
    missing or cannot be trusted. A delta that cannot be trusted, or names another
    base, is left out: the base alone is a valid, older checkpoint."""
    base = read_section_file(path)
    if base is None:
        return None
    if base.header.base is not None:
        warn(f"ignoring checkpoint {path}: it is a delta, not a base")
        return None
    delta = read_section_file(delta_path(path))
    if delta is not None and (
        delta.header.base != base.header.file_id or delta.header.seq < base.header.seq
    ):
        delta = None  # a stale delta, left by a writer that then wrote a new base
    return Checkpoint(base, delta)


def read_section_file(path: str) -> SectionFile | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        warn(f"ignoring checkpoint {path}: {exc.strerror}")
        return None
    try:
        found = os.fstat(fd)
        insecure = insecure_reason(found)
        if insecure is not None:  # a forged checkpoint could hand a writer a full slot
            warn(f"ignoring checkpoint {path}: {insecure}; folding from genesis")
            return None
        # Mapped, not read: a command about one goal touches one bucket and one section
        # of a file that may hold every goal's state.
        data = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if found.st_size else b""
    except (OSError, ValueError) as exc:  # a directory, a FIFO, another unmappable thing
        warn(f"ignoring checkpoint {path}: {getattr(exc, 'strerror', None) or exc}")
        return None
    finally:
        os.close(fd)
    try:
        return SectionFile(data)
    except Damaged as exc:
        warn(f"ignoring checkpoint {path}: {exc}")
        return None


def peek_checkpoint(path: str) -> tuple[int, str] | None:
    """The seq and projection version of the checkpoint at `path` (its delta's, if it
    has a current one), from the files' last bytes alone (None: no checkpoint, or not
    one this can read): what a writer asks before refreshing a checkpoint another
    writer may have refreshed already, without mapping the state."""
    base = peek_header(path)
    if base is None or base.base is not None:
        return None
    delta = peek_header(delta_path(path))
    top = delta if delta is not None and delta.base == base.file_id else base
    return top.seq, top.projection_version


def peek_header(path: str) -> Header | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        found = os.fstat(fd)
        if insecure_reason(found) is not None or found.st_size < TRAILER_BYTES:
            return None  # as read_checkpoint: writers refresh what no reader would trust
        start = max(0, found.st_size - PEEK_BYTES)
        tail = os.pread(fd, found.st_size - start, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    header = header_of_tail(tail)
    return header if header is not None and header.size == found.st_size else None


def warn(message: str) -> None:
    print(f"quotaledger: warning: {message}", file=sys.stderr)
