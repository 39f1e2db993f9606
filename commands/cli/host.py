"""Host continuation commands (SPEC §4): `quotaledger host phase|start|exit|return|...`."""

from typing import Annotated

import typer

from quotaledger.cli.common import (
    AtOpt,
    CommandTable,
    Ctx,
    GoalOpt,
    choice_option,
    request_of,
)
from quotaledger.journal import InvalidInput, codes
from quotaledger.projections.hosts import FAILURE_CODES, MAX_ATTEMPTS_DEFAULT, OUTCOMES
from quotaledger.render.answers import output_of
from quotaledger.render.output import Output
from quotaledger.services.host import HostService
from quotaledger.usecases.decode import CLI, decode
from quotaledger.usecases.host import (
    HostContinueRequest,
    HostExitRequest,
    HostHeartbeatRequest,
    HostPhaseRequest,
    HostReplanRequest,
    HostReturnRequest,
    HostStartRequest,
    HostStatusRequest,
    HostStopRequest,
)

LaneOpt = Annotated[str, typer.Option("--lane", help="Lane (one agent's line of work).")]
AttemptOpt = Annotated[str, typer.Option("--attempt", help="Attempt identifier.")]
SessionOpt = Annotated[str, typer.Option("--session", help="The agent session.")]
ProfileOpt = Annotated[str, typer.Option("--profile", help="The agent profile.")]
DeadlineOpt = Annotated[
    str,
    typer.Option(
        "--deadline",
        help="Phase deadline: RFC 3339, or +30m relative to the event time. "
        "A replayed continue compares absolute deadlines.",
    ),
]
HandoffOpt = Annotated[
    str | None,
    typer.Option("--handoff", help="Handoff file (regular file, UTF-8, <= 256 KiB)."),
]
HandoffShaOpt = Annotated[
    str | None,
    typer.Option("--handoff-sha256", help="SHA-256 the handoff file must have."),
]
MaxPhaseOpt = Annotated[
    str, typer.Option("--max-phase", help="Longest phase allowed (deadline_too_far beyond).")
]
MaxAttemptsOpt = Annotated[
    int,
    typer.Option(
        "--max-attempts", help="Attempts a phase may hold before a retryable failure stops it."
    ),
]
ReadAtOpt = Annotated[
    str | None, typer.Option("--at", help="Evaluate the state as of T (RFC 3339).")
]


commands = CommandTable()


def register(app: typer.Typer) -> None:
    """Add the `host` command group to the quotaledger app."""
    host = typer.Typer(
        help="Host continuation: lanes, phases, attempts, explicit continuation of failures.",
        no_args_is_help=True,
        rich_markup_mode=None,
    )
    app.add_typer(host, name="host")
    commands.add_to(host)


@commands(
    "phase",
    example="quotaledger host phase --goal g --lane l1 --deadline +2h --session s1 --profile p",
)
def phase(
    ctx: Ctx,
    goal: GoalOpt,
    lane: LaneOpt,
    deadline: DeadlineOpt,
    session: Annotated[str | None, typer.Option("--session", help="Bind a session.")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="Bind a profile.")] = None,
    handoff: HandoffOpt = None,
    handoff_sha256: HandoffShaOpt = None,
    max_phase: MaxPhaseOpt = "7d",
    at: AtOpt = None,
) -> Output:
    """Open a lane's first phase, or a further one after a completed attempt.

    A lane whose last attempt failed or was interrupted is refused lane_failed:
    it goes on only through `host continue`.
    """
    request = request_of(HostPhaseRequest, locals())
    with ctx.service(HostService, write=True) as ledger:
        answer = ledger.host_phase(request)
    return output_of("host_phase", request, answer, ctx.shown())


@commands(
    "start",
    example="quotaledger host start --goal g --lane l1 --attempt a1 --session s1 --profile p",
)
def start(
    ctx: Ctx,
    goal: GoalOpt,
    lane: LaneOpt,
    attempt: AttemptOpt,
    session: SessionOpt,
    profile: ProfileOpt,
    pid: Annotated[int | None, typer.Option("--pid", help="The attempt's process.")] = None,
    max_attempts: MaxAttemptsOpt = MAX_ATTEMPTS_DEFAULT,
    at: AtOpt = None,
) -> Output:
    """The dispatch gate: start an attempt, or refuse with every failing reason."""
    request = request_of(HostStartRequest, locals())
    with ctx.service(HostService, write=True) as ledger:
        answer = ledger.host_start(request)
    return output_of("host_start", request, answer, ctx.shown())


@commands("exit", example="quotaledger host exit --goal g --attempt a1 --exit-code 0")
def exit_(
    ctx: Ctx,
    goal: GoalOpt,
    attempt: AttemptOpt,
    exit_code: Annotated[
        int | None, typer.Option("--exit-code", help="The process's exit code.")
    ] = None,
    signal: Annotated[
        int | None, typer.Option("--signal", help="The signal that ended it.")
    ] = None,
    at: AtOpt = None,
) -> Output:
    """Record that the attempt's process was observed exited."""
    request = request_of(HostExitRequest, locals())
    with ctx.service(HostService, write=True) as ledger:
        answer = ledger.host_exit(request)
    return output_of("host_exit", request, answer, ctx.shown())


