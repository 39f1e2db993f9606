"""Operator commands (SPEC §7): goals, audit, whatif, report, metrics."""

import json
import sys
from typing import Annotated, Any, NoReturn, TypeVar

import msgspec
import typer
from msgspec import UnsetType

from quotaledger.cli import readable
from quotaledger.cli.common import AtOpt, CommandTable, Ctx, GoalOpt, request_of
from quotaledger.cli.config_options import ConfigOptions, config_options
from quotaledger.cli.output import EXIT_OK, EXIT_REFUSED, Output, Shown, plural, table
from quotaledger.cli.per_event import cooldown_text, coverage_text
from quotaledger.cli.progress import progress_bar
from quotaledger.journal import InvalidInput, codes
from quotaledger.projections.reasons import CASE_GATE_REASONS
from quotaledger.services.operator import OperatorService, prometheus_text
from quotaledger.usecases.decode import CLI, decode
from quotaledger.usecases.operator import (
    AuditAnswer,
    AuditRequest,
    Explanation,
    GoalsAnswer,
    GoalsRequest,
    MetricsAnswer,
    MetricsRequest,
    ReportAnswer,
    ReportRequest,
    WhatifAnswer,
    WhatifRequest,
)

SinceOpt = Annotated[
    str | None, typer.Option("--since", help="Start of the range (RFC 3339).", show_default=False)
]
UntilOpt = Annotated[
    str | None, typer.Option("--until", help="End of the range (RFC 3339).", show_default=False)
]


def _opt(flag: str, text: str) -> Any:
    return typer.Option(flag, help=text, show_default=False)


def _size_hint(ledger: Any) -> int | None:
    journal = getattr(ledger, "journal", None)  # None: a server's client (no bar size)
    if journal is None:
        return None
    size: int | None = journal.store.size_hint(0, 0)
    return size


commands = CommandTable()


def register(app: typer.Typer) -> None:
    commands.add_to(app)


@commands("goals", example="quotaledger goals --journal runs.jsonl")
def goals(
    ctx: Ctx,
    at: Annotated[
        str | None, _opt("--at", "Evaluate as of this time (RFC 3339) [default: now].")
    ] = None,
) -> Output:
    """List every goal with an event: domains, gates, dimensions, active runs, last
    event time, whether a run would be admitted now, and the next action."""
    request = decode(GoalsRequest, {"at": at}, CLI)
    with ctx.service(OperatorService, write=False) as ledger:
        answer: GoalsAnswer = ledger.goals(request)
    return goals_output(request, answer, ctx.shown())


@commands("audit", example="quotaledger audit --journal runs.jsonl --seq 41")
def audit(
    ctx: Ctx,
    seq: Annotated[int | None, _opt("--seq", "The decision event's seq.")] = None,
    hash_: Annotated[str | None, _opt("--hash", "The decision event's hash.")] = None,
    goal: Annotated[
        str | None, _opt("--goal", "With --run: the latest decision for that run.")
    ] = None,
    run: Annotated[str | None, _opt("--run", "With --goal: the run.")] = None,
) -> Output:
    """Re-take a journaled decision on the state just before it, and explain it.

    Rebuilds the state from every record before the decision, runs the same
    decision function `admit` runs with the recorded request and time, and reports
    whether it reproduces the record (exit 0) or not (exit 1: the rules changed or
    the log was edited), the binding constraint, shortfall, window composition,
    reservations, cooldown, coverage and the earliest admissible time.
    """
    values = {"seq": seq, "hash": hash_, "goal": goal, "run": run}
    request = decode(AuditRequest, values, CLI)
    with ctx.service(OperatorService, write=False, fold=False) as ledger:
        answer: AuditAnswer = ledger.audit(request)
    return audit_output(request, answer, ctx.shown())


