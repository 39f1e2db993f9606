"""The cycle collector paused while a command line starts (both CLIs)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Start-up without the cycle collector.

    A runner calls the CLI once per event, so start-up is on its hot path. Importing
    typer, click, msgspec and this package and building the command allocate tens of
    thousands of objects that live until exit, and the collector walks them again and
    again while they are made: about a tenth of a call's CPU, and none of it garbage.
    It is paused while they are made and resumed before the command runs (or the
    importer goes on), so long commands collect as usual.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
