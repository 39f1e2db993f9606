"""Writing what a command prints, for the local CLI and its client of a server alike:
JSON as the UTF-8 bytes it is, text through stdout's encoding as it comes, and a
reader of stdout that went away (`quotaledger log --follow | head`). Loads nothing.
"""

from __future__ import annotations

import codecs
import os
import sys
from typing import Any

from quotaledger.render.outcome import EXIT_OK


def write_bytes(stream: Any, data: bytes) -> None:
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text-only stream (a test's StringIO)
        stream.write(data.decode())
    else:
        stream.flush()
        buffer.write(data)
    stream.flush()


class Printer:
    """An answer's body printed on stdout piece by piece as it comes (a streamed log):
    JSON as bytes, text decoded as it comes (a character may straddle two pieces)."""

    def __init__(self, *, as_json: bool) -> None:
        self._text = None if as_json else codecs.getincrementaldecoder("utf-8")()

    def __call__(self, data: bytes) -> None:
        if self._text is None:
            write_bytes(sys.stdout, data)
        else:
            sys.stdout.write(self._text.decode(data))
            sys.stdout.flush()


def closed_stdout() -> int:
    """Exit code when stdout was closed under us (0: a pipeline's reader stopped
    reading); later writes, and the interpreter's final flush, go to /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_OK
