"""Host continuation use cases (SPEC §4): phase, start, exit, return, continue, holds.

Each writer: read the handoff file first (if any), then lock -> fold -> sample time
-> decide (pure, `projections.hosts`) -> append at most one event. A refusal
returns `{"ok": False, "reasons": [...]}` and appends nothing.

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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.clock import (
    format_us,
    parse_at,
    parse_deadline_us,
    parse_duration_us,
    wall_us,
)
from quotaledger.journal.store import PendingRecord
from quotaledger.projections import capacity, hosts
from quotaledger.projections import reasons as R
from quotaledger.projections.decision import Decision
from quotaledger.projections.hosts import (
    OUTCOMES,
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
from quotaledger.projections.ledger import LedgerState
from quotaledger.projections.limits import EXIT_CODE_MAX, HANDOFF_BYTES_MAX, SIGNAL_MAX
from quotaledger.services.base import (
    ServiceBase,
    check_identifier,
    check_text,
    conclude,
    event_json,
    event_part,
)

if TYPE_CHECKING:  # answer shapes are for mypy: building them costs each CLI call
    from quotaledger.services.answers import (
        AttemptAnswer,
        AttemptJson,
        AttemptRefusal,
        Difference,
        FailureDetailJson,
        FailureJson,
        HandoffJson,
        HeartbeatAnswer,
        HostStatusAnswer,
        LaneJson,
        PhaseAnswer,
        PhaseJson,
        PhaseRefusal,
        ReplanAnswer,
        ReplanJson,
        ReplanRefusal,
        ReturnAnswer,
        StartRefusal,
        StopAnswer,
    )

_SHA256_HEX = frozenset("0123456789abcdef")
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


def _sha256_hex(text: str) -> str | None:
    """A SHA-256 hex digest as stored (trimmed, lower case), or None if it is not one."""
    digest = text.strip().lower()
    if len(digest) != 64 or not set(digest) <= _SHA256_HEX:
        return None
    return digest


def _handoff_input(path: str | None, sha256: str | None) -> HandoffCheck | None:
    if path is None and sha256 is None:
        return None
    if path is None or sha256 is None:
        raise InvalidInput(
            "--handoff and --handoff-sha256 go together", code=codes.HANDOFF_DIGEST_REQUIRED
        )
    digest = _sha256_hex(sha256)
    if digest is None:
        raise InvalidInput(
            f"--handoff-sha256 {sha256!r} is not 64 hex digits", code=codes.INVALID_SHA256
        )
    return read_handoff(path, digest)


def _check_hash(option: str, value: str) -> str:
    digest = _sha256_hex(value)
    if digest is None:
        raise InvalidInput(f"{option} {value!r} is not an event hash", code=codes.INVALID_HASH)
    return digest


def _max_phase_us(text: str) -> int:
    value = parse_duration_us(text)
    if value <= 0:
        raise InvalidInput("--max-phase must be positive", code=codes.INVALID_DURATION)
    return value


def _deadline_us(text: str, at: str) -> int:
    value = parse_deadline_us(text, parse_at(at))
    if not 0 <= value <= _DEADLINE_US_MAX:
        raise InvalidInput(f"--deadline {text!r} is out of range", code=codes.INVALID_TIME)
    return value


# -- JSON -----------------------------------------------------------------------------


def phase_json(phase: hosts.PhaseState) -> PhaseJson:
    return {
        "phase": phase.phase,
        "lane": phase.lane,
        "deadline": phase.deadline,
        "session": phase.session,
        "profile": phase.profile,
        "basis": phase.basis,
        "bound": phase.bound,
        "handoff_sha256": phase.handoff_sha256,
        "handoff_bytes": phase.handoff_bytes,
        "handoff_confirmed": phase.handoff_confirmed_by is not None
        if phase.handoff_sha256 is not None
        else None,
        "attempts": list(phase.attempts),
        "at": phase.at,
        "seq": phase.seq,
        "hash": phase.hash,
    }


def attempt_json(attempt: hosts.AttemptState) -> AttemptJson:
    failure: FailureDetailJson | None = None
    if attempt.failure_code is not None:
        failure = {"code": attempt.failure_code, "detail": attempt.failure_detail}
    return {
        "attempt": attempt.attempt,
        "lane": attempt.lane,
        "number": attempt.number,
        "phase": attempt.phase,
        "session": attempt.session,
        "profile": attempt.profile,
        "pid": attempt.pid,
        "started_at": attempt.started_at,
        "exited": attempt.exited,
        "exit_code": attempt.exit_code,
        "signal": attempt.signal,
        "returned": attempt.returned,
        "outcome": attempt.outcome,
        "failure": failure,
        "cursor": attempt.cursor,
        "returned_at": attempt.returned_at,
        "returned_hash": attempt.returned_hash,
    }


def failure_json(goal: GoalHosts, attempt: hosts.AttemptState | None) -> FailureJson | None:
    if attempt is None:
        return None
    bound = goal.bound.get(attempt.returned_hash or "")
    return {
        "hash": attempt.returned_hash,
        "code": attempt.failure_kind,
        "attempt": attempt.attempt,
        "number": attempt.number,
        "continued_by_phase": bound[1] if bound is not None else None,
    }


def _attempt_refusal(decision: Decision[Any], attempt: str, at: str) -> AttemptRefusal:
    reasons = list(decision.reasons)
    return {"ok": False, "appended": False, "reasons": reasons, "attempt": attempt, "at": at}


def _differences(
    existing: Mapping[str, Any], requested: Mapping[str, Any]
) -> dict[str, Difference]:
    """What a refused replay changed: {field: {existing, requested}}, so the answer
    to phase_exists_with_different_request says which input differs (a relative
    deadline such as +1h resolves against each command's own time)."""
    return {
        name: {"existing": existing.get(name), "requested": value}
        for name, value in requested.items()
        if existing.get(name) != value
    }


# -- the service ----------------------------------------------------------------------


class HostService(ServiceBase):
    """`host phase | start | exit | return | continue | heartbeat | stop | replan | status`."""

    def _goal_hosts(self, state: LedgerState, goal: str) -> GoalHosts:
        return state.hosts.goals.get(goal) or GoalHosts()

    def host_phase(
        self,
        *,
        goal: str,
        lane: str,
        deadline: str,
        session: str | None = None,
        profile: str | None = None,
        handoff: str | None = None,
        handoff_sha256: str | None = None,
        max_phase: str = "7d",
        at: str | None = None,
    ) -> PhaseAnswer | PhaseRefusal:
        """Open a lane's first phase, or a further one after a completed attempt."""
        check_identifier("--goal", goal)
        check_identifier("--lane", lane)
        if session is not None:
            check_identifier("--session", session)
        if profile is not None:
            check_identifier("--profile", profile)
        max_phase_us = _max_phase_us(max_phase)
        handoff_check = _handoff_input(handoff, handoff_sha256)  # read first, always
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = self._goal_hosts(txn.state, goal)
            request = PhaseRequest(
                lane=lane,
                deadline_us=_deadline_us(deadline, event_at),
                session=session,
                profile=profile,
                handoff=handoff_check,
                max_phase_us=max_phase_us,
            )
            decision = hosts.decide_phase(state, request, parse_at(event_at))
            pending = conclude(txn, goal, event_at, decision)
        detail = decision.detail
        if not decision.ok:
            refusal: PhaseRefusal = {
                "ok": False,
                "appended": False,
                "reasons": list(decision.reasons),
                "lane": lane,
                "deadline": format_us(request.deadline_us),
                "at": event_at,
            }
            if detail.phase is not None:
                refusal["existing_phase"] = existing = phase_json(detail.phase)
                if R.PHASE_EXISTS_WITH_DIFFERENT_REQUEST in decision.reasons:
                    refusal["differences"] = _differences(
                        existing,
                        {
                            "deadline": format_us(request.deadline_us),
                            "session": session,
                            "profile": profile,
                            "handoff_sha256": _handoff_sha(handoff_check),
                        },
                    )
            return refusal
        if pending is None:
            assert detail.phase is not None
            return _phase_answer(detail.phase, None)
        return _phase_answer(_find_phase(self.journal.state, goal, lane, detail.number), pending)

    def host_start(
        self,
        *,
        goal: str,
        lane: str,
        attempt: str,
        session: str,
        profile: str,
        pid: int | None = None,
        max_attempts: int = hosts.MAX_ATTEMPTS_DEFAULT,
        at: str | None = None,
    ) -> AttemptAnswer | StartRefusal:
        """The dispatch gate: start an attempt in the lane's current phase, or refuse."""
        for option, value in (
            ("--goal", goal),
            ("--lane", lane),
            ("--attempt", attempt),
            ("--session", session),
            ("--profile", profile),
        ):
            check_identifier(option, value)
        if pid is not None and not 1 <= pid <= 2**31 - 1:
            raise InvalidInput(f"--pid {pid} is not a process id", code=codes.INVALID_PID)
        if max_attempts < 1:
            raise InvalidInput("--max-attempts must be >= 1", code=codes.INVALID_OPTION)
        request = StartRequest(lane, attempt, session, profile, pid, max_attempts)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            at_us = parse_at(event_at)
            state = self._goal_hosts(txn.state, goal)
            readiness = capacity_readiness(txn.state, goal, at_us)
            decision = hosts.decide_start(state, request, at_us, readiness)
            pending = conclude(txn, goal, event_at, decision)
        if not decision.ok:
            refusal: StartRefusal = {
                "ok": False,
                "appended": False,
                "reasons": list(decision.reasons),
                "lane": lane,
                "attempt": attempt,
                "at": event_at,
            }
            return refusal
        return self._attempt_answer(goal, attempt, decision, pending)

    def host_exit(
        self,
        *,
        goal: str,
        attempt: str,
        exit_code: int | None = None,
        signal: int | None = None,
        at: str | None = None,
    ) -> AttemptAnswer | AttemptRefusal:
        """Record that the attempt's process was observed exited."""
        check_identifier("--goal", goal)
        check_identifier("--attempt", attempt)
        if exit_code is not None and signal is not None:
            raise InvalidInput("give --exit-code or --signal, not both", code=codes.INVALID_OPTION)
        if exit_code is not None and not 0 <= exit_code <= EXIT_CODE_MAX:
            raise InvalidInput(f"--exit-code must be 0..{EXIT_CODE_MAX}", code=codes.INVALID_OPTION)
        if signal is not None and not 1 <= signal <= SIGNAL_MAX:
            raise InvalidInput(f"--signal must be 1..{SIGNAL_MAX}", code=codes.INVALID_OPTION)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = self._goal_hosts(txn.state, goal)
            decision = hosts.decide_exit(state, ExitRequest(attempt, exit_code, signal))
            pending = conclude(txn, goal, event_at, decision)
        if not decision.ok:
            return _attempt_refusal(decision, attempt, event_at)
        return self._attempt_answer(goal, attempt, decision, pending)

    def _attempt_answer(
        self, goal: str, attempt: str, decision: HostDecision, pending: PendingRecord | None
    ) -> AttemptAnswer:
        """`host start` / `host exit` that went ahead: the attempt as it now stands (an
        identical repeat is the one case nothing is appended)."""
        if pending is None:
            assert decision.detail.attempt is not None
            now = decision.detail.attempt
        else:
            now = self._goal_hosts(self.journal.state, goal).attempts[attempt]
        answer: AttemptAnswer = {
            "ok": True,
            "appended": pending is not None,
            "idempotent": pending is None,
            "attempt": attempt_json(now),
        }
        if pending is not None:
            answer["event"] = event_json(pending)
        return answer

    def host_return(
        self,
        *,
        goal: str,
        attempt: str,
        outcome: str,
        failure: str | None = None,
        cursor: str | None = None,
        detail: str | None = None,
        at: str | None = None,
    ) -> ReturnAnswer | AttemptRefusal:
        """Record the attempt's outcome; its event hash is what `host continue` binds."""
        check_identifier("--goal", goal)
        check_identifier("--attempt", attempt)
        if outcome not in OUTCOMES:
            raise InvalidInput(
                f"--outcome must be one of {', '.join(OUTCOMES)}", code=codes.INVALID_OUTCOME
            )
        if outcome == "failed" and failure is None:
            raise InvalidInput("--outcome failed needs --failure CODE", code=codes.FAILURE_REQUIRED)
        if outcome != "failed" and failure is not None:
            raise InvalidInput(
                f"--failure is given only with --outcome failed (not {outcome})",
                code=codes.INVALID_OPTION,
            )
        if failure is not None and failure not in hosts.FAILURE_CODES:
            raise InvalidInput(
                f"--failure must be one of {', '.join(hosts.FAILURE_CODES)}",
                code=codes.INVALID_FAILURE,
            )
        if detail is not None and outcome != "failed":
            raise InvalidInput("--detail describes a failure", code=codes.INVALID_OPTION)
        if cursor is not None:
            check_text("--cursor", cursor)
        if detail is not None:
            check_text("--detail", detail)
        request = ReturnRequest(
            attempt,
            cast("hosts.Outcome", outcome),  # checked above
            cast("hosts.FailureCode | None", failure),
            detail,
            cursor,
        )
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = self._goal_hosts(txn.state, goal)
            decision = hosts.decide_return(state, request)
            pending = conclude(txn, goal, event_at, decision)
        if not decision.ok:
            return _attempt_refusal(decision, attempt, event_at)
        if pending is None:
            assert decision.detail.attempt is not None
            return _return_result(decision.detail.attempt, appended=False, idempotent=True)
        returned = self._goal_hosts(self.journal.state, goal).attempts[attempt]
        return {**_return_result(returned, appended=True, idempotent=False), **event_part(pending)}

    def host_continue(
        self,
        *,
        goal: str,
        lane: str,
        bind: str,
        deadline: str,
        session: str,
        profile: str,
        cursor: str,
        handoff: str | None = None,
        handoff_sha256: str | None = None,
        max_phase: str = "7d",
        at: str | None = None,
    ) -> PhaseAnswer | PhaseRefusal:
        """Bind exactly one failure to a new finite phase on the original session."""
        for option, value in (
            ("--goal", goal),
            ("--lane", lane),
            ("--session", session),
            ("--profile", profile),
        ):
            check_identifier(option, value)
        check_text("--cursor", cursor)
        bind = _check_hash("--bind", bind)
        max_phase_us = _max_phase_us(max_phase)
        # The handoff file is always read and checked first, before any comparison
        # with an existing phase (SPEC §4.2).
        handoff_check = _handoff_input(handoff, handoff_sha256)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            at_us = parse_at(event_at)
            state = self._goal_hosts(txn.state, goal)
            request = ContinueRequest(
                lane=lane,
                bind=bind,
                deadline_us=_deadline_us(deadline, event_at),
                session=session,
                profile=profile,
                cursor=cursor,
                handoff=handoff_check,
                max_phase_us=max_phase_us,
            )
            readiness = capacity_readiness(txn.state, goal, at_us)
            decision = hosts.decide_continue(state, request, at_us, readiness)
            pending = conclude(txn, goal, event_at, decision)
        detail = decision.detail
        if not decision.ok:
            refusal: PhaseRefusal = {
                "ok": False,
                "appended": False,
                "reasons": list(decision.reasons),
                "lane": lane,
                "bind": bind,
                "deadline": format_us(request.deadline_us),
                "at": event_at,
            }
            if detail.phase is not None:
                refusal["existing_phase"] = existing = phase_json(detail.phase)
                if R.PHASE_EXISTS_WITH_DIFFERENT_REQUEST in decision.reasons:
                    attempt_state = detail.attempt
                    refusal["differences"] = _differences(
                        {
                            **existing,
                            "cursor": None if attempt_state is None else attempt_state.cursor,
                        },
                        {
                            "lane": lane,
                            "deadline": format_us(request.deadline_us),
                            "session": session,
                            "profile": profile,
                            "handoff_sha256": _handoff_sha(handoff_check),
                            "cursor": cursor,
                        },
                    )
            return refusal
        if pending is None:
            assert detail.phase is not None
            answer = _phase_answer(detail.phase, None)
            # A replay never erases what happened since: a later failure of the
            # continued phase is kept and reported here.
            lane_state = state.lanes.get(lane)
            answer["last_failure"] = failure_json(state, hosts.last_failure(state, lane_state))
            return answer
        return _phase_answer(_find_phase(self.journal.state, goal, lane, detail.number), pending)

    def host_stop(self, *, goal: str, clear: bool = False, at: str | None = None) -> StopAnswer:
        """Request (or clear) a stop: no lane of the goal starts or continues meanwhile."""
        check_identifier("--goal", goal)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            decision = hosts.decide_stop(txn.state.hosts.goals.get(goal), clear=clear)
            pending = conclude(txn, goal, event_at, decision)
        if pending is None:  # already in the requested state: nothing appended
            return {"ok": True, "appended": False, "idempotent": True, "stop": not clear}
        return {
            "ok": True,
            "appended": True,
            "idempotent": False,
            "stop": not clear,
            **event_part(pending),
        }

    def host_replan(
        self, *, goal: str, lane: str, replan: str, action: str, at: str | None = None
    ) -> ReplanAnswer | ReplanRefusal:
        """Open or settle a replan; an open replan holds its lane (start and continue)."""
        check_identifier("--goal", goal)
        check_identifier("--lane", lane)
        check_identifier("--replan", replan)
        if action not in ("open", "settle"):
            raise InvalidInput("give --open or --settle", code=codes.INVALID_OPTION)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = txn.state.hosts.goals.get(goal)
            decision = hosts.decide_replan(state, lane, replan, cast("hosts.ReplanAction", action))
            pending = conclude(txn, goal, event_at, decision)
        if not decision.ok:
            return {
                "ok": False,
                "appended": False,
                "reasons": list(decision.reasons),
                "lane": lane,
                "replan": replan,
            }
        if pending is None:
            assert decision.detail is not None
            return _replan_result(lane, decision.detail, appended=False)
        lane_after = self._goal_hosts(self.journal.state, goal).lanes[lane]
        return {
            **_replan_result(lane, lane_after.replans[replan], appended=True),
            **event_part(pending),
        }

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

    def host_heartbeat(
        self, *, goal: str, lane: str, session: str, at: str | None = None
    ) -> HeartbeatAnswer:
        """The lane's current phase and, until a completed return confirms it, the handoff."""
        check_identifier("--goal", goal)
        check_identifier("--lane", lane)
        check_identifier("--session", session)
        ledger, _at_us = self._reader_state(goal, at)
        state = self._goal_hosts(ledger, goal)
        phase = hosts.current_phase(state.lanes.get(lane))
        if phase is None:
            return {"ok": False, "reasons": [R.NO_OPEN_PHASE], "phase": None, "handoff": None}
        phase_session = hosts.effective_session(state, phase)
        if phase_session is not None and phase_session != session:
            # The handoff belongs to the phase's session: never hand it to another.
            return {
                "ok": False,
                "reasons": [R.SESSION_MISMATCH],
                "phase": phase_json(phase),
                "handoff": None,
            }
        handoff: HandoffJson | None = None
        if hosts.unconfirmed_handoff(phase):
            handoff = {"sha256": phase.handoff_sha256, "content": phase.handoff_content}
        return {"ok": True, "phase": phase_json(phase), "handoff": handoff}

    def host_status(
        self,
        *,
        goal: str,
        lane: str | None = None,
        at: str | None = None,
        max_attempts: int = hosts.MAX_ATTEMPTS_DEFAULT,
    ) -> HostStatusAnswer:
        """Per lane: phases, attempts, holds, the last failure, and whether it may dispatch."""
        check_identifier("--goal", goal)
        if lane is not None:
            check_identifier("--lane", lane)
        if max_attempts < 1:
            raise InvalidInput("--max-attempts must be >= 1", code=codes.INVALID_OPTION)
        self.require_goal(goal)
        ledger, at_us = self._reader_state(goal, at)
        state = self._goal_hosts(ledger, goal)
        readiness = capacity_readiness(ledger, goal, at_us)
        names = [lane] if lane is not None else sorted(state.lanes)
        lanes = {name: _lane_json(state, name, at_us, readiness, max_attempts) for name in names}
        return {
            "ok": True,
            "goal": goal,
            "at": format_us(at_us),
            "stop": state.stop,
            "capacity_ready": readiness.capacity_ready,
            "lanes": lanes,
        }


# -- helpers --------------------------------------------------------------------------


def _handoff_sha(check: HandoffCheck | None) -> str | None:
    return None if check is None else check.sha256


def _find_phase(state: LedgerState, goal: str, lane: str, number: int) -> hosts.PhaseState:
    phases = state.hosts.goals[goal].lanes[lane].phases
    return next(p for p in reversed(phases) if p.phase == number)


def _phase_answer(phase: hosts.PhaseState, pending: PendingRecord | None) -> PhaseAnswer:
    """`host phase` / `host continue` that went ahead: appended, or a replay (None)."""
    answer: PhaseAnswer = {
        "ok": True,
        "appended": pending is not None,
        "idempotent": pending is None,
        "phase": phase_json(phase),
    }
    if pending is not None:
        answer["event"] = event_json(pending)
    return answer


def _return_result(
    attempt: hosts.AttemptState, *, appended: bool, idempotent: bool
) -> ReturnAnswer:
    return {
        "ok": True,
        "appended": appended,
        "idempotent": idempotent,
        # Operators bind this hash with `host continue --bind`.
        "hash": attempt.returned_hash,
        "attempt": attempt_json(attempt),
    }


def _replan_result(lane: str, replan: hosts.ReplanState, *, appended: bool) -> ReplanAnswer:
    return {
        "ok": True,
        "appended": appended,
        "idempotent": not appended,
        "lane": lane,
        "replan": replan_json(replan),
    }


def replan_json(replan: hosts.ReplanState) -> ReplanJson:
    return {
        "replan": replan.replan,
        "open": replan.open,
        "opened_at": replan.opened_at,
        "settled_at": replan.settled_at,
    }


def _lane_json(
    state: GoalHosts, name: str, at_us: int, readiness: Readiness, max_attempts: int
) -> LaneJson:
    lane = state.lanes.get(name)
    reasons = hosts.start_reasons(
        state, name, at_us, readiness, session=None, profile=None, max_attempts=max_attempts
    )
    attempts = [state.attempts[a] for a in lane.attempts] if lane is not None else []
    replans = list(lane.replans.values()) if lane is not None else []
    return {
        "phases": [phase_json(p) for p in lane.phases] if lane is not None else [],
        "attempts": [attempt_json(a) for a in attempts],
        "stop": state.stop,
        "stop_at": state.stop_at,
        "replans": [replan_json(r) for r in replans],
        "last_failure": failure_json(state, hosts.last_failure(state, lane)),
        "dispatchable": not reasons,
        "reasons": reasons,
    }


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
    return Readiness(
        capacity_ready=capacity.admission_ready(evaluation),
        has_token_gate=goal_capacity.tokens is not None,
    )
