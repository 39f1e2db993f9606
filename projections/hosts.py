"""Host continuation (SPEC §4, seeds 001 and 002): lanes, phases, attempts, holds.

A goal's work runs in lanes. A lane runs attempts inside phases; every phase has a
finite deadline. A failed or interrupted attempt stops its lane until an operator
continues it with `host continue`, which binds exactly that failure (by the hash of
its `host.attempt_returned` event) to one new phase. Nothing is ever erased: a
continuation appends, failures stay in the history, attempt numbers never reset.

This module holds the events, the fold and the pure decisions (`decide_phase`,
`decide_start`, `decide_continue`, `decide_exit`, `decide_return`, `decide_stop`,
`decide_replan`: each a `projections.decision.Decision` naming the event to append).
It does no I/O: the handoff file is read by the
command layer, which passes in the digest it verified (or the reasons it failed),
and the goal's capacity readiness comes in as two booleans.
"""

from typing import Annotated, Any, Literal, get_args

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.clock import format_us, parse_at
from quotaledger.journal.limits import HANDOFF_BYTES_MAX
from quotaledger.journal.sha256 import sha256_hex
from quotaledger.projections import reasons as R
from quotaledger.projections.decision import Decision
from quotaledger.projections.types import (
    CanonicalAt,
    FreeText,
    Identifier,
    Payload,
    Sha256Hex,
    StateStruct,
)

VERSION = "1"

PhaseNumber = Annotated[int, msgspec.Meta(ge=1)]
AttemptNumber = Annotated[int, msgspec.Meta(ge=1)]
Pid = Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]
ExitCode = Annotated[int, msgspec.Meta(ge=0, le=255)]
SignalNumber = Annotated[int, msgspec.Meta(ge=1, le=128)]
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


# -- state ----------------------------------------------------------------------------


class PhaseState(StateStruct):
    phase: int = 0
    lane: str = ""
    deadline: str = ""
    deadline_us: int = 0
    session: str | None = None
    profile: str | None = None
    basis: str = "initial"
    bound: str | None = None
    handoff_sha256: str | None = None
    handoff_bytes: int | None = None
    handoff_content: str | None = None
    handoff_confirmed_by: str | None = None
    """Hash of the completed same-session return that confirmed the handoff."""
    attempts: list[str] = msgspec.field(default_factory=list)
    at: str = ""
    seq: int = 0
    hash: str = ""


class AttemptState(StateStruct):
    attempt: str = ""
    lane: str = ""
    phase: int = 0
    number: int = 0
    session: str = ""
    profile: str = ""
    pid: int | None = None
    started_at: str = ""
    started_hash: str = ""
    exited: bool = False
    exit_code: int | None = None
    signal: int | None = None
    exited_at: str | None = None
    returned: bool = False
    outcome: str | None = None
    failure_code: str | None = None
    failure_detail: str | None = None
    cursor: str | None = None
    returned_at: str | None = None
    returned_seq: int | None = None
    returned_hash: str | None = None

    @property
    def failure_kind(self) -> str | None:
        """The lane-level failure this return reports: a failure code or `interrupted`."""
        if self.outcome == "failed":
            return self.failure_code
        if self.outcome == "interrupted":
            return "interrupted"
        return None


class ReplanState(StateStruct):
    replan: str = ""
    open: bool = True
    opened_at: str = ""
    settled_at: str | None = None


class LaneState(StateStruct):
    lane: str = ""
    phases: list[PhaseState] = msgspec.field(default_factory=list)
    attempts: list[str] = msgspec.field(default_factory=list)
    replans: dict[str, ReplanState] = msgspec.field(default_factory=dict)


class GoalHosts(StateStruct):
    lanes: dict[str, LaneState] = msgspec.field(default_factory=dict)
    attempts: dict[str, AttemptState] = msgspec.field(default_factory=dict)
    """Attempt id -> attempt: `host exit` and `host return` name only the attempt."""
    returns: dict[str, str] = msgspec.field(default_factory=dict)
    """Hash of a `host.attempt_returned` event -> attempt id (what `--bind` names)."""
    other_events: dict[str, str] = msgspec.field(default_factory=dict)
    """Hash -> kind of this goal's other phase/attempt events (so a bind can say
    `bound_event_not_a_failure` rather than `not_found`)."""
    bound: dict[str, list[Any]] = msgspec.field(default_factory=dict)
    """Bound failure hash -> [lane, phase number] of the phase appended for it."""
    stop: bool = False
    stop_at: str | None = None


