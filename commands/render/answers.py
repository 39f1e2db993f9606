"""A use case's answer as its CLI command prints it: the renderer its registry row
names (SPEC §8, §11).

The CLI commands, the typer-free per-event commands and `serve` (for a CLI client of
a server, `--journal http://...`) all print through `output_of`, so there is one
renderer per use case, and a client of a server loads none of the types or renderers
it needs. A renderer's module loads on its use case's first printout.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from quotaledger.render.output import Output, Shown
from quotaledger.usecases.registry import USE_CASES, resolve


def output_of(name: str, request: Any, answer: Any, shown: Shown) -> Output:
    """What the CLI command of use case `name` prints (and exits with) for this answer."""
    case = USE_CASES[name]
    if case.output is not None:
        output: Output = resolve(f"render.{case.output}")(request, answer, shown)
        return output
    assert case.text is not None, f"{name} has no renderer"
    return Output(answer, text=resolve(f"render.{case.text}")(answer))


def log_printed(events: Iterable[Any], *, as_json: bool, follow: bool) -> Iterator[bytes]:
    """What `log` prints for these events, piece by piece as they come, as UTF-8 (its
    module imported on first use, as every renderer's)."""
    printed = resolve("render.journal.log_printed")
    for piece in printed(events, as_json=as_json, follow=follow):
        yield piece.encode()
