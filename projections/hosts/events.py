"""The host events (SPEC §4): their vocabulary, payloads and kinds."""

from typing import Annotated, Literal, get_args

import msgspec

from quotaledger.journal.sha256 import sha256_hex
from quotaledger.projections.limits import EXIT_CODE_MAX, HANDOFF_BYTES_MAX, PID_MAX, SIGNAL_MAX
from quotaledger.projections.types import (
    CanonicalAt,
    FreeText,
    Identifier,
    Payload,
    Sha256Hex,
)

PhaseNumber = Annotated[int, msgspec.Meta(ge=1)]
AttemptNumber = Annotated[int, msgspec.Meta(ge=1)]
Pid = Annotated[int, msgspec.Meta(ge=1, le=PID_MAX)]
ExitCode = Annotated[int, msgspec.Meta(ge=0, le=EXIT_CODE_MAX)]
SignalNumber = Annotated[int, msgspec.Meta(ge=1, le=SIGNAL_MAX)]
HandoffBytes = Annotated[int, msgspec.Meta(ge=0, le=HANDOFF_BYTES_MAX)]

Basis = Literal["initial", "failed_attempt", "interrupted_attempt"]
Outcome = Literal["completed", "failed", "interrupted"]
FailureCode = Literal["quota_exhausted", "output_budget_exhausted", "retryable", "fatal"]

OUTCOMES: tuple[str, ...] = get_args(Outcome)
FAILURE_CODES: tuple[str, ...] = (
    "quota_exhausted",
    "output_budget_exhausted",
    "retryable",
    "fatal",
)
NEVER_CONTINUED = frozenset({"output_budget_exhausted", "fatal"})
"""No blind replay of an exhausted output budget, nor of a fatal error (seed 001)."""
LANE_STOPPING = frozenset({"quota_exhausted", "output_budget_exhausted", "fatal"})
"""Failure codes that stop a lane until a phase is appended for them."""

MAX_ATTEMPTS_DEFAULT = 3
MAX_PHASE_US_DEFAULT = 7 * 86400 * 1_000_000


# -- events ---------------------------------------------------------------------------


class Handoff(Payload, frozen=True):
    """Recovery material bound immutably to one phase (UTF-8 text)."""

    sha256: Sha256Hex
    bytes: HandoffBytes
    content: str

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared value rules (identifiers, times, texts)
        # The digest is re-proved whenever the record is read back: a handoff whose
        # content does not hash to its recorded digest is a corrupt payload.
        data = self.content.encode("utf-8")
        if len(data) != self.bytes or sha256_hex(data) != self.sha256:
            raise ValueError("handoff content does not match its sha256 and bytes")


class PhaseAppended(Payload, frozen=True):
    lane: Identifier
    phase: PhaseNumber
    deadline: CanonicalAt
    session: Identifier | None
    profile: Identifier | None
    basis: Basis
    bound: Sha256Hex | None
    handoff: Handoff | None

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared value rules (identifiers, times, texts)
        if (self.basis == "initial") != (self.bound is None):
            raise ValueError("an initial phase binds nothing; a continuation binds a failure")


class AttemptStarted(Payload, frozen=True):
    lane: Identifier
    phase: PhaseNumber
    attempt: Identifier
    number: AttemptNumber
    session: Identifier
    profile: Identifier
    pid: Pid | None


class ProcessExited(Payload, frozen=True):
    attempt: Identifier
    exit_code: ExitCode | None
    signal: SignalNumber | None

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared value rules (identifiers, times, texts)
        if self.exit_code is not None and self.signal is not None:
            raise ValueError("a process exits with a code or by a signal, not both")


class Failure(Payload, frozen=True):
    code: FailureCode
    detail: FreeText | None


class AttemptReturned(Payload, frozen=True):
    attempt: Identifier
    outcome: Outcome
    failure: Failure | None
    cursor: FreeText | None

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared value rules (identifiers, times, texts)
        if (self.outcome == "failed") != (self.failure is not None):
            raise ValueError("a failure code is given exactly when the outcome is failed")


class StopRequested(Payload, frozen=True):
    pass


class StopCleared(Payload, frozen=True):
    pass


class ReplanOpened(Payload, frozen=True):
    lane: Identifier
    replan: Identifier


class ReplanSettled(Payload, frozen=True):
    lane: Identifier
    replan: Identifier


PHASE_APPENDED = "host.phase_appended"
ATTEMPT_STARTED = "host.attempt_started"
PROCESS_EXITED = "host.process_exited"
ATTEMPT_RETURNED = "host.attempt_returned"
STOP_REQUESTED = "host.stop_requested"
STOP_CLEARED = "host.stop_cleared"
REPLAN_OPENED = "host.replan_opened"
REPLAN_SETTLED = "host.replan_settled"

EVENTS: dict[str, type[Payload]] = {
    PHASE_APPENDED: PhaseAppended,
    ATTEMPT_STARTED: AttemptStarted,
    PROCESS_EXITED: ProcessExited,
    ATTEMPT_RETURNED: AttemptReturned,
    STOP_REQUESTED: StopRequested,
    STOP_CLEARED: StopCleared,
    REPLAN_OPENED: ReplanOpened,
    REPLAN_SETTLED: ReplanSettled,
}
"""Event kind -> payload Struct."""
