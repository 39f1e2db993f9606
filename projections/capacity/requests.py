"""The index of request ids (SPEC §11 "Idempotent observations").

`observe` and `reject` may carry a `request_id` (the provider's response id): a repeat
on the same goal within 900 s of log time of the first is answered from the first
event, never counted twice. The fold keeps, per goal, each id seen in the last 900 s
of the goal's log time with what a repeat is compared against: a fingerprint of the
members the request determines (not those the journal's state or the event's time
determine). Entries leave in the order they came (per-goal times never go back), so
the index is an OrderedDict: a plain dict pays for every deleted slot it skips when
asked for its oldest entry.
"""

from collections import OrderedDict
from typing import Any, cast

import msgspec

from quotaledger.journal.clock import US_PER_S
from quotaledger.journal.sha256 import sha256_hex
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
FINGERPRINT_HEX_DIGITS = 32
"""128 bits of SHA-256: a fingerprint compares the payloads of one request id."""


class SeenRequest(StateStruct, gc=False, kw_only=False):
    """The event that recorded a request id (untracked by the cycle collector: it never
    holds a cycle, and a busy goal holds thousands)."""

    at_us: int
    seq: int
    hash: str
    kind: str
    fingerprint: str
    """`observed_fingerprint` or `rejected_fingerprint` of the event's payload."""
    rejected: CapacityRejected | None = None
    """A rejection's payload: a replay answers its cooldown, which the state decided."""


RequestIndex = dict[str, SeenRequest]
"""Request id -> the event that recorded it, oldest first (an OrderedDict at run time:
the checkpoint decodes a dict, which the goal's state converts)."""

_encode = msgspec.json.Encoder().encode


def _digest(kind: str, members: tuple[Any, ...]) -> str:
    # The journal's SHA-256, which hashes a few lines without loading OpenSSL.
    return sha256_hex(_encode((kind, members)))[:FINGERPRINT_HEX_DIGITS]


def observed_fingerprint(payload: CapacityObserved) -> str:
    """Every member of an observation but its request id (all of them are the request's;
    a provider report's resets are measured from the event's time, so a repeat is
    fingerprinted as if it had been made at the first one's time)."""
    members = msgspec.structs.astuple(payload)
    return _digest(OBSERVED, members[:-1])  # request_id is the last member


def rejected_fingerprint(
    run: str | None,
    retry_after_s: float | None,
    detail: str | None,
    provider: ProviderReport | None,
) -> str:
    """The members of a rejection the request determines (the cooldown, its clamp and
    streak are the state's). 30.0 and 30 are the same Retry-After."""
    if isinstance(retry_after_s, float) and retry_after_s.is_integer():
        retry_after_s = int(retry_after_s)
    return _digest(REJECTED, (run, retry_after_s, detail, provider))


def seen_rejection(payload: CapacityRejected, at_us: int, seq: int, hash_: str) -> SeenRequest:
    fingerprint = rejected_fingerprint(
        payload.run, payload.retry_after_s, payload.detail, payload.provider
    )
    return SeenRequest(at_us, seq, hash_, REJECTED, fingerprint, payload)


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
