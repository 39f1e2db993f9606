"""Files a command writes besides the journal (`report --out`, `metrics --out`,
`export --to`): the path checked before any work, the bytes replaced atomically.

An output replaces nothing but a regular file: a symlink is followed (the link stays,
its target is replaced), a character device, a FIFO or a Unix socket is written
through (never renamed over: `/dev/null` would become a file), a block device (a disk's
first bytes), a directory and a journal are refused.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat

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
    rename over `path`, fsync the directory. `field` is the request's (`out`). A path
    that names a device, a FIFO or a socket is written through instead (module doc)."""
    check_out_path(field, path, about=True)
    try:
        found: os.stat_result | None = os.stat(path)
    except OSError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):
        _write_through(field, path, data, found)
        return
    # A symlink stays: the file it names is the output (an operator's link into
    # the collector's directory, or a file that moved).
    path = os.path.realpath(path)
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


def _write_through(field: str, path: str, data: bytes, found: os.stat_result) -> None:
    """Write `data` into the character device, FIFO or Unix socket at `path` (a FIFO
    waits for its reader, as a shell's `> FIFO` does)."""
    try:
        if stat.S_ISSOCK(found.st_mode):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
                peer.connect(path)
                peer.sendall(data)
            return
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        reason = exc.strerror
        raise StorageFailure(
            lambda name: f"{name}: writing {path} failed: {reason}", about=field
        ) from exc


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
