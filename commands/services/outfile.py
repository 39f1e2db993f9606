"""Files a command writes besides the journal (`report --out`, `metrics --out`,
`export --to`): the path checked before any work, the bytes replaced atomically."""

from __future__ import annotations

import contextlib
import os

from quotaledger.journal import InvalidInput, StorageFailure, codes
from quotaledger.journal.checkpoint import FILE_SUFFIXES
from quotaledger.journal.filecheck import holds_journal as file_holds_journal
from quotaledger.journal.fsutil import create_temp_beside, fsync_dir, write_all
from quotaledger.usecases.out_path import check_out_path

OUT_FILE_MODE = 0o644
"""Readable by the collector or browser that reads it (no secret in it)."""


def holds_journal(path: str) -> bool:
    """Whether `path` is a journal file (its first line the genesis record), or a
    journal's checkpoint file: overwriting either destroys acknowledged history (SPEC §7)."""
    for suffix in FILE_SUFFIXES:
        if path.endswith(suffix) and os.path.isfile(path[: -len(suffix)]):
            return True
    return file_holds_journal(path)


def refuse_journal(field: str, path: str) -> None:
    """Refuse (exit 2 `out_is_journal`) an output onto a file that holds a journal;
    `field` is the request's (`out`, `to`)."""
    if holds_journal(path):
        raise InvalidInput(
            lambda name: (
                f"{name} {path} holds a journal (or its checkpoint); "
                "an output never replaces one: name another file"
            ),
            code=codes.OUT_IS_JOURNAL,
            about=field,
        )


def write_atomically(field: str, path: str, data: bytes) -> None:
    """Replace `path` with `data` so that a reader sees the old file or the new one,
    never part of one: a temporary file beside it (a name no collector globs), fsync,
    rename over `path`, fsync the directory. `field` is the request's (`out`)."""
    check_out_path(field, path, about=True)
    # export never replaces any file (export_target_exists); these outputs replace
    # their own earlier output, so they must tell it from a journal.
    refuse_journal(field, path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = create_temp_beside(path, mode=OUT_FILE_MODE, hidden=True)
    except OSError as exc:
        reason = exc.strerror
        raise StorageFailure(
            lambda name: f"{name}: cannot write in {directory}: {reason}", about=field
        ) from exc
    try:
        try:
            write_all(fd, data)
            os.fchmod(fd, OUT_FILE_MODE)  # whatever the umask: the reader is another user
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        _unlink_quietly(tmp)
        reason = exc.strerror
        raise StorageFailure(
            lambda name: f"{name}: writing {path} failed: {reason}", about=field
        ) from exc
    except BaseException:
        _unlink_quietly(tmp)
        raise
    fsync_dir(path)


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
