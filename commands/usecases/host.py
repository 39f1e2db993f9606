"""Host continuation use cases (SPEC §4): phase, start, exit, return, continue, stop,
replan, heartbeat, status.

A request's fields carry every rule a value obeys alone (identifiers, the outcome
and failure choices, free text, digests, the pid, exit code and signal ranges);
`check` holds the rules between fields. Deadlines (`+2h` or RFC 3339) and
`max_phase` are resolved against the event's time by the service. `handoff` names the
handoff file, which the service reads first (it never blocks: SPEC §4.2).
"""

from typing import Annotated, get_args

import msgspec
from msgspec import UNSET, UnsetType

from quotaledger.journal import codes
from quotaledger.journal.clock import parse_duration_us
from quotaledger.journal.errors import InvalidInput
from quotaledger.projections import hosts
from quotaledger.projections.limits import ATTEMPTS_MAX
from quotaledger.usecases.decode import Answer, Event, Names, Request
from quotaledger.usecases.fields import (
    Deadline,
    EventHash,
    FreeText,
    Identifier,
    Rule,
    Sha256,
    Time,
    check_member,
    range_rule,
)

Outcome = Annotated[
    hosts.Outcome,
    check_member(hosts.OUTCOMES, codes.INVALID_OUTCOME),
]
FailureCode = Annotated[
    hosts.FailureCode,
    check_member(hosts.FAILURE_CODES, codes.INVALID_FAILURE),
]
ReplanAction = Annotated[
    hosts.ReplanAction,
    check_member(get_args(hosts.ReplanAction), codes.INVALID_OPTION),
]
Pid = Annotated[
    hosts.Pid, range_rule(hosts.Pid, "{name} {value} is not a process id", codes.INVALID_PID)
]
ExitCode = Annotated[
    hosts.ExitCode,
    range_rule(hosts.ExitCode, "{name} must be {low}..{high}", codes.INVALID_OPTION),
]
Signal = Annotated[
    hosts.SignalNumber,
    range_rule(hosts.SignalNumber, "{name} must be {low}..{high}", codes.INVALID_OPTION),
]
_AttemptsAllowed = Annotated[
    int, msgspec.Meta(ge=1, le=ATTEMPTS_MAX, description="Attempts a phase may hold")
]
MaxAttempts = Annotated[
    _AttemptsAllowed,
    range_rule(_AttemptsAllowed, "{name} must be {low}..{high}", codes.INVALID_OPTION),
]


def parse_max_phase_us(text: str, name: str = "max_phase") -> int:
    """A lane's longest phase: a positive duration, in microseconds."""
    value = parse_duration_us(text, name)
    if value <= 0:
        raise InvalidInput(
            lambda named: f"{named} must be positive", code=codes.INVALID_DURATION, about=name
        )
    return value


def check_max_phase(name: str, value: str) -> str:
    """`max_phase` checked where the request is decoded (a client of a server refuses
    a bad one before sending), its error naming `name`."""
    try:
        parse_max_phase_us(value)
    except InvalidInput as error:
        raise InvalidInput(error.worded(lambda field: name), code=error.code) from None
    return value


MaxPhase = Annotated[
    str,
    msgspec.Meta(description="Longest phase allowed: a duration (7d)"),
    Rule(check_max_phase, always=True, code=codes.INVALID_DURATION, known={"7d"}),
]
HandoffPath = Annotated[str, msgspec.Meta(description="Handoff file: regular, UTF-8, <= 256 KiB")]

MAX_PHASE_DEFAULT = "7d"


def check_handoff_pair(names: Names, handoff: str | None, handoff_sha256: str | None) -> None:
    if (handoff is None) != (handoff_sha256 is None):
        raise InvalidInput(
            f"{names('handoff')} and {names('handoff_sha256')} go together",
            code=codes.HANDOFF_DIGEST_REQUIRED,
        )


# -- requests -------------------------------------------------------------------------


