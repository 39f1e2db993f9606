"""A server's token files (`serve --token-file`, `--read-token-file`), checked as a
journal is before anything is bound: whoever may write a token file may let anyone
in, whoever may read it is in already.

A token file must be a regular file (not a symlink, which someone else may point
elsewhere, nor a FIFO, which would hang start-up), owned by the server's user or
root, that its group and others may not write and others may not read, of at most
`TOKEN_FILE_BYTES_MAX` bytes; else exit 2 `token_file_insecure`. Its content is the
token, a trailing newline ignored; it is never echoed.
"""

from __future__ import annotations

import errno
import os
import stat

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.limits import TOKEN_FILE_BYTES_MAX


def read_token_file(path: str | None, option: str) -> str | None:
    """The token in the file at `path` (None for no file), or exit 2."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW: the last component is a symlink
            raise _insecure(option, path, "it is a symlink") from None
        raise _unreadable(option, path, exc.strerror) from None
    try:
        found = os.fstat(fd)
        reason = _insecure_reason(found)
        if reason is not None:
            raise _insecure(option, path, reason)
        data = os.read(fd, TOKEN_FILE_BYTES_MAX + 1)
    except OSError as exc:
        raise _unreadable(option, path, exc.strerror) from None
    finally:
        os.close(fd)
    if len(data) > TOKEN_FILE_BYTES_MAX:
        raise _insecure(option, path, f"it holds more than {TOKEN_FILE_BYTES_MAX} bytes")
    try:
        token = data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        token = ""
    if not token or any(c.isspace() for c in token):
        raise InvalidInput(
            f"{option} {path!r} must hold one token (no spaces)", code=codes.INVALID_OPTION
        )
    return token


def _insecure_reason(found: os.stat_result) -> str | None:
    if not stat.S_ISREG(found.st_mode):
        return "it is not a regular file"
    if found.st_uid not in (os.geteuid(), 0):
        return f"it is owned by uid {found.st_uid}, not by the server's user or root"
    mode = stat.S_IMODE(found.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"its group or others may write it (mode {mode:04o})"
    if mode & stat.S_IROTH:
        return f"others may read it (mode {mode:04o})"
    return None


def _insecure(option: str, path: str, reason: str) -> InvalidInput:
    return InvalidInput(
        f"{option} {path!r} cannot be trusted: {reason}; "
        "make it a file of yours that only you can read (chmod 600)",
        code=codes.TOKEN_FILE_INSECURE,
    )


def _unreadable(option: str, path: str, reason: str | None) -> InvalidInput:
    return InvalidInput(f"{option} {path!r} cannot be read: {reason}", code=codes.INVALID_OPTION)