class HostsState(StateStruct):
    goals: dict[str, GoalHosts] = msgspec.field(default_factory=dict)


# -- the fold -------------------------------------------------------------------------


def parse_canonical_us(at: str) -> int:
    """Microseconds for a canonical `at` string (validated by the payload schema)."""
    return parse_at(at)


def _lane(goal: GoalHosts, lane: str) -> LaneState:
    state = goal.lanes.get(lane)
    if state is None:
        state = goal.lanes[lane] = LaneState(lane=lane)
    return state


def apply(state: HostsState, record: Record, payload: Any) -> None:
    """Fold one event of this domain into the state."""
    goal_id = record.goal or ""
    goal = state.goals.get(goal_id)
    if goal is None:
        goal = state.goals[goal_id] = GoalHosts()
    if isinstance(payload, PhaseAppended):
        _apply_phase(goal, record, payload)
    elif isinstance(payload, AttemptStarted):
        _apply_started(goal, record, payload)
    elif isinstance(payload, ProcessExited):
        _apply_exited(goal, record, payload)
    elif isinstance(payload, AttemptReturned):
        _apply_returned(goal, record, payload)
    elif isinstance(payload, StopRequested):
        goal.stop, goal.stop_at = True, record.at
    elif isinstance(payload, StopCleared):
        goal.stop, goal.stop_at = False, None
    elif isinstance(payload, ReplanOpened | ReplanSettled):
        _apply_replan(goal, record, payload)


def _apply_exited(goal: GoalHosts, record: Record, payload: ProcessExited) -> None:
    attempt = goal.attempts.get(payload.attempt)
    if attempt is not None:
        attempt.exited = True
        attempt.exit_code = payload.exit_code
        attempt.signal = payload.signal
        attempt.exited_at = record.at
    goal.other_events[record.hash] = record.kind


def _apply_replan(goal: GoalHosts, record: Record, payload: ReplanOpened | ReplanSettled) -> None:
    lane = _lane(goal, payload.lane)
    if isinstance(payload, ReplanOpened):
        lane.replans[payload.replan] = ReplanState(replan=payload.replan, opened_at=record.at)
        return
    replan = lane.replans.get(payload.replan)
    if replan is not None:
        replan.open = False
        replan.settled_at = record.at


def _apply_phase(goal: GoalHosts, record: Record, payload: PhaseAppended) -> None:
    lane = _lane(goal, payload.lane)
    handoff = payload.handoff
    lane.phases.append(
        PhaseState(
            phase=payload.phase,
            lane=payload.lane,
            deadline=payload.deadline,
            deadline_us=parse_canonical_us(payload.deadline),
            session=payload.session,
            profile=payload.profile,
            basis=payload.basis,
            bound=payload.bound,
            handoff_sha256=handoff.sha256 if handoff else None,
            handoff_bytes=handoff.bytes if handoff else None,
            handoff_content=handoff.content if handoff else None,
            at=record.at,
            seq=record.seq,
            hash=record.hash,
        )
    )
    if payload.bound is not None:
        goal.bound[payload.bound] = [payload.lane, payload.phase]
    goal.other_events[record.hash] = record.kind


def _apply_started(goal: GoalHosts, record: Record, payload: AttemptStarted) -> None:
    lane = _lane(goal, payload.lane)
    goal.attempts[payload.attempt] = AttemptState(
        attempt=payload.attempt,
        lane=payload.lane,
        phase=payload.phase,
        number=payload.number,
        session=payload.session,
        profile=payload.profile,
        pid=payload.pid,
        started_at=record.at,
        started_hash=record.hash,
    )
    lane.attempts.append(payload.attempt)
    phase = _phase(lane, payload.phase)
    if phase is not None:
        phase.attempts.append(payload.attempt)
    goal.other_events[record.hash] = record.kind


def _apply_returned(goal: GoalHosts, record: Record, payload: AttemptReturned) -> None:
    attempt = goal.attempts.get(payload.attempt)
    if attempt is None:
        return
    attempt.returned = True
    attempt.outcome = payload.outcome
    attempt.failure_code = payload.failure.code if payload.failure else None
    attempt.failure_detail = payload.failure.detail if payload.failure else None
    attempt.cursor = payload.cursor
    attempt.returned_at = record.at
    attempt.returned_seq = record.seq
    attempt.returned_hash = record.hash
    goal.returns[record.hash] = payload.attempt
    if payload.outcome == "completed":
        # A completed return in the same session and phase confirms the phase's
        # handoff: from now on the heartbeat no longer presents it.
        phase = _phase(goal.lanes[attempt.lane], attempt.phase)
        if (
            phase is not None
            and phase.handoff_sha256 is not None
            and phase.handoff_confirmed_by is None
            and attempt.session == effective_session(goal, phase)
        ):
            phase.handoff_confirmed_by = record.hash


