"""A goal's host state (lanes, phases, attempts, replans), its fold, and what it says."""

from typing import Any

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.clock import parse_at
from quotaledger.projections.hosts.events import (
    LANE_STOPPING,
    AttemptReturned,
    AttemptStarted,
    PhaseAppended,
    ProcessExited,
    ReplanOpened,
    ReplanSettled,
    StopCleared,
    StopRequested,
)
from quotaledger.projections.types import StateStruct

VERSION = "1"

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
    phase = lane_phase(lane, payload.phase)
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
        phase = lane_phase(goal.lanes[attempt.lane], attempt.phase)
        if (
            phase is not None
            and phase.handoff_sha256 is not None
            and phase.handoff_confirmed_by is None
            and attempt.session == effective_session(goal, phase)
        ):
            phase.handoff_confirmed_by = record.hash


# -- reading the state ----------------------------------------------------------------


def lane_phase(lane: LaneState, number: int) -> PhaseState | None:
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
