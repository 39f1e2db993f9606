"""A served use case's answer as its CLI command prints it, for `serve` (SPEC §11).

A CLI client of a server (`--journal http://...`, quotaledger.lean.dispatch) prints
what the local command prints: the server calls the command's own output function
(its text, its exit code) on the typed request and answer, so there is one renderer,
and the client loads none of the types or renderers it needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from typing import Any

from quotaledger.render.output import Output, Shown

OUTPUTS: dict[str, tuple[str, str]] = {
    "configure": ("capacity", "configure_output"),
    "observe": ("per_event", "observe_output"),
    "admit": ("per_event", "admit_output"),
    "reject": ("per_event", "reject_output"),
    "release": ("per_event", "release_output"),
    "inspect": ("capacity", "inspect_output"),
    "host_phase": ("host", "phase_output"),
    "host_start": ("host", "start_output"),
    "host_exit": ("host", "exit_output"),
    "host_return": ("host", "return_output"),
    "host_continue": ("host", "continue_output"),
    "host_stop": ("host", "stop_output"),
    "host_replan": ("host", "replan_output"),
    "host_heartbeat": ("host", "heartbeat_output"),
    "host_status": ("host", "status_output"),
    "budget_configure": ("settlement", "budget_configure_output"),
    "turn_open": ("settlement", "open_output"),
    "turn_writeback": ("settlement", "writeback_output"),
    "turn_spend": ("settlement", "spend_output"),
    "turn_resume": ("settlement", "resume_output"),
    "turn_status": ("settlement", "status_output"),
    "goals": ("operator", "goals_output"),
    "audit": ("operator", "audit_output"),
    "whatif": ("operator", "whatif_output"),
    "metrics": ("operator", "metrics_output"),
    "digest": ("journal", "digest_output"),
}
"""Each served use case's output function, by module of `quotaledger.render` (imported
on first use: the server loads a command's module when a CLI client first calls it).
`log` is not here: its answer is a stream (`log_printed`)."""


def output_of(name: str, request: Any, answer: Any, shown: Shown) -> Output:
    """What the CLI command `name` prints (and exits with) for this answer."""
    module, function = OUTPUTS[name]
    found = getattr(importlib.import_module(f"quotaledger.render.{module}"), function)
    output: Output = found(request, answer, shown)
    return output


def log_printed(events: Iterable[Any], *, as_json: bool, follow: bool) -> Iterator[bytes]:
    """What `log` prints for these events, piece by piece as they come, as UTF-8 (its
    module imported on first use, as every output function's)."""
    journal = importlib.import_module("quotaledger.render.journal")
    for piece in journal.log_printed(events, as_json=as_json, follow=follow):
        yield piece.encode()
