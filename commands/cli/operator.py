"""Operator commands (SPEC §7): goals, audit, whatif, report, metrics."""

import json
import sys
from typing import Annotated, Any, NoReturn

import typer

from quotaledger.cli.common import AtOpt, CommandTable, Ctx, GoalOpt
from quotaledger.cli.config_options import config_options
from quotaledger.cli.output import EXIT_OK, EXIT_REFUSED, Output, plural, table
from quotaledger.cli.progress import progress_bar
from quotaledger.cli.runner import coverage_text
from quotaledger.journal import InvalidInput, codes
from quotaledger.projections.configfields import ConfigFields
from quotaledger.projections.reasons import CASE_GATE_REASONS
from quotaledger.services.operator import OperatorService
from quotaledger.services.outfile import check_out_path

SinceOpt = Annotated[
    str | None, typer.Option("--since", help="Start of the range (RFC 3339).", show_default=False)
]
UntilOpt = Annotated[
    str | None, typer.Option("--until", help="End of the range (RFC 3339).", show_default=False)
]


def _opt(flag: str, text: str) -> Any:
    return typer.Option(flag, help=text, show_default=False)


def _size_hint(ledger: Any) -> int | None:
    size: int | None = ledger.journal.store.size_hint(0, 0)
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
    with ctx.service(OperatorService, write=False) as ledger:
        result = ledger.goals(at=at)
    return Output(result, text=goals_text(result))


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
    with ctx.service(OperatorService, write=False, fold=False) as ledger:
        result = ledger.audit(seq=seq, hash=hash_, goal=goal, run=run)
    code = EXIT_OK if result["reproduced"] else EXIT_REFUSED
    return Output(result, text=audit_text(result), exit_code=code)


@commands(
    "whatif",
    example="quotaledger whatif --goal g --quota-tpm 200000 --target-tpm 180000 "
    "--since 2026-11-29T14:00:00Z",
)
@config_options(show_defaults=False)
def whatif(
    ctx: Ctx,
    goal: GoalOpt,
    config: ConfigFields,
    since: SinceOpt = None,
    until: UntilOpt = None,
) -> Output:
    """Replay a goal's recorded admission requests under a changed config.

    Only the given fields change, on top of each recorded configure; observed
    usage stays as recorded. Lists the decisions that flip and states every
    assumption. Nothing is written.
    """
    with (
        ctx.service(OperatorService, write=False, fold=False) as ledger,
        progress_bar("whatif", _size_hint(ledger)) as progress,
    ):
        result = ledger.whatif(goal=goal, since=since, until=until, progress=progress, **config)
    return Output(result, text=whatif_text(result))


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
    check_out_path("--out", out)  # exit 2 before the journal is opened
    with (
        ctx.service(OperatorService, write=False, fold=False) as ledger,
        progress_bar("report", _size_hint(ledger)) as progress,
    ):
        result = ledger.report(goal=goal, out=out, since=since, until=until, progress=progress)
    text = (
        f"wrote {result['out']} ({result['bytes']:,} bytes): {result['admissions']} "
        f"admissions, {result['refusals']} refusals, {result['rejections']} rejections, "
        f"{result['points']} chart points"
    )
    return Output(result, text=text)


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
    from quotaledger.services.operator import OperatorService, prometheus_text

    if out is not None and listen is not None:
        raise InvalidInput(
            "give --out FILE or --listen HOST:PORT, not both", code=codes.INVALID_OPTION
        )
    if listen is not None:
        _listen(ctx, listen, goal, at)
    if out is not None:
        check_out_path("--out", out)  # exit 2 before the journal is opened
    with ctx.service(OperatorService, write=False) as ledger:
        result = ledger.metrics(goal=goal, at=at, out=out)
    if out is not None:
        return Output(result, text=f"wrote {out} ({result['bytes']:,} bytes)")
    return Output(result, text=prometheus_text(result))


def _listen(ctx: Ctx, listen: str, goal: str | None, at: str | None) -> NoReturn:
    """`metrics --listen`: each scrape opens the journal anew (a journal replaced by
    import or a repair is read as it is now) and renders what `metrics` prints."""
    from quotaledger.services import metrics_http
    from quotaledger.services.operator import prometheus_text

    host, port = metrics_http.parse_listen(listen)
    with ctx.service(OperatorService, write=False) as ledger:
        ledger.metrics(goal=goal, at=at)  # input errors (unknown_goal) before serving

    def render() -> str:
        with ctx.service(OperatorService, write=False) as ledger:
            return prometheus_text(ledger.metrics(goal=goal, at=at))

    def ready(url: str) -> None:
        if ctx.as_json:
            sys.stdout.write(json.dumps({"ok": True, "listening": url}) + "\n")
            sys.stdout.flush()
        sys.stderr.write(f"quotaledger: serving {url} (Ctrl-C stops)\n")
        sys.stderr.flush()

    metrics_http.serve(host, port, render, ready)
    raise typer.Exit(EXIT_OK)  # interrupted: the one JSON object was the "listening" line


# -- text renderings -----------------------------------------------------------------------


NEVER = "never (had nothing else happened)"


