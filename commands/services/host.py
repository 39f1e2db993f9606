"""Host continuation use cases (SPEC §4): phase, start, exit, return, continue, holds.

Each writer takes its request (`usecases.host`: every value already checked), reads
the handoff file first (if any), then lock -> fold -> sample time -> decide (pure,
`projections.hosts`) -> append at most one event. A refusal answers `ok: false` with
its reasons and appends nothing.

Handoff files are opened with `O_NONBLOCK|O_NOFOLLOW` and checked with `fstat`, so a
FIFO, a device, a directory or a symlink is refused (`handoff_not_regular`) without
ever blocking. The content is stored in the phase event as text: a handoff that is
not valid UTF-8 is invalid input (exit 2), because the journal is JSON and a lossy
decode would store bytes other than the ones the digest names.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.clock import (
    format_us,
    parse_at,
    parse_deadline_us,
    wall_us,
)
from quotaledger.journal.store import PendingRecord
from quotaledger.projections import capacity, hosts
from quotaledger.projections import reasons as R
from quotaledger.projections.decision import Decision
from quotaledger.projections.hosts import (
    ContinueRequest,
    ExitRequest,
    GoalHosts,
    HandoffCheck,
    HostDecision,
    PhaseRequest,
    Readiness,
    ReturnRequest,
    StartRequest,
)
from quotaledger.projections.ledger import LedgerState, pool_context_of
from quotaledger.projections.limits import HANDOFF_BYTES_MAX
from quotaledger.services.base import ServiceBase, conclude, unknown_name
from quotaledger.services.pools import require_not_pool
from quotaledger.usecases.decode import event_or_unset
from quotaledger.usecases.fields import sha256_hex
from quotaledger.usecases.host import (
    Attempt,
    AttemptAnswer,
    Difference,
    FailureDetail,
    Handoff,
    HostContinueRequest,
    HostExitAnswer,
    HostExitRequest,
    HostHeartbeatAnswer,
    HostHeartbeatRequest,
    HostPhaseAnswer,
    HostPhaseRequest,
    HostReplanAnswer,
    HostReplanRequest,
    HostReturnAnswer,
    HostReturnRequest,
    HostStartAnswer,
    HostStartRequest,
    HostStatusAnswer,
    HostStatusRequest,
    HostStopAnswer,
    HostStopRequest,
    Lane,
    LaneFailure,
    Phase,
    Replan,
    parse_max_phase_us,
)

T = TypeVar("T", bound=msgspec.Struct)

_DEADLINE_US_MAX = parse_at("9999-12-31T23:59:59.999999Z")


# -- inputs ---------------------------------------------------------------------------


def read_handoff(path: str, expected_sha256: str) -> HandoffCheck:
    """Read and check a handoff file: regular, at most 256 KiB, matching its digest.

    Never blocks: `O_NONBLOCK` makes opening a FIFO return at once, and `fstat` on
    the open descriptor (not the path, which could be swapped) refuses it.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink: O_NOFOLLOW refused it
            return HandoffCheck(expected_sha256, 0, None, (R.HANDOFF_NOT_REGULAR,))
        # Missing, or unreadable (permissions): either way there is no handoff to bind.
        return HandoffCheck(expected_sha256, 0, None, (R.HANDOFF_MISSING,))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return HandoffCheck(expected_sha256, 0, None, (R.HANDOFF_NOT_REGULAR,))
        if info.st_size > HANDOFF_BYTES_MAX:
            return HandoffCheck(expected_sha256, info.st_size, None, (R.HANDOFF_TOO_LARGE,))
        # The file may grow while it is read: read one byte past the limit to tell.
        data = _read_at_most(fd, HANDOFF_BYTES_MAX + 1)
    except OSError:
        return HandoffCheck(expected_sha256, 0, None, (R.HANDOFF_MISSING,))
    finally:
        os.close(fd)
    if len(data) > HANDOFF_BYTES_MAX:
        return HandoffCheck(expected_sha256, len(data), None, (R.HANDOFF_TOO_LARGE,))
    if hashlib.sha256(data).hexdigest() != expected_sha256:
        return HandoffCheck(expected_sha256, len(data), None, (R.HANDOFF_DIGEST_MISMATCH,))
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"handoff {path} is not UTF-8 text (byte {exc.start}); handoffs are stored as text",
            code=codes.HANDOFF_NOT_UTF8,
        ) from None
    nul = data.find(b"\0")
    if nul >= 0:
        # A NUL is text to no reader, and PostgreSQL's JSON holds none: refused here on
        # every store alike, as free text's is (usecases/fields.check_text).
        raise InvalidInput(
            f"handoff {path} holds a NUL character (byte {nul}), which no text may; "
            "handoffs are stored as text",
            code=codes.HANDOFF_NOT_UTF8,
        )
    return HandoffCheck(expected_sha256, len(data), content)


