"""Placeholder: the capacity domain is being built (its issue owns this module)."""

from __future__ import annotations

from typing import Any

from journal import Record
from projections.types import Payload, StateStruct

VERSION = "0"

EVENTS: dict[str, type[Payload]] = {}
"""Event kind -> payload Struct."""


class CapacityState(StateStruct):
    pass


def apply(state: CapacityState, record: Record, payload: Any) -> None:
    """Fold one event of this domain into the state."""