@commands(
    "return",
    example="quotaledger host return --goal g --attempt a1 --outcome failed "
    "--failure quota_exhausted --cursor turn-7",
)
def return_(
    ctx: Ctx,
    goal: GoalOpt,
    attempt: AttemptOpt,
    outcome: Annotated[str, choice_option("--outcome", OUTCOMES, "How the attempt ended.")],
    failure: Annotated[
        str | None,
        choice_option("--failure", FAILURE_CODES, "With --outcome failed: why."),
    ] = None,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Where the history stands.")
    ] = None,
    detail: Annotated[str | None, typer.Option("--detail", help="Failure detail.")] = None,
    at: AtOpt = None,
) -> Output:
    """Record the attempt's outcome; prints the event hash `host continue` binds."""
    request = request_of(HostReturnRequest, locals())
    with ctx.service(HostService, write=True) as ledger:
        answer = ledger.host_return(request)
    return output_of("host_return", request, answer, ctx.shown())


@commands(
    "continue",
    example="quotaledger host continue --goal g --lane l1 --bind 3f9a... --deadline +2h "
    "--session s1 --profile p --cursor turn-7",
)
def continue_(
    ctx: Ctx,
    goal: GoalOpt,
    lane: LaneOpt,
    bind: Annotated[str, typer.Option("--bind", help="Hash of the failed attempt's return event.")],
    deadline: DeadlineOpt,
    session: SessionOpt,
    profile: ProfileOpt,
    cursor: Annotated[str, typer.Option("--cursor", help="Cursor recorded at return.")],
    handoff: HandoffOpt = None,
    handoff_sha256: HandoffShaOpt = None,
    max_phase: MaxPhaseOpt = "7d",
    at: AtOpt = None,
) -> Output:
    """Continue one failed or interrupted attempt on its session, in a new finite phase.

    Replaying the same request returns the same phase (idempotent); any
    difference is refused phase_exists_with_different_request.
    """
    request = request_of(HostContinueRequest, locals())
    with ctx.service(HostService, write=True) as ledger:
        answer = ledger.host_continue(request)
    return output_of("host_continue", request, answer, ctx.shown())


@commands("heartbeat", example="quotaledger host heartbeat --goal g --lane l1 --session s1")
def heartbeat(
    ctx: Ctx, goal: GoalOpt, lane: LaneOpt, session: SessionOpt, at: ReadAtOpt = None
) -> Output:
    """The lane's current phase and its handoff until a completed return confirms it."""
    request = request_of(HostHeartbeatRequest, locals())
    with ctx.service(HostService, write=False) as ledger:
        answer = ledger.host_heartbeat(request)
    return output_of("host_heartbeat", request, answer, ctx.shown())


@commands("stop", example="quotaledger host stop --goal g")
def stop(
    ctx: Ctx,
    goal: GoalOpt,
    clear: Annotated[bool, typer.Option("--clear", help="Clear the stop.")] = False,
    at: AtOpt = None,
) -> Output:
    """Request a stop (no lane starts or continues), or clear it with --clear."""
    request = decode(HostStopRequest, {"goal": goal, "clear": clear, "at": at}, CLI)
    with ctx.service(HostService, write=True) as ledger:
        answer = ledger.host_stop(request)
    return output_of("host_stop", request, answer, ctx.shown())


REPLAN_ACTIONS = {"open_": "open", "settle": "settle"}
"""`host replan`'s flags that make its action, by parameter: exactly one is given.
A CLI client of a server reads them so too (cli/client_grammar.py)."""


@commands("replan", example="quotaledger host replan --goal g --lane l1 --replan r1 --open")
def replan(
    ctx: Ctx,
    goal: GoalOpt,
    lane: LaneOpt,
    replan: Annotated[str, typer.Option("--replan", help="Replan identifier.")],
    open_: Annotated[bool, typer.Option("--open", help="Open the replan.")] = False,
    settle: Annotated[bool, typer.Option("--settle", help="Settle the replan.")] = False,
    at: AtOpt = None,
) -> Output:
    """Open or settle a replan; an unsettled replan holds its lane."""
    given = {"open_": open_, "settle": settle}
    actions = [action for flag, action in REPLAN_ACTIONS.items() if given[flag]]
    if len(actions) != 1:
        raise InvalidInput("give exactly one of --open or --settle", code=codes.INVALID_OPTION)
    action = actions[0]
    values = {"goal": goal, "lane": lane, "replan": replan, "action": action, "at": at}
    request = decode(HostReplanRequest, values, CLI)
    with ctx.service(HostService, write=True) as ledger:
        answer = ledger.host_replan(request)
    return output_of("host_replan", request, answer, ctx.shown())


@commands("status", example="quotaledger host status --goal g --lane l1")
def status(
    ctx: Ctx,
    goal: GoalOpt,
    lane: Annotated[str | None, typer.Option("--lane", help="Only this lane.")] = None,
    max_attempts: MaxAttemptsOpt = MAX_ATTEMPTS_DEFAULT,
    at: ReadAtOpt = None,
) -> Output:
    """Per lane: phases, attempts, holds, the last failure, dispatchable and why not."""
    values = {"goal": goal, "lane": lane, "at": at, "max_attempts": max_attempts}
    request = decode(HostStatusRequest, values, CLI)
    with ctx.service(HostService, write=False) as ledger:
        answer = ledger.host_status(request)
    return output_of("host_status", request, answer, ctx.shown())


# -- human text (SPEC §8: one summary line, then a table where there is a list) ---------
