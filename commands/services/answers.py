"""The public answer shapes (SPEC §8), typed so mypy catches a renamed public key.

An answer is the JSON object a writer returns and `--json` prints. Each TypedDict
lists its keys in the order the answer is built, which is the order they are printed
(that order is public too). A key every answer has but that is set after keys some
answers lack is `NotRequired` only where the build order demands it; mypy still
checks its name everywhere it is written.

Nested objects that stay `dict[str, Any]` (figures, receipts, usage) are msgspec
Structs turned into builtins: their keys are the Structs' fields, checked there.
"""

from __future__ import annotations

from typing import TypedDict

Number = int | float


class EventJson(TypedDict):
    """The event a writer appended."""

    seq: int
    hash: str
    kind: str
    at: str
