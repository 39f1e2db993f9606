"""Progress bars for long replays: on a terminal only, always on stderr."""

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Progress = Callable[[int], None]


@contextmanager
def progress_bar(label: str, total_bytes: int | None) -> Iterator[Progress | None]:
    """A byte-count progress callback, or None when stderr is not a terminal."""
    if not sys.stderr.isatty() or not total_bytes or total_bytes < (8 << 20):
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        TimeRemainingColumn,
    )
    from rich.progress import (
        Progress as RichProgress,
    )

    columns = (label, BarColumn(), DownloadColumn(), TimeRemainingColumn())
    # Redrawn on each step, not by rich's refresh thread: `verify` forks worker
    # processes, and forking while another thread runs can copy a lock it holds.
    console = Console(stderr=True)
    with RichProgress(*columns, console=console, transient=True, auto_refresh=False) as bar:
        task = bar.add_task(label, total=total_bytes)

        def step(done: int) -> None:
            bar.advance(task, done)
            bar.refresh()

        yield step
