"""Capacity use cases (SPEC §3.5): configure, observe, admit, reject, release, inspect."""

from msgspec import UNSET, UnsetType

from quotaledger.usecases.decode import Answer, Event, Request
from quotaledger.usecases.fields import Identifier, Time


class ReleaseRequest(Request):
    """Release a run's case slot and token reservation."""

    goal: Identifier
    run: Identifier
    at: Time | None = None


class ReleaseAnswer(Answer):
    ok: bool
    goal: str
    run: str
    released: bool
    appended: bool
    reasons: list[str]
    event: Event | UnsetType = UNSET