# -- reading the state ----------------------------------------------------------------


def _phase(lane: LaneState, number: int) -> PhaseState | None:
    for phase in reversed(lane.phases):
        if phase.phase == number:
            return phase
    return None


def current_phase(lane: LaneState | None) -> PhaseState | None:
    """The lane's latest phase: the one new attempts start in."""
    return lane.phases[-1] if lane is not None and lane.phases else None


def last_attempt(goal: GoalHosts, lane: LaneState | None) -> AttemptState | None:
    if lane is None or not lane.attempts:
        return None
    return goal.attempts.get(lane.attempts[-1])


def effective_session(goal: GoalHosts, phase: PhaseState) -> str | None:
    """A phase's session: as appended, or else the session its first attempt bound."""
    if phase.session is not None or not phase.attempts:
        return phase.session
    first = goal.attempts.get(phase.attempts[0])
    return first.session if first is not None else None


def effective_profile(goal: GoalHosts, phase: PhaseState) -> str | None:
    if phase.profile is not None or not phase.attempts:
        return phase.profile
    first = goal.attempts.get(phase.attempts[0])
    return first.profile if first is not None else None


def in_flight(attempt: AttemptState | None) -> bool:
    """Not returned, or its process not observed exited."""
    return attempt is not None and not (attempt.returned and attempt.exited)


def unsettled_replans(lane: LaneState | None) -> list[str]:
    if lane is None:
        return []
    return [r.replan for r in lane.replans.values() if r.open]


def lane_failure(goal: GoalHosts, lane: LaneState | None) -> AttemptState | None:
    """The last attempt when it stops the lane and no phase was appended for it."""
    attempt = last_attempt(goal, lane)
    if attempt is None or not attempt.returned:
        return None
    if attempt.failure_kind not in LANE_STOPPING and attempt.outcome != "interrupted":
        return None
    if attempt.returned_hash in goal.bound:
        return None
    return attempt


def last_failure(goal: GoalHosts, lane: LaneState | None) -> AttemptState | None:
    """The lane's most recent failed or interrupted return (never erased)."""
    if lane is None:
        return None
    for attempt_id in reversed(lane.attempts):
        attempt = goal.attempts.get(attempt_id)
        if attempt is not None and attempt.returned and attempt.failure_kind is not None:
            return attempt
    return None


def unconfirmed_handoff(phase: PhaseState | None) -> bool:
    return (
        phase is not None
        and phase.handoff_sha256 is not None
        and phase.handoff_confirmed_by is None
    )


# -- decisions ------------------------------------------------------------------------


class Readiness(msgspec.Struct, frozen=True):
    """The goal's capacity, as the host decisions need it (from the capacity domain)."""

    capacity_ready: bool
    """`admission_ready` for the goal; a goal with no gate configured is ready."""
    has_token_gate: bool


class HandoffCheck(msgspec.Struct, frozen=True):
    """What the command layer learned reading the handoff file (it is read first)."""

    sha256: str
    bytes: int
    content: str | None
    """None when the file failed a check (then `reasons` says which)."""
    reasons: tuple[str, ...] = ()


class PhaseRequest(msgspec.Struct, frozen=True):
    lane: str
    deadline_us: int
    session: str | None
    profile: str | None
    handoff: HandoffCheck | None
    max_phase_us: int = MAX_PHASE_US_DEFAULT


class ContinueRequest(msgspec.Struct, frozen=True):
    lane: str
    bind: str
    deadline_us: int
    session: str
    profile: str
    cursor: str
    handoff: HandoffCheck | None
    max_phase_us: int = MAX_PHASE_US_DEFAULT


class StartRequest(msgspec.Struct, frozen=True):
    lane: str
    attempt: str
    session: str
    profile: str
    pid: int | None
    max_attempts: int = MAX_ATTEMPTS_DEFAULT