def _read_at_most(fd: int, size_bytes: int) -> bytes:
    """The first `size_bytes` bytes from `fd` (fewer at its end), over short reads."""
    chunks: list[bytes] = []
    size = 0
    while size < size_bytes:
        chunk = os.read(fd, size_bytes - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _handoff_input(path: str | None, sha256: str | None) -> HandoffCheck | None:
    """The handoff file read and checked, or None without one (the request type
    has both `handoff` and `handoff_sha256` or neither)."""
    if path is None or sha256 is None:
        return None
    digest = sha256_hex(sha256)
    assert digest is not None  # the request's Sha256 type checked it
    return read_handoff(path, digest)


def _bound_hash(bind: str) -> str:
    digest = sha256_hex(bind)
    assert digest is not None  # the request's EventHash type checked it
    return digest


def _deadline_us(text: str, at: str) -> int:
    value = parse_deadline_us(text, parse_at(at), "deadline")
    if not 0 <= value <= _DEADLINE_US_MAX:
        raise InvalidInput(
            lambda name: f"{name} {text!r} is out of range",
            code=codes.INVALID_TIME,
            about="deadline",
        )
    return value


# -- answers' parts ------------------------------------------------------------------


def _copied(answer_type: type[T], state: Any, **computed: Any) -> T:
    """`answer_type` with each field as `state` has it, but those `computed`."""
    values = {
        name: computed[name] if name in computed else getattr(state, name)
        for name in answer_type.__struct_fields__
    }
    return answer_type(**values)


def phase_of(phase: hosts.PhaseState) -> Phase:
    confirmed = None
    if phase.handoff_sha256 is not None:
        confirmed = phase.handoff_confirmed_by is not None
    return _copied(Phase, phase, handoff_confirmed=confirmed, attempts=list(phase.attempts))


def attempt_of(attempt: hosts.AttemptState) -> Attempt:
    failure = None
    if attempt.failure_code is not None:
        failure = FailureDetail(attempt.failure_code, attempt.failure_detail)
    return _copied(Attempt, attempt, failure=failure)


def failure_of(goal: GoalHosts, attempt: hosts.AttemptState | None) -> LaneFailure | None:
    if attempt is None:
        return None
    bound = goal.bound.get(attempt.returned_hash or "")
    return LaneFailure(
        hash=attempt.returned_hash,
        code=attempt.failure_kind,
        attempt=attempt.attempt,
        number=attempt.number,
        continued_by_phase=bound[1] if bound is not None else None,
    )


def replan_of(replan: hosts.ReplanState) -> Replan:
    return _copied(Replan, replan)


def _attempt_refusal(
    decision: Decision[Any], attempt: str, at: str, lane: str | UnsetType = UNSET
) -> AttemptAnswer:
    reasons = list(decision.reasons)
    return AttemptAnswer(
        ok=False, appended=False, reasons=reasons, lane=lane, attempt=attempt, at=at
    )


def _phase_refusal(
    decision: HostDecision,
    lane: str,
    bind: str | UnsetType,
    deadline_us: int,
    at: str,
    requested: dict[str, str | None],
) -> HostPhaseAnswer:
    """`host phase` / `host continue` (with its `bind`) refused: the phase it would
    replay, and when only the request differs, which input (`requested` against it)."""
    existing: Phase | UnsetType = UNSET
    differences: dict[str, Difference] | UnsetType = UNSET
    if decision.detail.phase is not None:
        existing = phase_of(decision.detail.phase)
        if R.PHASE_EXISTS_WITH_DIFFERENT_REQUEST in decision.reasons:
            attempt = decision.detail.attempt
            cursor = None if attempt is None else attempt.cursor
            differences = _differences(existing, requested, cursor)
    return HostPhaseAnswer(
        ok=False,
        appended=False,
        reasons=list(decision.reasons),
        lane=lane,
        bind=bind,
        deadline=format_us(deadline_us),
        at=at,
        existing_phase=existing,
        differences=differences,
    )


def _differences(
    existing: Phase, requested: dict[str, str | None], cursor: str | None
) -> dict[str, Difference]:
    """What a refused replay changed: {field: {existing, requested}}, so the answer
    to phase_exists_with_different_request says which input differs (a relative
    deadline such as +1h resolves against each command's own time). The cursor is
    the one the bound attempt returned with."""
    had = {name: cursor if name == "cursor" else getattr(existing, name) for name in requested}
    return {
        name: Difference(had[name], value)
        for name, value in requested.items()
        if had[name] != value
    }


# -- the service ----------------------------------------------------------------------


class HostService(ServiceBase):
    """`host phase | start | exit | return | continue | heartbeat | stop | replan | status`."""

    def _goal_hosts(self, state: LedgerState, goal: str) -> GoalHosts:
        return state.hosts.goals.get(goal) or GoalHosts()

    def host_phase(self, request: HostPhaseRequest) -> HostPhaseAnswer:
        """Open a lane's first phase, or a further one after a completed attempt."""
        goal, lane = request.goal, request.lane
        max_phase_us = parse_max_phase_us(request.max_phase)
        handoff = _handoff_input(request.handoff, request.handoff_sha256)  # read first, always
        with self.journal.transaction() as txn:
            require_not_pool(txn.state, goal)  # one space of names (SPEC §12.1)
            event_at = txn.time_for(goal, request.at)
            state = self._goal_hosts(txn.state, goal)
            decided = PhaseRequest(
                lane=lane,
                deadline_us=_deadline_us(request.deadline, event_at),
                session=request.session,
                profile=request.profile,
                handoff=handoff,
                max_phase_us=max_phase_us,
            )
            decision = hosts.decide_phase(state, decided, parse_at(event_at))
            pending = conclude(txn, goal, event_at, decision)
        if not decision.ok:
            requested = {
                "deadline": format_us(decided.deadline_us),
                "session": request.session,
                "profile": request.profile,
                "handoff_sha256": _handoff_sha(handoff),
            }
            return _phase_refusal(decision, lane, UNSET, decided.deadline_us, event_at, requested)
        return self._phase_answer(goal, lane, decision, pending)

    def _phase_answer(
        self, goal: str, lane: str, decision: HostDecision, pending: PendingRecord | None
    ) -> HostPhaseAnswer:
        """`host phase` / `host continue` that went ahead: appended, or a replay."""
        if pending is None:
            assert decision.detail.phase is not None
            phase = decision.detail.phase
        else:
            phase = _find_phase(self.journal.state, goal, lane, decision.detail.number)
        return HostPhaseAnswer(
            ok=True,
            appended=pending is not None,
            idempotent=pending is None,
            phase=phase_of(phase),
            event=event_or_unset(pending),
        )

    def host_start(self, request: HostStartRequest) -> HostStartAnswer:
        """The dispatch gate: start an attempt in the lane's current phase, or refuse."""
        goal = request.goal
        decided = StartRequest(
            request.lane,
            request.attempt,
            request.session,
            request.profile,
            request.pid,
            request.max_attempts,
        )
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, request.at)
            at_us = parse_at(event_at)
            state = self._goal_hosts(txn.state, goal)
            readiness = capacity_readiness(txn.state, goal, at_us)
            decision = hosts.decide_start(state, decided, at_us, readiness)
            pending = conclude(txn, goal, event_at, decision)
        if not decision.ok:
            return _attempt_refusal(decision, request.attempt, event_at, request.lane)
        return self._attempt_answer(goal, request.attempt, decision, pending)

    def host_exit(self, request: HostExitRequest) -> HostExitAnswer:
        """Record that the attempt's process was observed exited."""
        goal, attempt = request.goal, request.attempt
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, request.at)
            state = self._goal_hosts(txn.state, goal)
            decided = ExitRequest(attempt, request.exit_code, request.signal)
            decision = hosts.decide_exit(state, decided)
            pending = conclude(txn, goal, event_at, decision)
        if not decision.ok:
            return _attempt_refusal(decision, attempt, event_at)
        return self._attempt_answer(goal, attempt, decision, pending)

    def _attempt_answer(
        self,
        goal: str,
        attempt: str,
        decision: HostDecision,
        pending: PendingRecord | None,
        *,
        with_hash: bool = False,
    ) -> AttemptAnswer:
        """`host start` / `exit` / `return` that went ahead: the attempt as it now
        stands (an identical repeat is the one case nothing is appended); a return
        also answers its event's hash, which `host continue --bind` names."""
        if pending is None:
            assert decision.detail.attempt is not None
            now = decision.detail.attempt
        else:
            now = self._goal_hosts(self.journal.state, goal).attempts[attempt]
        return AttemptAnswer(
            ok=True,
            appended=pending is not None,
            idempotent=pending is None,
            hash=now.returned_hash if with_hash else UNSET,
            attempt=attempt_of(now),
            event=event_or_unset(pending),
        )

    def host_return(self, request: HostReturnRequest) -> HostReturnAnswer:
        """Record the attempt's outcome; its event hash is what `host continue` binds."""
        goal, attempt = request.goal, request.attempt
        decided = ReturnRequest(
            attempt, request.outcome, request.failure, request.detail, request.cursor
        )
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, request.at)
            state = self._goal_hosts(txn.state, goal)
            decision = hosts.decide_return(state, decided)
            pending = conclude(txn, goal, event_at, decision)
        if not decision.ok:
            return _attempt_refusal(decision, attempt, event_at)
        return self._attempt_answer(goal, attempt, decision, pending, with_hash=True)

    def host_continue(self, request: HostContinueRequest) -> HostPhaseAnswer:
        """Bind exactly one failure to a new finite phase on the original session."""
        goal, lane = request.goal, request.lane
        max_phase_us = parse_max_phase_us(request.max_phase)
        # The handoff file is always read and checked first, before any comparison
        # with an existing phase (SPEC §4.2).
        handoff = _handoff_input(request.handoff, request.handoff_sha256)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, request.at)
            at_us = parse_at(event_at)
            state = self._goal_hosts(txn.state, goal)
            decided = ContinueRequest(
                lane=lane,
                bind=_bound_hash(request.bind),
                deadline_us=_deadline_us(request.deadline, event_at),
                session=request.session,
                profile=request.profile,
                cursor=request.cursor,
                handoff=handoff,
                max_phase_us=max_phase_us,
            )
            readiness = capacity_readiness(txn.state, goal, at_us)
            decision = hosts.decide_continue(state, decided, at_us, readiness)
            pending = conclude(txn, goal, event_at, decision)
        if not decision.ok:
            requested = {
                "lane": lane,
                "deadline": format_us(decided.deadline_us),
                "session": request.session,
                "profile": request.profile,
                "handoff_sha256": _handoff_sha(handoff),
                "cursor": request.cursor,
            }
            deadline_us = decided.deadline_us
            return _phase_refusal(decision, lane, decided.bind, deadline_us, event_at, requested)
        answer = self._phase_answer(goal, lane, decision, pending)
        if pending is None:
            # A replay never erases what happened since: a later failure of the
            # continued phase is kept and reported here.
            last = hosts.last_failure(state, state.lanes.get(lane))
            answer.last_failure = failure_of(state, last)
        return answer

    def host_stop(self, request: HostStopRequest) -> HostStopAnswer:
        """Request (or clear) a stop: no lane of the goal starts or continues meanwhile."""
        goal = request.goal
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, request.at)
            decision = hosts.decide_stop(txn.state.hosts.goals.get(goal), clear=request.clear)
            pending = conclude(txn, goal, event_at, decision)
        # Already in the requested state: nothing appended.
        return HostStopAnswer(
            ok=True,
            appended=pending is not None,
            idempotent=pending is None,
            stop=not request.clear,
            event=event_or_unset(pending),
        )

    def host_replan(self, request: HostReplanRequest) -> HostReplanAnswer:
        """Open or settle a replan; an open replan holds its lane (start and continue)."""
        goal, lane, replan = request.goal, request.lane, request.replan
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, request.at)
            state = txn.state.hosts.goals.get(goal)
            decision = hosts.decide_replan(state, lane, replan, request.action)
            pending = conclude(txn, goal, event_at, decision)
        if not decision.ok:
            reasons = list(decision.reasons)
            return HostReplanAnswer(
                ok=False, appended=False, reasons=reasons, lane=lane, replan=replan
            )
        if pending is None:
            assert decision.detail is not None
            now = decision.detail
        else:
            now = self._goal_hosts(self.journal.state, goal).lanes[lane].replans[replan]
        return HostReplanAnswer(
            ok=True,
            appended=pending is not None,
            idempotent=pending is None,
            lane=lane,
            replan=replan_of(now),
            event=event_or_unset(pending),
        )

    # -- readers (no lock; --at evaluates the state as of T) --------------------------

    def _reader_state(self, goal: str, at: str | None) -> tuple[LedgerState, int]:
        if at is not None:
            return self._state_as_of(at=at), parse_at(at)
        # A long-lived API handle may lag behind other processes (a heartbeat would
        # present a handoff another process already confirmed): catch up first.
        state = self.journal.refresh()
        last = self.journal.head.goal_last_at.get(goal)
        now_us = wall_us()
        return state, max(now_us, parse_at(last)) if last else now_us

    def host_heartbeat(self, request: HostHeartbeatRequest) -> HostHeartbeatAnswer:
        """The lane's current phase and, until a completed return confirms it, the handoff."""
        self.require_goal(request.goal)
        ledger, _at_us = self._reader_state(request.goal, request.at)
        state = self._goal_hosts(ledger, request.goal)
        _require_lane(state, request.goal, request.lane)
        phase = hosts.current_phase(state.lanes.get(request.lane))
        if phase is None:
            return HostHeartbeatAnswer(
                ok=False, reasons=[R.NO_OPEN_PHASE], phase=None, handoff=None
            )
        phase_session = hosts.effective_session(state, phase)
        if phase_session is not None and phase_session != request.session:
            # The handoff belongs to the phase's session: never hand it to another.
            return HostHeartbeatAnswer(
                ok=False, reasons=[R.SESSION_MISMATCH], phase=phase_of(phase), handoff=None
            )
        handoff = None
        if hosts.unconfirmed_handoff(phase):
            handoff = Handoff(phase.handoff_sha256, phase.handoff_content)
        return HostHeartbeatAnswer(ok=True, phase=phase_of(phase), handoff=handoff)

    def host_status(self, request: HostStatusRequest) -> HostStatusAnswer:
        """Per lane: phases, attempts, holds, the last failure, and whether it may dispatch."""
        goal = request.goal
        self.require_goal(goal)
        ledger, at_us = self._reader_state(goal, request.at)
        state = self._goal_hosts(ledger, goal)
        readiness = capacity_readiness(ledger, goal, at_us)
        if request.lane is not None:
            _require_lane(state, goal, request.lane)
        names = [request.lane] if request.lane is not None else sorted(state.lanes)
        return HostStatusAnswer(
            ok=True,
            goal=goal,
            at=format_us(at_us),
            stop=state.stop,
            capacity_ready=readiness.capacity_ready,
            lanes={
                name: _lane_of(state, name, at_us, readiness, request.max_attempts)
                for name in names
            },
        )


