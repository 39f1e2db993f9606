"""What the host continuation commands print (SPEC §4)."""

from __future__ import annotations

import functools

from msgspec import UnsetType

from quotaledger.render import followup
from quotaledger.render.output import Output, Shown, plural, table
from quotaledger.usecases.decode import Event
from quotaledger.usecases.host import (
    AttemptAnswer,
    HostHeartbeatAnswer,
    HostPhaseAnswer,
    HostReplanAnswer,
    HostReturnRequest,
    HostStatusAnswer,
    HostStatusRequest,
    HostStopAnswer,
    Lane,
    LaneFailure,
    Phase,
)


def return_output(request: HostReturnRequest, answer: AttemptAnswer, shown: Shown) -> Output:
    journal = followup.journal_words(shown.journal_target)
    text = attempt_text(answer, "return", goal=request.goal, journal=journal)
    return Output(answer, text=text)


def status_output(request: HostStatusRequest, answer: HostStatusAnswer, shown: Shown) -> Output:
    return Output(answer, text=status_text(answer, followup.journal_words(shown.journal_target)))


def _refused(what: str, reasons: list[str] | UnsetType) -> str:
    return f"REFUSED {what}: {', '.join(reasons if isinstance(reasons, list) else [])}"


def _seq(answer: HostPhaseAnswer | AttemptAnswer | HostStopAnswer | HostReplanAnswer) -> str:
    if answer.appended and isinstance(answer.event, Event):
        return f" (seq {answer.event.seq})"
    return " (replay: nothing appended)" if answer.idempotent is True else ""


def phase_text(answer: HostPhaseAnswer, verb: str = "opened") -> str:
    if isinstance(answer.reasons, list):
        text = _refused(f"host {'continue' if verb == 'continued' else 'phase'}", answer.reasons)
        return text + _differences_text(answer)
    p = answer.phase
    assert isinstance(p, Phase)
    if answer.idempotent is True:
        verb = f"already {verb}"
    bound = f", bound to {p.bound}" if p.bound else ""
    handoff = f", handoff {p.handoff_sha256[:12]}…" if p.handoff_sha256 else ""
    return (
        f"{verb} phase {p.phase} of lane {p.lane}: deadline {p.deadline}, session "
        f"{p.session or '-'}, profile {p.profile or '-'}{bound}{handoff}{_seq(answer)}"
    )


def _differences_text(answer: HostPhaseAnswer) -> str:
    """Which input of a replay differs from the phase it would replay (both shown)."""
    differences = answer.differences if isinstance(answer.differences, dict) else {}
    existing = answer.existing_phase
    number = existing.phase if isinstance(existing, Phase) else "?"
    lines = [
        f"\n  {name} differs: phase {number} has {d.existing or '-'}, this request "
        f"{d.requested or '-'}"
        for name, d in differences.items()
    ]
    if "deadline" in differences:
        lines.append(
            "\n  (a relative deadline resolves against each command's time: replay with "
            f"--deadline {differences['deadline'].existing})"
        )
    return "".join(lines)


def attempt_text(
    answer: AttemptAnswer, command: str, *, goal: str = "", journal: list[str] | None = None
) -> str:
    a = answer.attempt
    if isinstance(a, str):
        return _refused(f"host {command} {a}".rstrip(), answer.reasons)
    if command == "start":
        head = f"started attempt {a.attempt} (#{a.number}) in phase {a.phase} of lane {a.lane}"
    elif command == "exit":
        how = f"signal {a.signal}" if a.signal is not None else f"exit code {a.exit_code}"
        head = f"attempt {a.attempt} exited, {how}"
    else:
        why = f" ({a.failure.code})" if a.failure else ""
        head = f"attempt {a.attempt} returned {a.outcome}{why}, cursor {a.cursor or '-'}"
    text = head + _seq(answer)
    if command == "return" and a.outcome != "completed" and a.returned_hash:
        line = followup.continue_line(goal, a, a.returned_hash, journal or [])
        text += f"\ncontinue it with (choose the deadline):\n  {line}"
    return text