class HostDetail(msgspec.Struct, frozen=True, kw_only=True):
    """What a host decision found, for the application's answer (`Decision.detail`)."""

    phase: PhaseState | None = None
    """The existing phase (a replay, or the one a refused request differs from) or the
    lane's current phase (start)."""
    attempt: AttemptState | None = None
    """The existing attempt (start, exit, return) or the bound attempt (continue)."""
    number: int = 0
    """Next phase number (phase/continue) or attempt number (start)."""


HostDecision = Decision[HostDetail]


def _deadline_reasons(deadline_us: int, at_us: int, max_phase_us: int) -> list[str]:
    if deadline_us <= at_us:
        return [R.DEADLINE_NOT_IN_FUTURE]
    if deadline_us - at_us > max_phase_us:
        return [R.DEADLINE_TOO_FAR]
    return []


def _handoff_reasons(handoff: HandoffCheck | None) -> list[str]:
    return list(handoff.reasons) if handoff is not None else []


def _handoff_payload(check: HandoffCheck | None) -> Handoff | None:
    if check is None:
        return None
    assert check.content is not None  # a failed check is a reason: never appended
    return Handoff(sha256=check.sha256, bytes=check.bytes, content=check.content)


def _next_phase_number(lane: LaneState | None) -> int:
    return (lane.phases[-1].phase + 1) if lane is not None and lane.phases else 1


def decide_phase(goal: GoalHosts | None, request: PhaseRequest, at_us: int) -> HostDecision:
    """`host phase`: a lane's first phase, or a further one after a completed attempt.

    A lane whose last attempt failed or was interrupted refuses `lane_failed`: it goes
    on only through `host continue`, which binds that failure. Replaying the request
    that appended the lane's current phase (no attempt started in it since) returns
    that phase, idempotent; any other request while that unused phase is still open
    is refused `phase_exists_with_different_request` alone (never more time, never a
    swapped handoff).
    """
    goal = goal or GoalHosts()
    lane = goal.lanes.get(request.lane)
    phase = current_phase(lane)
    handoff_sha = _ok_handoff_sha(request.handoff)
    handoff_reasons = _handoff_reasons(request.handoff)
    unused = phase is not None and phase.basis == "initial" and not phase.attempts
    if (
        unused
        and phase is not None
        and not handoff_reasons
        and phase.deadline_us == request.deadline_us
        and phase.session == request.session
        and phase.profile == request.profile
        and phase.handoff_sha256 == handoff_sha
    ):
        return Decision(idempotent=True, detail=HostDetail(phase=phase))
    if unused and phase is not None and at_us < phase.deadline_us:
        # The current phase is still open and nothing ran in it: another request
        # would replace its deadline or its handoff before any attempt saw them. A
        # replay can never extend time and a phase's input is immutable (seed 002);
        # a further phase comes after a completed attempt (or once this one expired).
        # The handoff was read first: a file failing its checks is not compared.
        refusal = handoff_reasons or [R.PHASE_EXISTS_WITH_DIFFERENT_REQUEST]
        return Decision(reasons=tuple(refusal), detail=HostDetail(phase=phase))
    reasons: list[str] = []
    last = last_attempt(goal, lane)
    if last is not None and last.returned and last.failure_kind is not None:
        reasons.append(R.LANE_FAILED)
    if in_flight(last):
        reasons.append(R.ATTEMPT_IN_FLIGHT)
    reasons += _deadline_reasons(request.deadline_us, at_us, request.max_phase_us)
    reasons += handoff_reasons
    detail = HostDetail(number=_next_phase_number(lane))
    if reasons:
        return Decision(reasons=tuple(reasons), detail=detail)
    payload = PhaseAppended(
        lane=request.lane,
        phase=detail.number,
        deadline=format_us(request.deadline_us),
        session=request.session,
        profile=request.profile,
        basis="initial",
        bound=None,
        handoff=_handoff_payload(request.handoff),
    )
    return Decision(kind=PHASE_APPENDED, payload=payload, detail=detail)


def _ok_handoff_sha(handoff: HandoffCheck | None) -> str | None:
    return handoff.sha256 if handoff is not None else None


def _identity_reasons(
    goal: GoalHosts, phase: PhaseState, *, session: str | None, profile: str | None
) -> list[str]:
    """Whether a start's session and profile are the phase's (None: not compared)."""
    reasons = []
    phase_session = effective_session(goal, phase)
    phase_profile = effective_profile(goal, phase)
    if session is not None and phase_session is not None and session != phase_session:
        reasons.append(R.SESSION_MISMATCH)
    if profile is not None and phase_profile is not None and profile != phase_profile:
        reasons.append(R.PROFILE_MISMATCH)
    return reasons


