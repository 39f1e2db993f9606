"""Small durable-file helpers shared by the file store, checkpoints and exports."""

from __future__ import annotations

import fcntl
import os
import uuid

FILE_MODE = 0o600


def fsync_dir(path: str) -> None:
    """Make a directory entry (a created or renamed file) durable."""
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> int:
    """Write every byte of `data` (looping over short writes); the count."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return len(data)


TEMP_MARK = ".tmp."
"""Temporary files beside a target are `<name>.tmp.<pid>.<unique>` (`.<name>...` when
hidden from collectors that glob the directory)."""


def create_temp_beside(
    path: str, *, mode: int = FILE_MODE, flags: int = os.O_WRONLY, hidden: bool = False
) -> tuple[int, str]:
    """A new temporary file beside `path`, to be written, synced and renamed over it;
    its descriptor and path. It is flocked until the descriptor is closed, so whoever
    finds it later can tell an abandoned one (its writer was killed mid-write) from one
    being written; the abandoned ones of `path` are removed first, so a crash leaves
    at most one behind, until the next write of the same file."""
    directory, name = os.path.split(os.path.abspath(path))
    prefix = ("." if hidden else "") + name + TEMP_MARK
    remove_abandoned_temps(directory, prefix)
    temp = os.path.join(directory, f"{prefix}{os.getpid()}.{uuid.uuid4().hex}")
    fd = os.open(temp, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a new file: nobody else can hold it yet
    return fd, temp


def remove_abandoned_temps(directory: str, prefix: str) -> None:
    """Remove the files `<prefix><pid>.<unique>` in `directory` whose writer is gone:
    its pid no longer runs (during its open, before its flock, only the pid tells) and
    nobody holds its flock (a pid from another pid namespace may look dead here).
    Best effort: whatever cannot be checked is left alone."""
    try:
        names = [entry for entry in os.listdir(directory or ".") if entry.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid_text = name[len(prefix) :].split(".", 1)[0]
        if not pid_text.isdigit() or _pid_runs(int(pid_text)):
            continue
        temp = os.path.join(directory, name)
        try:
            fd = os.open(temp, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held, named = os.fstat(fd), os.stat(temp, follow_symlinks=False)
            if (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino):
                os.unlink(temp)
        except OSError:
            pass  # being written after all, or gone already
        finally:
            os.close(fd)


def _pid_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: it runs
    return True
