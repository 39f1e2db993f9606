"""Constrained value types shared by every domain's event payloads (SPEC §8).

They are checked when a payload is decoded, which happens right before an event is
written and whenever it is read back, so the API and the CLI cannot write a value
the spec forbids.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

IDENTIFIER_PATTERN = r"^[A-Za-z0-9._:@/-]{1,128}\Z"  # \Z: "$" would accept a trailing newline

Identifier = Annotated[str, msgspec.Meta(pattern=IDENTIFIER_PATTERN)]
TokenCount = Annotated[int, msgspec.Meta(ge=0, le=10**12)]
FreeText = Annotated[str, msgspec.Meta(max_length=4096)]
Sha256Hex = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}\Z")]
CANONICAL_AT_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z\Z"
CanonicalAt = Annotated[str, msgspec.Meta(pattern=CANONICAL_AT_PATTERN)]
"""A canonical `at` string inside a payload (RFC 3339 UTC, microseconds, Z)."""


class Payload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Base of every event payload: immutable, strict, tag named by the registry.

    Untracked by the cycle collector: a payload is a tree decoded from JSON (or built
    from values to be encoded as one), never part of a cycle, and a batch allocates a
    thousand of them per transaction; tracking them made batched appends 20% slower.
    """


class StateStruct(msgspec.Struct, kw_only=True):
    """Base of mutable projection state (checkpointed with MessagePack)."""


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)
