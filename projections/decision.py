"""The one shape every domain's pure decision returns (capacity, hosts, settlement).

A decision says three things, the same way in every domain:

- `reasons`: why it refuses, as the domain's reason codes (`projections.reasons`), in
  the order the domain reports them; empty when it may go ahead;
- `kind` and `payload`: the one event to append, or None for nothing. A refusal
  appends nothing, except an admission refusal, which is journaled
  (`capacity.refused`: SPEC §3.3);
- `idempotent`: the request repeats what the journal already holds (ok, nothing
  appended).

`detail` carries what the domain's answer needs beyond that (the figures an
admission used, the phase or attempt a host decision found, the turn a settlement
decision is about), typed per domain. The application appends the event and turns
the decision into its JSON answer (`services.base.conclude`); nothing here is JSON.
"""

from typing import Generic, TypeVar

import msgspec

from quotaledger.projections.types import Payload

DetailT = TypeVar("DetailT")


class Decision(msgspec.Struct, Generic[DetailT], frozen=True, kw_only=True):
    """What a pure decision concluded: refuse, append one event, or replay."""

    reasons: tuple[str, ...] = ()
    kind: str | None = None
    """The kind of the event to append (None: append nothing)."""
    payload: Payload | None = None
    idempotent: bool = False
    detail: DetailT

    @property
    def ok(self) -> bool:
        return not self.reasons