@commands(
    "whatif",
    example="quotaledger whatif --goal g --quota-tpm 200000 --target-tpm 180000 "
    "--since 2026-11-29T14:00:00Z",
)
@config_options(show_defaults=False)
def whatif(
    ctx: Ctx,
    goal: GoalOpt,
    config: ConfigOptions,
    since: SinceOpt = None,
    until: UntilOpt = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", help="State every assumption of the replay, the standing ones too."
        ),
    ] = False,
) -> Output:
    """Replay a goal's recorded admission requests under a changed config.

    Only the given fields change, on top of each recorded configure; observed
    usage stays as recorded. Lists the decisions that flip and the assumptions
    that differ from a plain replay (--verbose: every one; --json always has every
    one). Nothing is written.
    """
    values = {"goal": goal, "since": since, "until": until, **config}
    request = decode(WhatifRequest, values, CLI)
    with (
        ctx.service(OperatorService, write=False, fold=False) as ledger,
        progress_bar("whatif", _size_hint(ledger)) as progress,
    ):
        answer: WhatifAnswer = ledger.whatif(request, progress=progress)
    return whatif_output(request, answer, ctx.shown(verbose=verbose))


@commands("report", example="quotaledger report --goal g --out report.html")
def report(
    ctx: Ctx,
    goal: GoalOpt,
    out: Annotated[str, typer.Option("--out", help="The HTML file to write.")],
    since: SinceOpt = None,
    until: UntilOpt = None,
) -> Output:
    """Write one self-contained offline HTML report of a goal.

    Inline SVG charts (usage stacked by counter, reserved, target and quota lines,
    admission and refusal markers, cooldowns shaded) and the refusals table; no
    script, no external resource.
    """
    request = request_of(ReportRequest, locals())  # exit 2 before the journal is opened
    with (
        ctx.service(OperatorService, write=False, fold=False) as ledger,
        progress_bar("report", _size_hint(ledger)) as progress,
    ):
        answer: ReportAnswer = ledger.report(request, progress=progress)
    text = (
        f"wrote {answer.out} ({answer.bytes:,} bytes): {answer.admissions} "
        f"admissions, {answer.refusals} refusals, {answer.rejections} rejections, "
        f"{answer.points} chart points"
    )
    return Output(answer, text=text)


@commands(
    "metrics",
    example="quotaledger metrics --goal g --out /var/lib/node_exporter/quotaledger.prom",
)
def metrics(
    ctx: Ctx,
    goal: Annotated[str | None, _opt("--goal", "Only this goal.")] = None,
    out: Annotated[
        str | None,
        _opt("--out", "Write the exposition to FILE atomically (temp file, fsync, rename)."),
    ] = None,
    listen: Annotated[
        str | None,
        _opt(
            "--listen",
            "Serve GET /metrics on HOST:PORT (host 127.0.0.1 if omitted) for a Prometheus "
            "scrape, the journal folded afresh each time, until Ctrl-C.",
        ),
    ] = None,
    at: AtOpt = None,
) -> Output:
    """Print the current state in Prometheus text exposition format.

    For a node-exporter textfile collector, give --out FILE: it is replaced
    atomically, so a scrape never reads half a file (`> FILE` truncates it first).
    For a Prometheus scrape, --listen HOST:PORT serves it over HTTP until Ctrl-C.
    --json prints the same as a JSON object; --at T shows the state as of T.
    """
    if out is not None and listen is not None:
        raise InvalidInput(
            "give --out FILE or --listen HOST:PORT, not both", code=codes.INVALID_OPTION
        )
    # `--out` is checked here, before the journal is opened (exit 2).
    request = decode(MetricsRequest, {"goal": goal, "at": at, "out": out}, CLI)
    if listen is not None:
        _listen(ctx, listen, request)
    with ctx.service(OperatorService, write=False) as ledger:
        answer: MetricsAnswer = ledger.metrics(request)
    return metrics_output(request, answer, ctx.shown())


def _listen(ctx: Ctx, listen: str, request: MetricsRequest) -> NoReturn:
    """`metrics --listen`: each scrape opens the journal anew (a journal replaced by
    import or a repair is read as it is now) and renders what `metrics` prints."""
    from quotaledger.services import metrics_http

    host, port = metrics_http.parse_listen(listen)
    with ctx.service(OperatorService, write=False) as ledger:
        ledger.metrics(request)  # input errors (unknown_goal) before serving

    def render() -> str:
        with ctx.service(OperatorService, write=False) as ledger:
            return prometheus_text(ledger.metrics(request))

    def ready(url: str) -> None:
        if ctx.as_json:
            sys.stdout.write(json.dumps({"ok": True, "listening": url}) + "\n")
            sys.stdout.flush()
        sys.stderr.write(f"quotaledger: serving {url} (Ctrl-C stops)\n")
        sys.stderr.flush()

    metrics_http.serve(host, port, render, ready)
    raise typer.Exit(EXIT_OK)  # interrupted: the one JSON object was the "listening" line


