"""The index of request ids (SPEC §11 "Idempotent observations").

`observe` and `reject` may carry a `request_id` (the provider's response id): a repeat
on the same goal within 900 s of log time of the first is answered from the first
event, never counted twice. The fold keeps, per goal, each id seen in the last 900 s
of the goal's log time with the payload that recorded it as its JSON bytes: a copy costs
the fold a small fraction of a hash of them, and a checkpoint of thousands decodes as
fast as a copy. A repeat (rare) decodes them to compare the members the request
determines (not those the journal's state or the event's time determine). Entries
leave in the order they came (per-goal times never go back), so the index is an
OrderedDict: a plain dict pays for every deleted slot it skips when asked for its
oldest entry.
"""

from collections import OrderedDict
from typing import cast

import msgspec

from quotaledger.journal.clock import US_PER_S
from quotaledger.projections.capacity.events import (
    OBSERVED,
    REJECTED,
    CapacityObserved,
    CapacityRejected,
    ProviderReport,
)
from quotaledger.projections.types import StateStruct

REQUEST_ID_WINDOW_US = 900 * US_PER_S
"""A repeat at most this long (log time) after the first event is a replay."""


class SeenRequest(StateStruct, gc=False, kw_only=False, array_like=True):
    """The event that recorded a request id. Untracked by the cycle collector (it never
    holds a cycle, and a busy goal holds thousands); an array in the checkpoint (no
    member names per entry)."""

    at_us: int
    seq: int
    hash: str
    kind: str
    data: bytes
    """The event's payload as recorded (JSON)."""


RequestIndex = dict[str, SeenRequest]
"""Request id -> the event that recorded it, oldest first (an OrderedDict at run time:
the checkpoint decodes a dict, which the goal's state converts)."""

_decode_observed = msgspec.json.Decoder(CapacityObserved).decode
_decode_rejected = msgspec.json.Decoder(CapacityRejected).decode


def first_observation(seen: SeenRequest) -> CapacityObserved | None:
    """The observation that recorded the id (None: a rejection did)."""
    return _decode_observed(seen.data) if seen.kind == OBSERVED else None


def first_rejection(seen: SeenRequest) -> CapacityRejected | None:
    """The rejection that recorded the id (None: an observation did)."""
    return _decode_rejected(seen.data) if seen.kind == REJECTED else None


def same_observation(seen: SeenRequest, payload: CapacityObserved) -> bool:
    """Whether `payload` (a repeat's, made as if at the first one's time: a provider
    report's resets are measured from the event's time) is the first one's."""
    return first_observation(seen) == payload


def same_rejection(
    seen: SeenRequest,
    run: str | None,
    retry_after_s: float | None,
    detail: str | None,
    provider: ProviderReport | None,
) -> bool:
    """Whether a repeated rejection asks what the first one did: the members the request
    determines (the cooldown, its clamp and streak are the state's). 30.0 and 30 are
    the same Retry-After."""
    first = first_rejection(seen)
    return (
        first is not None
        and (first.run, first.detail, first.provider) == (run, detail, provider)
        and first.retry_after_s == retry_after_s
    )


def note_request(index: RequestIndex, request_id: str, seen: SeenRequest) -> None:
    """Index `seen` as the latest event of `request_id` (a journal may hold an id twice,
    more than 900 s apart: the later one is the one a repeat compares against)."""
    index.pop(request_id, None)
    index[request_id] = seen


def forget_requests(index: RequestIndex, last_us: int) -> None:
    """Drop the entries more than 900 s older than the goal's latest event."""
    ordered = cast("OrderedDict[str, SeenRequest]", index)
    cutoff_us = last_us - REQUEST_ID_WINDOW_US
    while ordered and next(iter(ordered.values())).at_us < cutoff_us:
        ordered.popitem(last=False)


def seen_request(index: RequestIndex, request_id: str, at_us: int) -> SeenRequest | None:
    """The event a request with `request_id` made at `at_us` repeats, if any."""
    seen = index.get(request_id)
    if seen is None or at_us - seen.at_us > REQUEST_ID_WINDOW_US:
        return None
    return seen