class HostPhaseRequest(Request):
    """Open a lane's first phase, or a further one after a completed attempt."""

    goal: Identifier
    lane: Identifier
    deadline: Deadline
    session: Identifier | None = None
    profile: Identifier | None = None
    handoff: HandoffPath | None = None
    handoff_sha256: Sha256 | None = None
    max_phase: MaxPhase = MAX_PHASE_DEFAULT
    at: Time | None = None

    def check(self, names: Names) -> None:
        check_handoff_pair(names, self.handoff, self.handoff_sha256)


class HostStartRequest(Request):
    """The dispatch gate: start an attempt in the lane's current phase, or refuse."""

    goal: Identifier
    lane: Identifier
    attempt: Identifier
    session: Identifier
    profile: Identifier
    pid: Pid | None = None
    max_attempts: MaxAttempts = hosts.MAX_ATTEMPTS_DEFAULT
    at: Time | None = None


class HostExitRequest(Request):
    """Record that the attempt's process was observed exited."""

    goal: Identifier
    attempt: Identifier
    exit_code: ExitCode | None = None
    signal: Signal | None = None
    at: Time | None = None

    def check(self, names: Names) -> None:
        if (self.exit_code is None) == (self.signal is None):
            # Exactly one (SPEC §4.2): an exit recorded with neither could never be
            # corrected, since the attempt's exit is recorded once.
            raise InvalidInput(
                f"give {names('exit_code')} or {names('signal')}"
                + (", not both" if self.exit_code is not None else ""),
                code=codes.INVALID_OPTION,
            )


class HostReturnRequest(Request):
    """Record the attempt's outcome; its event hash is what `host continue` binds."""

    goal: Identifier
    attempt: Identifier
    outcome: Outcome
    failure: FailureCode | None = None
    cursor: FreeText | None = None
    detail: FreeText | None = None
    at: Time | None = None

    def check(self, names: Names) -> None:
        failed = self.outcome == "failed"
        if failed and self.failure is None:
            raise InvalidInput(
                f"{names('outcome')} failed needs {names('failure')} CODE",
                code=codes.FAILURE_REQUIRED,
            )
        if not failed and self.failure is not None:
            raise InvalidInput(
                f"{names('failure')} is given only with {names('outcome')} failed "
                f"(not {self.outcome})",
                code=codes.INVALID_OPTION,
            )
        if not failed and self.detail is not None:
            raise InvalidInput(f"{names('detail')} describes a failure", code=codes.INVALID_OPTION)


class HostContinueRequest(Request):
    """Bind exactly one failure to a new finite phase on the original session."""

    goal: Identifier
    lane: Identifier
    bind: EventHash
    deadline: Deadline
    session: Identifier
    profile: Identifier
    cursor: FreeText
    handoff: HandoffPath | None = None
    handoff_sha256: Sha256 | None = None
    max_phase: MaxPhase = MAX_PHASE_DEFAULT
    at: Time | None = None

    def check(self, names: Names) -> None:
        check_handoff_pair(names, self.handoff, self.handoff_sha256)


class HostStopRequest(Request):
    """Request (or clear) a stop: no lane of the goal starts or continues meanwhile."""

    goal: Identifier
    clear: bool = False
    at: Time | None = None


class HostReplanRequest(Request):
    """Open or settle a replan; an open replan holds its lane (start and continue)."""

    goal: Identifier
    lane: Identifier
    replan: Identifier
    action: ReplanAction
    at: Time | None = None


class HostHeartbeatRequest(Request):
    """The lane's current phase and, until a completed return confirms it, the handoff."""

    goal: Identifier
    lane: Identifier
    session: Identifier
    at: Time | None = None


class HostStatusRequest(Request):
    """Per lane: phases, attempts, holds, the last failure, and whether it may dispatch."""

    goal: Identifier
    lane: Identifier | None = None
    at: Time | None = None
    max_attempts: MaxAttempts = hosts.MAX_ATTEMPTS_DEFAULT