def start_reasons(
    goal: GoalHosts,
    lane_id: str,
    at_us: int,
    readiness: Readiness,
    *,
    session: str | None,
    profile: str | None,
    max_attempts: int,
) -> list[str]:
    """Every reason the lane may not dispatch now (SPEC order).

    `session`/`profile` None skips those comparisons (`host status` asks whether the
    lane is dispatchable at all, for whichever session the phase holds).
    """
    lane = goal.lanes.get(lane_id)
    phase = current_phase(lane)
    last = last_attempt(goal, lane)
    reasons: list[str] = []
    if phase is None:
        reasons.append(R.NO_OPEN_PHASE)
    elif at_us >= phase.deadline_us:
        reasons.append(R.PHASE_DEADLINE_PASSED)
    if goal.stop:
        reasons.append(R.STOP_REQUESTED)
    if unsettled_replans(lane):
        reasons.append(R.REPLAN_UNSETTLED)
    if phase is not None:
        reasons += _identity_reasons(goal, phase, session=session, profile=profile)
    if in_flight(last):
        reasons.append(R.ATTEMPT_IN_FLIGHT)
    if lane_failure(goal, lane) is not None:
        reasons.append(R.LANE_FAILED)
    if (
        last is not None
        and last.failure_kind == "retryable"
        and last.returned_hash not in goal.bound
        and phase is not None
        and len(phase.attempts) >= max_attempts
    ):
        reasons.append(R.RETRY_LIMIT_REACHED)
    if not readiness.capacity_ready:
        reasons.append(R.CAPACITY_NOT_READY)
    return reasons


def decide_start(
    goal: GoalHosts | None, request: StartRequest, at_us: int, readiness: Readiness
) -> HostDecision:
    """`host start`, the dispatch gate: every failing reason, or the attempt's number.

    An attempt id names one attempt forever: the same start again (same lane,
    session, profile, pid) while the attempt is in flight is an idempotent replay (a
    lost acknowledgement); once its process exited or it returned, starting it again
    would be a blind replay and is refused `attempt_already_finished`; anything else
    under that id is refused `attempt_exists_with_different_request`.
    """
    goal = goal or GoalHosts()
    existing = goal.attempts.get(request.attempt)
    if existing is not None and (existing.exited or existing.returned):
        found = HostDetail(attempt=existing)
        return Decision(reasons=(R.ATTEMPT_ALREADY_FINISHED,), detail=found)
    if existing is not None:
        same = (
            existing.lane == request.lane
            and existing.session == request.session
            and existing.profile == request.profile
            and existing.pid == request.pid
        )
        if same:
            found = HostDetail(attempt=existing, number=existing.number)
            return Decision(idempotent=True, detail=found)
        return Decision(reasons=(R.ATTEMPT_EXISTS_WITH_DIFFERENT_REQUEST,), detail=HostDetail())
    reasons = start_reasons(
        goal,
        request.lane,
        at_us,
        readiness,
        session=request.session,
        profile=request.profile,
        max_attempts=request.max_attempts,
    )
    lane = goal.lanes.get(request.lane)
    phase = current_phase(lane)
    # Attempt numbers count every attempt the lane ever started: they never reset.
    detail = HostDetail(phase=phase, number=len(lane.attempts) + 1 if lane is not None else 1)
    if reasons:
        return Decision(reasons=tuple(reasons), detail=detail)
    assert phase is not None  # no phase is a reason (no_open_phase)
    payload = AttemptStarted(
        lane=request.lane,
        phase=phase.phase,
        attempt=request.attempt,
        number=detail.number,
        session=request.session,
        profile=request.profile,
        pid=request.pid,
    )
    return Decision(kind=ATTEMPT_STARTED, payload=payload, detail=detail)


