"""Small durable-file helpers shared by the file store, checkpoints and exports."""

from __future__ import annotations

import os

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
