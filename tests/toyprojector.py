"""A minimal domain for journal-engine tests: the journal knows nothing of quotaledger's."""

from __future__ import annotations

from typing import Any

import msgspec

from quotaledger.journal import Record


class Note(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    n: int
    text: str = ""


class ToyState(msgspec.Struct):
    count: int = 0
    total: int = 0
    last_seq: int = -1


class ToyProjector:
    version = "toy/1"
    _decode = msgspec.json.Decoder(Note).decode

    def decoder(self, kind: str) -> Any:
        return self._decode if kind == "toy.note" else None

    def initial(self) -> ToyState:
        return ToyState()

    def apply(self, state: ToyState, record: Record, payload: Any) -> None:
        if record.kind == "toy.note":
            state.count += 1
            state.total += payload.n
            state.last_seq = record.seq

    def dump(self, state: ToyState) -> bytes:
        return msgspec.msgpack.encode(state)

    def load(self, blob: bytes) -> ToyState:
        return msgspec.msgpack.decode(blob, type=ToyState)


TOY = ToyProjector()
