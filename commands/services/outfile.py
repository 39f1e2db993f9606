"""Files a command writes besides the journal (`report --out`, `metrics --out`,
`export --to`): the path checked before any work, the bytes replaced atomically."""

from __future__ import annotations

import contextlib
import os

from quotaledger.journal import InvalidInput, StorageFailure, codes
from quotaledger.journal.checkpoint import FILE_SUFFIXES
from quotaledger.journal.filecheck import holds_journal as file_holds_journal
from quotaledger.journal.fsutil import create_temp_beside, fsync_dir, write_all

OUT_FILE_MODE = 0o644
"""Readable by the collector or browser that reads it (no secret in it)."""


NAME_BYTES_MAX = 255
"""The longest file name Linux filesystems take (NAME_MAX)."""


def check_out_path(option: str, path: str) -> None:
    """Refuse (exit 2) a path no file can be written to: empty, in a missing
    directory, or a directory itself."""
    if not path:
        raise InvalidInput(f"{option} is empty: give the file to write", code=codes.INVALID_OPTION)
    name = os.path.basename(path)
    try:
        too_long = len(os.fsencode(name)) > NAME_BYTES_MAX
    except UnicodeEncodeError:  # a lone surrogate no filesystem name can hold
        too_long = True
    if too_long or "\0" in path:
        # Refused before any work, as a missing directory is (ENAMETOOLONG at the write
        # would read as an I/O failure, exit 4).
        shown = name if len(name) <= 40 else name[:20] + f"... ({len(name)} characters)"
        raise InvalidInput(
            f"{option}: {shown!r} cannot name a file (at most {NAME_BYTES_MAX} bytes)",
            code=codes.INVALID_OPTION,
        )
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise InvalidInput(
            f"{option} {path}: directory {directory} does not exist", code=codes.INVALID_OPTION
        )
    if os.path.isdir(path):
        raise InvalidInput(f"{option} {path} is a directory", code=codes.INVALID_OPTION)


def holds_journal(path: str) -> bool:
    """Whether `path` is a journal file (its first line the genesis record), or a
    journal's checkpoint file: overwriting either destroys acknowledged history (SPEC §7)."""
    for suffix in FILE_SUFFIXES:
        if path.endswith(suffix) and os.path.isfile(path[: -len(suffix)]):
            return True
    return file_holds_journal(path)


def refuse_journal(option: str, path: str) -> None:
    """Refuse (exit 2 `out_is_journal`) an output onto a file that holds a journal."""
    if holds_journal(path):
        raise InvalidInput(
            f"{option} {path} holds a journal (or its checkpoint); "
            "an output never replaces one: name another file",
            code=codes.OUT_IS_JOURNAL,
        )


def write_atomically(option: str, path: str, data: bytes) -> None:
    """Replace `path` with `data` so that a reader sees the old file or the new one,
    never part of one: a temporary file beside it (a name no collector globs), fsync,
    rename over `path`, fsync the directory."""
    check_out_path(option, path)
    # export never replaces any file (export_target_exists); these outputs replace
    # their own earlier output, so they must tell it from a journal.
    refuse_journal(option, path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = create_temp_beside(path, mode=OUT_FILE_MODE, hidden=True)
    except OSError as exc:
        raise StorageFailure(f"{option}: cannot write in {directory}: {exc.strerror}") from exc
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
        raise StorageFailure(f"{option}: writing {path} failed: {exc.strerror}") from exc
    except BaseException:
        _unlink_quietly(tmp)
        raise
    fsync_dir(path)


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