def decide_continue(
    goal: GoalHosts | None, request: ContinueRequest, at_us: int, readiness: Readiness
) -> HostDecision:
    """`host continue`: bind exactly one failure to one new, finite phase.

    Replay first: when a phase is already bound to that failure, the same request
    (absolute deadline, session, profile, handoff digest; lane and cursor too)
    returns that phase, idempotent, whatever happened since — a later failure stays
    where it is. Any difference is `phase_exists_with_different_request`, alone: a
    replay can never extend time. A relative deadline (`+30m`) is resolved against
    this command's time before the comparison, so replaying one refuses.
    """
    goal = goal or GoalHosts()
    handoff_reasons = _handoff_reasons(request.handoff)
    bound_ref = goal.bound.get(request.bind)
    if bound_ref is not None:
        # The handoff was read first; a file that fails its checks cannot be
        # compared with the phase's digest at all.
        if handoff_reasons:
            return Decision(reasons=tuple(handoff_reasons), detail=HostDetail())
        lane = goal.lanes.get(str(bound_ref[0]))
        phase = _phase(lane, int(bound_ref[1])) if lane is not None else None
        bound_attempt = goal.attempts.get(goal.returns.get(request.bind, ""))
        same = (
            phase is not None
            and phase.lane == request.lane
            and phase.deadline_us == request.deadline_us
            and phase.session == request.session
            and phase.profile == request.profile
            and phase.handoff_sha256 == _ok_handoff_sha(request.handoff)
            and bound_attempt is not None
            and bound_attempt.cursor == request.cursor
        )
        found = HostDetail(phase=phase, attempt=bound_attempt)
        if same:
            return Decision(idempotent=True, detail=found)
        return Decision(reasons=(R.PHASE_EXISTS_WITH_DIFFERENT_REQUEST,), detail=found)
    return _continue_checks(goal, request, at_us, readiness, handoff_reasons)


def _bound_failure(
    goal: GoalHosts, request: ContinueRequest
) -> tuple[AttemptState | None, list[str]]:
    """The failed attempt of this lane whose return `--bind` names, or why there is none."""
    attempt_id = goal.returns.get(request.bind)
    attempt = goal.attempts.get(attempt_id) if attempt_id is not None else None
    if attempt is None or attempt.lane != request.lane:
        # A return of another lane is not found *in this lane*; any other host
        # event of this lane is found but is not a failure.
        if request.bind in goal.other_events and attempt is None:
            return None, [R.BOUND_EVENT_NOT_A_FAILURE]
        return None, [R.BOUND_EVENT_NOT_FOUND]
    if attempt.failure_kind is None:
        # A completed return: there is no failed attempt to compare the session,
        # profile or cursor with (as for any other event that is not a failure).
        return None, [R.BOUND_EVENT_NOT_A_FAILURE]
    return attempt, []


def _bound_failure_reasons(
    goal: GoalHosts, lane: LaneState | None, attempt: AttemptState, request: ContinueRequest
) -> list[str]:
    """Whether the bound failure is still the lane's last, over, and the same work."""
    reasons = []
    last = last_attempt(goal, lane)
    if last is not None and last.number > attempt.number:
        reasons.append(R.BOUND_FAILURE_SUPERSEDED)
    if not attempt.exited:
        reasons.append(R.PROCESS_NOT_EXITED)
    if request.session != attempt.session:
        reasons.append(R.SESSION_MISMATCH)
    if request.profile != attempt.profile:
        reasons.append(R.PROFILE_MISMATCH)
    if request.cursor != attempt.cursor:
        reasons.append(R.HISTORY_CHANGED)
    if attempt.failure_kind in NEVER_CONTINUED:
        reasons.append(R.FAILURE_NOT_CONTINUABLE)
    return reasons


def _continue_checks(
    goal: GoalHosts,
    request: ContinueRequest,
    at_us: int,
    readiness: Readiness,
    handoff_reasons: list[str],
) -> HostDecision:
    attempt, reasons = _bound_failure(goal, request)
    lane = goal.lanes.get(request.lane)
    if attempt is not None:
        reasons += _bound_failure_reasons(goal, lane, attempt, request)
    if goal.stop:
        reasons.append(R.STOP_REQUESTED)
    if unsettled_replans(lane):
        reasons.append(R.REPLAN_UNSETTLED)
    if (
        attempt is not None
        and attempt.failure_kind == "quota_exhausted"
        and readiness.has_token_gate
        and not readiness.capacity_ready
    ):
        reasons.append(R.CAPACITY_NOT_READY)
    reasons += _deadline_reasons(request.deadline_us, at_us, request.max_phase_us)
    reasons += handoff_reasons
    detail = HostDetail(attempt=attempt, number=_next_phase_number(lane))
    if reasons:
        return Decision(reasons=tuple(reasons), detail=detail)
    assert attempt is not None  # a bind that names no failure is a reason
    basis: Basis = "interrupted_attempt" if attempt.outcome == "interrupted" else "failed_attempt"
    payload = PhaseAppended(
        lane=request.lane,
        phase=detail.number,
        deadline=format_us(request.deadline_us),
        session=request.session,
        profile=request.profile,
        basis=basis,
        bound=request.bind,
        handoff=_handoff_payload(request.handoff),
    )
    return Decision(kind=PHASE_APPENDED, payload=payload, detail=detail)


