"""The whole ledger's state and the projector the journal folds with.

Each domain module (capacity, hosts, settlement, probes) exports `EVENTS` (kind ->
payload Struct), a state Struct and `apply(state, record, payload)`. This module
composes them; it is the only place that knows the list of domains.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.chain import PayloadDecoder
from quotaledger.journal.record import GENESIS_KIND, REPAIRED_KIND
from quotaledger.projections import capacity, hosts, probes, settlement
from quotaledger.projections.types import StateStruct


class Ledger(StateStruct):
    capacity: capacity.CapacityState = msgspec.field(default_factory=capacity.CapacityState)
    hosts: hosts.HostsState = msgspec.field(default_factory=hosts.HostsState)
    settlement: settlement.SettlementState = msgspec.field(
        default_factory=settlement.SettlementState
    )
    probes: probes.ProbesState = msgspec.field(default_factory=probes.ProbesState)


DomainApply = Callable[[Any, Record, Any], None]
"""A domain's fold step: (its part of the Ledger, record, decoded payload)."""


def _domain_table() -> dict[str, tuple[PayloadDecoder, Callable[[Ledger], Any], DomainApply]]:
    table: dict[str, tuple[PayloadDecoder, Callable[[Ledger], Any], DomainApply]] = {}

    def add(events: dict[str, type[Any]], part: str, apply: DomainApply) -> None:
        for kind, payload_type in events.items():
            if kind in table:
                raise RuntimeError(f"event kind {kind} registered twice")
            table[kind] = (msgspec.json.Decoder(payload_type).decode, attrgetter(part), apply)

    add(capacity.EVENTS, "capacity", capacity.apply)
    add(hosts.EVENTS, "hosts", hosts.apply)
    add(settlement.EVENTS, "settlement", settlement.apply)
    add(probes.EVENTS, "probes", probes.apply)
    return table


EVENT_KINDS: tuple[str, ...] = (
    GENESIS_KIND,
    REPAIRED_KIND,
    *capacity.EVENTS,
    *hosts.EVENTS,
    *settlement.EVENTS,
    *probes.EVENTS,
)
"""Every kind a journal can hold: the journal's own two, then each domain's."""


class LedgerProjector:
    """The `journal.Projector` for quotaledger's domain."""

    version = "ledger/1:" + ".".join(
        (capacity.VERSION, hosts.VERSION, settlement.VERSION, probes.VERSION)
    )

    def __init__(self) -> None:
        self._table = _domain_table()
        self._decoders = {kind: entry[0] for kind, entry in self._table.items()}
        self._appliers = {kind: entry[1:] for kind, entry in self._table.items()}
        self._encode = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder(Ledger).decode

    def decoder(self, kind: str) -> PayloadDecoder | None:
        return self._decoders.get(kind)

    def initial(self) -> Ledger:
        return Ledger()

    def apply(self, state: Ledger, record: Record, payload: Any) -> None:
        found = self._appliers.get(record.kind)
        if found is not None:  # journal.* records carry no domain state
            part, apply = found
            apply(part(state), record, payload)

    def dump(self, state: Ledger) -> bytes:
        return self._encode(state)

    def load(self, blob: bytes) -> Ledger:
        return self._decode(blob)


PROJECTOR = LedgerProjector()