def heartbeat_text(answer: HostHeartbeatAnswer) -> str:
    p = answer.phase
    reasons = answer.reasons if isinstance(answer.reasons, list) else []
    if p is None:
        return f"no open phase{': ' + ', '.join(reasons) if reasons else ''}"
    text = (
        f"lane {p.lane} phase {p.phase}: deadline {p.deadline}, session "
        f"{p.session or '-'}, profile {p.profile or '-'}"
    )
    if not answer.ok:  # the phase is shown for context; the heartbeat was refused
        return _refused("host heartbeat", reasons) + "\n" + text
    handoff = answer.handoff
    if handoff is not None:
        text += f"\nhandoff (sha256 {handoff.sha256}), until a completed return confirms it:\n"
        text += handoff.content or ""
    return text


def stop_text(answer: HostStopAnswer) -> str:
    state = "stop requested: no lane starts or continues" if answer.stop else "stop cleared"
    return state + _seq(answer)


def replan_text(answer: HostReplanAnswer) -> str:
    r = answer.replan
    if isinstance(r, str):
        return _refused("host replan", answer.reasons)
    state = "open (holds the lane)" if r.open else "settled"
    return f"replan {r.replan} of lane {answer.lane} {state}{_seq(answer)}"


def status_text(answer: HostStatusAnswer, journal: list[str] | None = None) -> str:
    lanes = answer.lanes
    ready = sum(1 for lane in lanes.values() if lane.dispatchable)
    head = (
        f"goal {answer.goal} as of {answer.at}: {plural(len(lanes), 'lane')}, "
        f"{ready} dispatchable"
        + ("; stop requested" if answer.stop else "")
        + ("" if answer.capacity_ready else "; capacity not ready")
    )
    if not lanes:
        return head
    rows = [_lane_row(name, lane) for name, lane in lanes.items()]
    failures = [
        (name, lane, failure)
        for name, lane, failure in ((n, lane, lane.last_failure) for n, lane in lanes.items())
        if failure is not None and failure.continued_by_phase is None
    ]
    header = ["LANE", "PHASE", "DEADLINE", "ATTEMPTS", "LAST_ATTEMPT", "DISPATCHABLE", "REASONS"]
    text = head + "\n" + table(rows, header)
    if failures:
        text += "\n\nfailures to continue (host continue --bind HASH):\n"
        text += table(
            [[n, f.attempt, str(f.code), str(f.hash)] for n, _, f in failures],
            ["LANE", "ATTEMPT", "FAILURE", "HASH"],
        )
        for _, lane, failure in failures:
            line = _continue_line(answer.goal, lane, failure, journal or [])
            text += (
                f"\ncontinue {failure.attempt} with (choose the deadline):\n  {line}"
                if line
                else ""
            )
    return text


def _continue_line(goal: str, lane: Lane, failure: LaneFailure, journal: list[str]) -> str:
    """The complete `host continue` of a lane's failure ("" when its return is unknown)."""
    attempt = next((a for a in lane.attempts if a.attempt == failure.attempt), None)
    if attempt is None or failure.hash is None:
        return ""
    return followup.continue_line(goal, attempt, failure.hash, journal)


def _lane_row(name: str, lane: Lane) -> list[str]:
    phase = lane.phases[-1] if lane.phases else None
    attempt = lane.attempts[-1] if lane.attempts else None
    last = "-"
    if attempt is not None:
        outcome = attempt.outcome or ("exited" if attempt.exited else "running")
        code = attempt.failure.code if attempt.failure else None
        last = f"{attempt.attempt} #{attempt.number} {outcome}" + (f" ({code})" if code else "")
    return [
        name,
        str(phase.phase) if phase else "-",
        phase.deadline if phase else "-",
        str(len(lane.attempts)),
        last,
        "yes" if lane.dispatchable else "no",
        ", ".join(lane.reasons) or "-",
    ]


# The texts of the use cases that print a general one (registry rows name them).
start_text = functools.partial(attempt_text, command="start")
exit_text = functools.partial(attempt_text, command="exit")
continue_text = functools.partial(phase_text, verb="continued")