class ExitRequest(msgspec.Struct, frozen=True):
    attempt: str
    exit_code: int | None
    signal: int | None


class ReturnRequest(msgspec.Struct, frozen=True):
    attempt: str
    outcome: Outcome
    failure_code: FailureCode | None
    detail: str | None
    cursor: str | None


def decide_exit(goal: GoalHosts | None, request: ExitRequest) -> HostDecision:
    """`host exit`: the attempt's process was observed gone (recorded once)."""
    attempt = (goal or GoalHosts()).attempts.get(request.attempt)
    if attempt is None:
        return Decision(reasons=(R.ATTEMPT_NOT_FOUND,), detail=HostDetail())
    found = HostDetail(attempt=attempt)
    if attempt.exited:
        same = attempt.exit_code == request.exit_code and attempt.signal == request.signal
        if same:
            return Decision(idempotent=True, detail=found)
        return Decision(reasons=(R.EXIT_EXISTS_WITH_DIFFERENT_REQUEST,), detail=found)
    payload = ProcessExited(
        attempt=request.attempt, exit_code=request.exit_code, signal=request.signal
    )
    return Decision(kind=PROCESS_EXITED, payload=payload, detail=found)


def decide_return(goal: GoalHosts | None, request: ReturnRequest) -> HostDecision:
    """`host return`: the attempt's outcome (recorded once; its hash is what binds)."""
    attempt = (goal or GoalHosts()).attempts.get(request.attempt)
    if attempt is None:
        return Decision(reasons=(R.ATTEMPT_NOT_FOUND,), detail=HostDetail())
    found = HostDetail(attempt=attempt)
    if attempt.returned:
        same = (
            attempt.outcome == request.outcome
            and attempt.failure_code == request.failure_code
            and attempt.failure_detail == request.detail
            and attempt.cursor == request.cursor
        )
        if same:
            return Decision(idempotent=True, detail=found)
        return Decision(reasons=(R.RETURN_EXISTS_WITH_DIFFERENT_REQUEST,), detail=found)
    failure = None
    if request.failure_code is not None:
        failure = Failure(code=request.failure_code, detail=request.detail)
    payload = AttemptReturned(
        attempt=request.attempt, outcome=request.outcome, failure=failure, cursor=request.cursor
    )
    return Decision(kind=ATTEMPT_RETURNED, payload=payload, detail=found)


def decide_stop(goal: GoalHosts | None, *, clear: bool) -> Decision[None]:
    """`host stop [--clear]`: already in the requested state appends nothing."""
    stopped = goal is not None and goal.stop
    if stopped != clear:
        return Decision(idempotent=True, detail=None)
    if clear:
        return Decision(kind=STOP_CLEARED, payload=StopCleared(), detail=None)
    return Decision(kind=STOP_REQUESTED, payload=StopRequested(), detail=None)


ReplanAction = Literal["open", "settle"]


def decide_replan(
    goal: GoalHosts | None, lane: str, replan: str, action: ReplanAction
) -> Decision[ReplanState | None]:
    """`host replan --open | --settle`: each once; an open replan holds its lane. The
    detail is the replan as recorded (None: never opened)."""
    lane_state = (goal or GoalHosts()).lanes.get(lane)
    existing = lane_state.replans.get(replan) if lane_state is not None else None
    if action == "open":
        if existing is not None and existing.open:
            return Decision(idempotent=True, detail=existing)
        if existing is not None:
            return Decision(reasons=(R.REPLAN_ALREADY_SETTLED,), detail=existing)
        payload: Payload = ReplanOpened(lane=lane, replan=replan)
        return Decision(kind=REPLAN_OPENED, payload=payload, detail=None)
    if existing is None:
        return Decision(reasons=(R.REPLAN_NOT_OPEN,), detail=None)
    if not existing.open:
        return Decision(idempotent=True, detail=existing)
    payload = ReplanSettled(lane=lane, replan=replan)
    return Decision(kind=REPLAN_SETTLED, payload=payload, detail=existing)
