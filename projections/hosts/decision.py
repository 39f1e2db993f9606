"""The host decisions (SPEC §4): phase, start, continue, exit, return, stop, replan."""

from typing import Literal

import msgspec

from quotaledger.journal.clock import format_us
from quotaledger.projections import reasons as R
from quotaledger.projections.decision import Decision
from quotaledger.projections.hosts.events import (
    ATTEMPT_RETURNED,
    ATTEMPT_STARTED,
    MAX_ATTEMPTS_DEFAULT,
    MAX_PHASE_US_DEFAULT,
    NEVER_CONTINUED,
    PHASE_APPENDED,
    PROCESS_EXITED,
    REPLAN_OPENED,
    REPLAN_SETTLED,
    STOP_CLEARED,
    STOP_REQUESTED,
    AttemptReturned,
    AttemptStarted,
    Basis,
    Failure,
    FailureCode,
    Handoff,
    Outcome,
    PhaseAppended,
    ProcessExited,
    ReplanOpened,
    ReplanSettled,
    StopCleared,
    StopRequested,
)
from quotaledger.projections.hosts.fold import (
    AttemptState,
    GoalHosts,
    LaneState,
    PhaseState,
    ReplanState,
    current_phase,
    effective_profile,
    effective_session,
    in_flight,
    lane_failure,
    lane_phase,
    last_attempt,
    unsettled_replans,
)
from quotaledger.projections.types import Payload

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
        phase = lane_phase(lane, int(bound_ref[1])) if lane is not None else None
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