def _n(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    if isinstance(value, int | float):
        return f"{int(value):,}"
    return str(value)


def _verdict(admitted: bool, reasons: list[str]) -> str:
    return "admitted" if admitted else "refused: " + (", ".join(reasons) or "-")


def _binding_text(ex: dict[str, Any], reasons: list[str]) -> str:
    """The binding constraint, and the token shortfall only beside a token reason: a
    refusal bound by the case gate says so alone, and the token gate's part (if it
    refused too) goes on its own line."""
    binding = ex["binding_constraint"]
    line = f"binding constraint: {binding or '-'}"
    shortfall = ex["shortfall_tpm"]
    if shortfall is None:
        return line
    amount = f"shortfall {_n(shortfall)} TPM" + (
        " (the forecast fits the headroom)" if shortfall <= 0 else ""
    )
    token_reasons = [r for r in reasons if r not in CASE_GATE_REASONS]
    if binding in CASE_GATE_REASONS:
        return f"{line}\nalso refused by the token gate: {', '.join(token_reasons)}, {amount}"
    return f"{line}   {amount}"


def audit_text(result: dict[str, Any]) -> str:
    event, ex = result["event"], result["explanation"]
    who = f"run {event['run']}"
    if event["run"] is None:  # a settlement decision
        who = f"agent {event.get('agent') or '-'}, turn {event.get('turn') or '-'}"
    lines = [
        f"audit of seq {event['seq']} {event['kind']} at {event['at']} "
        f"(goal {event['goal']}, {who})",
        f"  recorded: {_verdict(result['recorded']['admitted'], result['recorded']['reasons'])}",
        f"  replayed: {_verdict(result['replayed']['admitted'], result['replayed']['reasons'])}",
    ]
    if result["reproduced"]:
        lines.append("REPRODUCED: the same decision function gives the recorded answer.")
    else:
        bar = "!" * 72
        lines += [
            bar,
            "!!  NOT REPRODUCED: the replay differs from the journal.",
            "!!  The code's rules changed, or the log was edited (hashes recomputed).",
            bar,
        ]
        lines += [f"  - {difference}" for difference in result["differences"]]
    if "settlement" in ex:
        lines.append(f"  binding constraint: {ex['binding_constraint'] or '-'}")
        return "\n".join(lines)
    lines += [
        "",
        _binding_text(ex, result["recorded"]["reasons"]),
        f"usage {_n(ex['usage_tpm'])} TPM (uncached {_n(ex['usage']['uncached_input'])}, "
        f"cached {_n(ex['usage']['cached_input'])}, output {_n(ex['usage']['output'])}); "
        f"reserved {_n(ex['reserved_tpm'])}; load {_n(ex['load_tpm'])}; "
        f"target {_n(ex['target_tpm'])}; forecast {_n(ex['forecast_tpm'])}",
        f"{coverage_text(ex)}; cooldown until {ex['cooldown_until'] or '-'}; active cases "
        f"{ex['active_cases']['total']} (target {_n(ex['target_active_cases'])}, "
        f"max {_n(ex['max_active_cases'])})",
        f"earliest admissible at: {ex['earliest_admissible_at'] or NEVER}",
    ]
    if ex["top_contributors"]:
        lines += ["", "window composition (top runs by usage):"]
        rows = [
            [
                c["run"] or "(no run)",
                _n(c["usage_tpm"]),
                "-" if c["share"] is None else f"{c['share']:.0%}",
                str(c["sample_count"]),
                "yes" if c["active"] else "no",
                _n(c["forecast_tpm"]),
            ]
            for c in ex["top_contributors"]
        ]
        header = ["RUN", "USAGE_TPM", "SHARE", "SAMPLES", "ACTIVE", "FORECAST"]
        lines.append(table(rows, header))
    if ex["reservations"]:
        lines += ["", "reservations (active runs):"]
        rows = [
            [
                r["run"],
                r["arm"] or "-",
                r["class"],
                _n(r["forecast_tpm"]),
                r["admitted_at"],
                r["lease_until"] or "-",
            ]
            for r in ex["reservations"]
        ]
        lines.append(table(rows, ["RUN", "ARM", "CLASS", "FORECAST", "ADMITTED_AT", "LEASE_UNTIL"]))
    return "\n".join(lines)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def goals_text(result: dict[str, Any]) -> str:
    goals = result["goals"]
    if not goals:
        return "no goals"
    rows = [
        [
            name,
            ",".join(g["domains"]) or "-",
            ",".join(gate for gate, on in g["gates"].items() if on) or "-",
            ",".join(g["dimensions"]) or "-",
            str(g["active_runs"]),
            g["last_event_at"],
            _yes(g["admission_ready"]),
            g["next_action"],
        ]
        for name, g in goals.items()
    ]
    header = ["GOAL", "DOMAINS", "GATES", "DIMENSIONS", "ACTIVE", "LAST_EVENT", "READY"]
    return "\n".join([plural(len(goals), "goal"), table(rows, [*header, "NEXT_ACTION"])])


def whatif_text(result: dict[str, Any]) -> str:
    flips = result["flips"]
    lines = [
        f"whatif for goal {result['goal']}: {plural(result['decisions'], 'decision')} "
        f"replayed, {plural(len(flips), 'flip')}",
    ]
    if flips:
        rows = [
            [
                str(f["seq"]),
                f["at"],
                f["run"],
                "admitted" if f["recorded_admitted"] else "refused",
                "admitted" if f["whatif_admitted"] else "refused",
                ", ".join(f["whatif_reasons"]) or "-",
            ]
            for f in flips
        ]
        lines.append(table(rows, ["SEQ", "AT", "RUN", "RECORDED", "WHATIF", "WHATIF_REASONS"]))
    lines += ["", "assumptions:"] + [f"  - {a}" for a in result["assumptions"]]
    return "\n".join(lines)