# -- helpers --------------------------------------------------------------------------


def _require_lane(state: GoalHosts, goal: str, lane: str) -> None:
    if lane not in state.lanes:
        raise unknown_name("lane", lane, goal, sorted(state.lanes), code=codes.UNKNOWN_LANE)


def _handoff_sha(check: HandoffCheck | None) -> str | None:
    return None if check is None else check.sha256


def _find_phase(state: LedgerState, goal: str, lane: str, number: int) -> hosts.PhaseState:
    phases = state.hosts.goals[goal].lanes[lane].phases
    return next(p for p in reversed(phases) if p.phase == number)


def _lane_of(
    state: GoalHosts, name: str, at_us: int, readiness: Readiness, max_attempts: int
) -> Lane:
    lane = state.lanes.get(name)
    reasons = hosts.start_reasons(
        state, name, at_us, readiness, session=None, profile=None, max_attempts=max_attempts
    )
    attempts = [state.attempts[a] for a in lane.attempts] if lane is not None else []
    replans = list(lane.replans.values()) if lane is not None else []
    return Lane(
        phases=[phase_of(p) for p in lane.phases] if lane is not None else [],
        attempts=[attempt_of(a) for a in attempts],
        stop=state.stop,
        stop_at=state.stop_at,
        replans=[replan_of(r) for r in replans],
        last_failure=failure_of(state, hosts.last_failure(state, lane)),
        dispatchable=not reasons,
        reasons=reasons,
    )


def capacity_readiness(state: LedgerState, goal: str, at_us: int) -> Readiness:
    """The goal's capacity readiness for the host gates, from the capacity projection.

    `capacity_ready` is the capacity domain's `admission_ready`, except that a goal
    with no gate configured at all does not block host work (its `next_action` is
    `configure`: nothing constrains it, and a host lane is not an admission).
    """
    return _capacity_readiness(state, goal, at_us)


def _capacity_readiness(state: LedgerState, goal: str, at_us: int) -> Readiness:
    goal_capacity = capacity.goal_of(state.capacity, goal)
    if goal_capacity.cases is None and goal_capacity.tokens is None:
        return Readiness(capacity_ready=True, has_token_gate=False)
    evaluation = capacity.evaluate(goal_capacity, at_us)
    pool = pool_context_of(state, goal)
    pool_reasons = capacity.ready_pool_reasons(goal_capacity, at_us, pool, goal)
    return Readiness(
        capacity_ready=capacity.admission_ready(evaluation, pool_reasons),
        has_token_gate=goal_capacity.tokens is not None,
    )