# -- text renderings -----------------------------------------------------------------------


def goals_output(request: GoalsRequest, answer: GoalsAnswer, shown: Shown) -> Output:
    return Output(answer, text=goals_text(answer))


def audit_output(request: AuditRequest, answer: AuditAnswer, shown: Shown) -> Output:
    code = EXIT_OK if answer.reproduced else EXIT_REFUSED
    return Output(answer, text=audit_text(answer), exit_code=code)


def whatif_output(request: WhatifRequest, answer: WhatifAnswer, shown: Shown) -> Output:
    ranged = request.since is not None or request.until is not None
    return Output(answer, text=whatif_text(answer, verbose=shown.verbose, ranged=ranged))


def metrics_output(request: MetricsRequest, answer: MetricsAnswer, shown: Shown) -> Output:
    if request.out is not None:
        return Output(answer, text=f"wrote {request.out} ({answer.bytes:,} bytes)")
    return Output(answer, text=prometheus_text(answer))


NEVER = "never (had nothing else happened)"

T = TypeVar("T")


def _n(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    if isinstance(value, int | float):
        return f"{int(value):,}"
    return str(value)


def _given(value: T | UnsetType) -> T:
    """A capacity explanation's member (each is set in a capacity decision's audit)."""
    assert not isinstance(value, UnsetType)
    return value


def _verdict(admitted: bool, reasons: list[str]) -> str:
    return "admitted" if admitted else "refused: " + (", ".join(reasons) or "-")


def _binding_text(ex: Explanation, reasons: list[str]) -> str:
    """The binding constraint, and the token shortfall only beside a token reason: a
    refusal bound by the case gate says so alone, and the token gate's part (if it
    refused too) goes on its own line."""
    binding = ex.binding_constraint
    line = f"binding constraint: {binding or '-'}"
    shortfall = _given(ex.shortfall)
    if not isinstance(shortfall, dict):  # an answer from before dimensions: tpm's alone
        shortfall = {} if ex.shortfall_tpm is None else {"tpm": ex.shortfall_tpm}
    amount = readable.shortfall_text(shortfall, reasons, _n)
    if amount is None:
        return line
    token_reasons = [r for r in reasons if r not in CASE_GATE_REASONS]
    if binding in CASE_GATE_REASONS:
        return f"{line}\nalso refused by the token gate: {', '.join(token_reasons)}, {amount}"
    return f"{line}   {amount}"


def audit_text(answer: AuditAnswer) -> str:
    event, ex = answer.event, answer.explanation
    who = f"run {event.run}"
    if event.run is None:  # a settlement decision
        who = f"agent {_given(event.agent) or '-'}, turn {_given(event.turn) or '-'}"
    recorded, replayed = answer.recorded, answer.replayed
    lines = [
        f"audit of seq {event.seq} {event.kind} at {event.at} (goal {event.goal}, {who})",
        f"  recorded: {_verdict(recorded.admitted, recorded.reasons)}",
        f"  replayed: {_verdict(replayed.admitted, replayed.reasons)}",
    ]
    if answer.reproduced:
        lines.append("REPRODUCED: the same decision function gives the recorded answer.")
    else:
        bar = "!" * 72
        lines += [
            bar,
            "!!  NOT REPRODUCED: the replay differs from the journal.",
            "!!  The code's rules changed, or the log was edited (hashes recomputed).",
            bar,
        ]
        lines += [f"  - {difference}" for difference in answer.differences]
    if not isinstance(ex.settlement, UnsetType):
        lines.append(f"  binding constraint: {ex.binding_constraint or '-'}")
        return "\n".join(lines)
    return "\n".join([*lines, "", *_capacity_explanation_lines(ex, recorded.reasons)])


def _capacity_explanation_lines(ex: Explanation, reasons: list[str]) -> list[str]:
    usage, cases = _given(ex.usage), _given(ex.active_cases)
    coverage = {
        "last_observation_at": _given(ex.last_observation_at),
        "coverage": ex.coverage,
        "observation_stale": _given(ex.observation_stale),
    }
    dimensions = _given(ex.dimensions)
    tokens = bool(dimensions) or ex.target_tpm is not None  # the token gate is configured
    lines = [_binding_text(ex, reasons)]
    if tokens:
        parts = {"uncached": usage.uncached_input, "cached": usage.cached_input,
                 "output": usage.output}  # fmt: skip
        lines.append(f"usage {_n(ex.usage_tpm)} TPM ({readable.parts_text(parts, _n)})")
        lines += readable.decision_dimension_lines(ex, _n)
    state = [f"{coverage_text(coverage)}"] if tokens else []
    state.append(cooldown_text(ex.cooldown_until))
    state.append(
        f"active cases {cases.total} (target {_n(_given(ex.target_active_cases))}, "
        f"max {_n(_given(ex.max_active_cases))})"
    )
    lines += ["; ".join(state), f"earliest admissible at: {ex.earliest_admissible_at or NEVER}"]
    if ex.top_contributors:
        lines += ["", "window composition (top runs by usage):"]
        rows = [
            [
                c.run or "(no run)",
                _n(c.usage_tpm),
                "-" if c.share is None else f"{c.share:.0%}",
                str(c.sample_count),
                "yes" if c.active else "no",
                _n(c.forecast_tpm),
            ]
            for c in ex.top_contributors
        ]
        header = ["RUN", "USAGE_TPM", "SHARE", "SAMPLES", "ACTIVE", "FORECAST"]
        lines.append(table(rows, header))
    reservations = _given(ex.reservations)
    if reservations:
        lines += ["", "reservations (active runs):"]
        rows = [
            [
                r.run,
                r.arm or "-",
                r.run_class,
                _n(r.forecast_tpm),
                r.admitted_at,
                r.lease_until or "-",
            ]
            for r in reservations
        ]
        lines.append(table(rows, ["RUN", "ARM", "CLASS", "FORECAST", "ADMITTED_AT", "LEASE_UNTIL"]))
    return lines


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def goals_text(answer: GoalsAnswer) -> str:
    goals = answer.goals
    if not goals:
        return "no goals"
    rows = [
        [
            name,
            ",".join(g.domains) or "-",
            ",".join(gate for gate, on in msgspec.structs.asdict(g.gates).items() if on) or "-",
            ",".join(g.dimensions) or "-",
            str(g.active_runs),
            g.last_event_at,
            _yes(g.admission_ready),
            g.next_action,
        ]
        for name, g in goals.items()
    ]
    header = ["GOAL", "DOMAINS", "GATES", "DIMENSIONS", "ACTIVE", "LAST_EVENT", "READY"]
    return "\n".join([plural(len(goals), "goal"), table(rows, [*header, "NEXT_ACTION"])])


def whatif_text(answer: WhatifAnswer, *, verbose: bool = False, ranged: bool = True) -> str:
    flips = answer.flips
    lines = [
        f"whatif for goal {answer.goal}: {plural(answer.decisions, 'decision')} "
        f"replayed, {plural(len(flips), 'flip')}",
    ]
    if flips:
        rows = [
            [
                str(f.seq),
                f.at,
                f.run,
                "admitted" if f.recorded_admitted else "refused",
                "admitted" if f.whatif_admitted else "refused",
                ", ".join(f.whatif_reasons) or "-",
            ]
            for f in flips
        ]
        lines.append(table(rows, ["SEQ", "AT", "RUN", "RECORDED", "WHATIF", "WHATIF_REASONS"]))
    lines += ["", "assumptions:"] + [
        f"  - {a}" for a in stated_assumptions(answer, verbose, ranged)
    ]
    return "\n".join(lines)


def stated_assumptions(answer: WhatifAnswer, verbose: bool, ranged: bool) -> list[str]:
    """The config changes, the range when one was given, and how many standing
    assumptions (the same for every replay) --verbose would add."""
    if verbose:
        return answer.assumptions
    # `WhatIf.assumptions` lists the config changes first, the range second, then
    # the assumptions every replay makes.
    stated = answer.assumptions[:1]
    if ranged:  # --since / --until given: the range is not the whole history
        stated += answer.assumptions[1:2]
    standing = len(answer.assumptions) - len(stated)
    return [*stated, f"{standing} standing assumptions of every replay: --verbose states them"]
