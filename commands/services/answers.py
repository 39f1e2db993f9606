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

from typing import Any, NotRequired, TypedDict

Number = int | float


class EventJson(TypedDict):
    """The event a writer appended."""

    seq: int
    hash: str
    kind: str
    at: str


# -- capacity (SPEC §3.5) -------------------------------------------------------------


class AdmitOutcome(TypedDict, total=False):
    """What an admission adds (`receipt`), or a refusal (the other three)."""

    receipt: dict[str, Any]
    reasons: list[str]
    figures: dict[str, Any]
    binding_dimension: str | None


class AdmitAnswer(TypedDict):
    ok: bool
    goal: str
    at: str
    admitted: bool
    idempotent: bool
    appended: bool
    dry_run: bool
    receipt: NotRequired[dict[str, Any]]
    reasons: NotRequired[list[str]]
    figures: NotRequired[dict[str, Any]]
    binding_dimension: NotRequired[str | None]
    event: EventJson | None


class ObserveAnswer(TypedDict):
    ok: bool
    goal: str
    run: str | None
    appended: bool
    usage_tpm: Number
    usage: dict[str, Any]
    coverage: str
    provider: dict[str, Any] | None
    lease_until: str | None
    event: EventJson


class ReleaseAnswer(TypedDict):
    ok: bool
    goal: str
    run: str
    released: bool
    appended: bool
    reasons: list[str]
    event: NotRequired[EventJson]


# -- host continuation (SPEC §4) ------------------------------------------------------


class PhaseJson(TypedDict):
    phase: int
    lane: str
    deadline: str
    session: str | None
    profile: str | None
    basis: str
    bound: str | None
    handoff_sha256: str | None
    handoff_bytes: int | None
    handoff_confirmed: bool | None
    attempts: list[str]
    at: str
    seq: int
    hash: str


class FailureDetailJson(TypedDict):
    code: str
    detail: str | None


class AttemptJson(TypedDict):
    attempt: str
    lane: str
    number: int
    phase: int
    session: str
    profile: str
    pid: int | None
    started_at: str
    exited: bool
    exit_code: int | None
    signal: int | None
    returned: bool
    outcome: str | None
    failure: FailureDetailJson | None
    cursor: str | None
    returned_at: str | None
    returned_hash: str | None


class FailureJson(TypedDict):
    """A lane's failure: the return `host continue --bind` names."""

    hash: str | None
    code: str | None
    attempt: str
    number: int
    continued_by_phase: int | None


class Difference(TypedDict):
    existing: Any
    requested: Any


class PhaseAnswer(TypedDict):
    """`host phase` / `host continue` that went ahead (appended, or a replay)."""

    ok: bool
    appended: bool
    idempotent: bool
    phase: PhaseJson
    last_failure: NotRequired[FailureJson | None]
    """`host continue` replayed: a later failure of the continued phase is kept."""
    event: NotRequired[EventJson]


class PhaseRefusal(TypedDict):
    """`host phase` / `host continue` refused (nothing appended)."""

    ok: bool
    appended: bool
    reasons: list[str]
    lane: str
    bind: NotRequired[str]
    deadline: str
    at: str
    existing_phase: NotRequired[PhaseJson]
    differences: NotRequired[dict[str, Difference]]


class AttemptAnswer(TypedDict):
    """`host start` / `host exit` that went ahead."""

    ok: bool
    appended: bool
    idempotent: bool
    attempt: AttemptJson
    event: NotRequired[EventJson]


class StartRefusal(TypedDict):
    ok: bool
    appended: bool
    reasons: list[str]
    lane: str
    attempt: str
    at: str
