"""The path of a file a command writes besides the journal (`report --out`, `metrics
--out`, `export --to`), checked when its request is decoded, before any work: the
write itself is services/outfile.py's."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.limits import NAME_BYTES_MAX


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
    try:
        found = os.stat(path)  # through a symlink: what would be written
    except OSError:
        return  # nothing there yet (or a dangling link): the file is created
    if stat.S_ISBLK(found.st_mode):
        # Written through, a disk's first bytes (its partition table) would go.
        raise _refusal(
            option,
            about,
            lambda name: f"{name} {path} is a block device, which an output never overwrites",
            codes.INVALID_OPTION,
        )