# -- what answers hold ----------------------------------------------------------------


class Phase(msgspec.Struct, kw_only=True):
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


class FailureDetail(msgspec.Struct):
    code: str
    detail: str | None


class Attempt(msgspec.Struct, kw_only=True):
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
    failure: FailureDetail | None
    cursor: str | None
    returned_at: str | None
    returned_hash: str | None


class LaneFailure(msgspec.Struct, kw_only=True):
    """A lane's failure: the return `host continue --bind` names."""

    hash: str | None
    code: str | None
    attempt: str
    number: int
    continued_by_phase: int | None


class Difference(msgspec.Struct):
    """What a refused replay changed: the existing phase's value and the request's."""

    existing: str | None
    requested: str | None


class Replan(msgspec.Struct, kw_only=True):
    replan: str
    open: bool
    opened_at: str
    settled_at: str | None


class Handoff(msgspec.Struct):
    sha256: str | None
    content: str | None


class Lane(msgspec.Struct, kw_only=True):
    phases: list[Phase]
    attempts: list[Attempt]
    stop: bool
    stop_at: str | None
    replans: list[Replan]
    last_failure: LaneFailure | None
    dispatchable: bool
    reasons: list[str]


# -- answers --------------------------------------------------------------------------


class HostPhaseAnswer(Answer, kw_only=True):
    """`host phase` / `host continue`: went ahead (appended, or a replay: `phase`,
    and for a replayed continue `last_failure`), or refused (`reasons` and the
    request's context, the phase it would replay and what differs)."""

    ok: bool
    appended: bool
    idempotent: bool | UnsetType = UNSET
    reasons: list[str] | UnsetType = UNSET
    lane: str | UnsetType = UNSET
    bind: str | UnsetType = UNSET
    deadline: str | UnsetType = UNSET
    at: str | UnsetType = UNSET
    phase: Phase | UnsetType = UNSET
    last_failure: LaneFailure | UnsetType | None = UNSET
    """`host continue` replayed: a later failure of the continued phase is kept."""
    existing_phase: Phase | UnsetType = UNSET
    differences: dict[str, Difference] | UnsetType = UNSET
    event: Event | UnsetType = UNSET


HostContinueAnswer = HostPhaseAnswer


class AttemptAnswer(Answer, kw_only=True):
    """`host start` / `host exit` / `host return`: went ahead (the attempt as it now
    stands; a return's `hash` is what `host continue --bind` names), or refused
    (`reasons`, start's `lane`, the attempt's name, the event time)."""

    ok: bool
    appended: bool
    idempotent: bool | UnsetType = UNSET
    reasons: list[str] | UnsetType = UNSET
    lane: str | UnsetType = UNSET
    hash: str | UnsetType | None = UNSET
    attempt: Attempt | str
    at: str | UnsetType = UNSET
    event: Event | UnsetType = UNSET


HostStartAnswer = AttemptAnswer
HostExitAnswer = AttemptAnswer
HostReturnAnswer = AttemptAnswer


class HostStopAnswer(Answer, kw_only=True):
    ok: bool
    appended: bool
    idempotent: bool
    stop: bool
    event: Event | UnsetType = UNSET


class HostReplanAnswer(Answer, kw_only=True):
    """Went ahead (the replan as it now stands) or refused (`reasons`, its name)."""

    ok: bool
    appended: bool
    idempotent: bool | UnsetType = UNSET
    reasons: list[str] | UnsetType = UNSET
    lane: str
    replan: Replan | str
    event: Event | UnsetType = UNSET


class HostHeartbeatAnswer(Answer, kw_only=True):
    ok: bool
    reasons: list[str] | UnsetType = UNSET
    phase: Phase | None
    handoff: Handoff | None


class HostStatusAnswer(Answer, kw_only=True):
    ok: bool
    goal: str
    at: str
    stop: bool
    capacity_ready: bool
    lanes: dict[str, Lane]
