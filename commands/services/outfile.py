"""Files a command writes besides the journal (`report --out`, `metrics --out`,
`export --to`): the path checked before any work, the bytes replaced atomically."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from quotaledger.journal import InvalidInput, StorageFailure, codes
from quotaledger.journal.checkpoint import FILE_SUFFIXES
from quotaledger.journal.filecheck import holds_journal as file_holds_journal
from quotaledger.journal.fsutil import create_temp_beside, fsync_dir, write_all

OUT_FILE_MODE = 0o644
"""Readable by the collector or browser that reads it (no secret in it)."""


NAME_BYTES_MAX = 255
"""The longest file name Linux filesystems take (NAME_MAX)."""


def _refusal(name: str, about: bool, message: Callable[[str], str], code: str) -> InvalidInput:
    """The error naming the option `name`: the caller's word for it, or (`about`) the
    request's field, which each caller words its own way (the CLI: its flag)."""
    if about:
        return InvalidInput(message, code=code, about=name)
    return InvalidInput(message(name), code=code)


def check_out_path(option: str, path: str, *, about: bool = False) -> None:
    """Refuse (exit 2) a path no file can be written to: empty, in a missing
    directory, or a directory itself."""
    if not path:
        raise _refusal(
            option,
            about,
            lambda name: f"{name} is empty: give the file to write",
            codes.INVALID_OPTION,
        )
    name = os.path.basename(path)
    try:
        too_long = len(os.fsencode(name)) > NAME_BYTES_MAX
    except UnicodeEncodeError:  # a lone surrogate no filesystem name can hold
        too_long = True
    if too_long or "\0" in path:
        # Refused before any work, as a missing directory is (ENAMETOOLONG at the write
        # would read as an I/O failure, exit 4).
        shown = name if len(name) <= 40 else name[:20] + f"... ({len(name)} characters)"
        raise _refusal(
            option,
            about,
            lambda name: f"{name}: {shown!r} cannot name a file (at most {NAME_BYTES_MAX} bytes)",
            codes.INVALID_OPTION,
        )
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise _refusal(
            option,
            about,
            lambda name: f"{name} {path}: directory {directory} does not exist",
            codes.INVALID_OPTION,
        )
    if os.path.isdir(path):
        raise _refusal(
            option, about, lambda name: f"{name} {path} is a directory", codes.INVALID_OPTION
        )


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
