"""Operator commands (SPEC §7, §13.2): goals, audit, whatif, report, metrics, validity."""

import json
import sys
from typing import Annotated, Any, NoReturn

import typer

from quotaledger.cli.common import AtOpt, CommandTable, Ctx, request_of
from quotaledger.cli.config_options import (
    CapTokensOpt,
    CapUsdOpt,
    ConfigOptions,
    config_options,
)
from quotaledger.cli.progress import progress_bar
from quotaledger.cli.request_options import RequestOptions, request_options
from quotaledger.journal import InvalidInput, codes
from quotaledger.render.answers import output_of
from quotaledger.render.outcome import EXIT_OK
from quotaledger.render.output import Output
from quotaledger.render.prometheus import prometheus_text
from quotaledger.services.operator import OperatorService
from quotaledger.usecases.decode import CLI, decode
from quotaledger.usecases.operator import (
    AuditAnswer,
    AuditRequest,
    GoalsAnswer,
    GoalsRequest,
    MetricsAnswer,
    MetricsRequest,
    ReportAnswer,
    ReportRequest,
    ValidityAnswer,
    ValidityRequest,
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
    return output_of("goals", request, answer, ctx.shown())


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
    return output_of("audit", request, answer, ctx.shown())


PriceModelOpt = Annotated[
    str | None,
    typer.Option(
        "--price-model",
        help="What if this model had been priced so from the start of the replay "
        "(with --input-usd-per-mtok and --output-usd-per-mtok, as price set).",
    ),
]
InputUsdOpt = Annotated[
    float | None,
    typer.Option("--input-usd-per-mtok", help="With --price-model: per million input."),
]
OutputUsdOpt = Annotated[
    float | None,
    typer.Option("--output-usd-per-mtok", help="With --price-model: per million output."),
]
CachedInputUsdOpt = Annotated[
    float | None,
    typer.Option(
        "--cached-input-usd-per-mtok",
        help="With --price-model: per million cached input [default: the input price].",
    ),
]
CacheWriteUsdOpt = Annotated[
    float | None,
    typer.Option(
        "--cache-write-usd-per-mtok",
        help="With --price-model: per million cache writes [default: the input price].",
    ),
]


@commands(
    "whatif",
    example="quotaledger whatif --goal g --quota-tpm 200000 --target-tpm 180000 "
    "--since 2026-11-29T14:00:00Z",
)
@config_options(show_defaults=False)
def whatif(
    ctx: Ctx,
    config: ConfigOptions,
    goal: Annotated[
        str | None, typer.Option("--goal", help="The goal to replay (or --pool).")
    ] = None,
    pool: Annotated[
        str | None,
        typer.Option("--pool", help="Replay every member of this pool instead (its limits)."),
    ] = None,
    share: Annotated[
        list[str] | None,
        typer.Option("--share", help="With --pool: G=F, member G's share F (repeatable)."),
    ] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    cap_tokens: CapTokensOpt = None,
    cap_usd: CapUsdOpt = None,
    price_model: PriceModelOpt = None,
    input_usd_per_mtok: InputUsdOpt = None,
    output_usd_per_mtok: OutputUsdOpt = None,
    cached_input_usd_per_mtok: CachedInputUsdOpt = None,
    cache_write_usd_per_mtok: CacheWriteUsdOpt = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", help="State every assumption of the replay, the standing ones too."
        ),
    ] = False,
) -> Output:
    """Replay a goal's recorded admission requests under a changed config or caps.

    Only the given fields change, on top of each recorded configure; observed
    usage stays as recorded. Lists the decisions that flip and the assumptions
    that differ from a plain replay (--verbose: every one; --json always has every
    one). Nothing is written.
    """
    values = {"goal": goal, "since": since, "until": until, **config}
    values |= {"cap_tokens": cap_tokens, "cap_usd": cap_usd, "pool": pool, "share": share or []}
    values |= {
        "price_model": price_model,
        "input_usd_per_mtok": input_usd_per_mtok,
        "output_usd_per_mtok": output_usd_per_mtok,
        "cached_input_usd_per_mtok": cached_input_usd_per_mtok,
        "cache_write_usd_per_mtok": cache_write_usd_per_mtok,
    }
    request = decode(WhatifRequest, values, CLI)
    with (
        ctx.service(OperatorService, write=False, fold=False) as ledger,
        progress_bar("whatif", _size_hint(ledger)) as progress,
    ):
        answer: WhatifAnswer = ledger.whatif(request, progress=progress)
    return output_of("whatif", request, answer, ctx.shown(verbose=verbose))


@commands("report", example="quotaledger report --goal g --out report.html")
def report(
    ctx: Ctx,
    out: Annotated[str, typer.Option("--out", help="The HTML file to write.")],
    goal: Annotated[
        str | None, typer.Option("--goal", help="The goal to report on (or --pool).")
    ] = None,
    pool: Annotated[
        str | None,
        typer.Option("--pool", help="Report on this pool: each dimension's load by goal."),
    ] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
) -> Output:
    """Write one self-contained offline HTML report of a goal or a pool.

    Inline SVG charts (usage stacked by counter, reserved, target and quota lines,
    admission and refusal markers, cooldowns shaded) and the refusals table; with
    --pool, each pool dimension's load stacked by member goal against the pool's
    target. No script, no external resource.
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
    return output_of("metrics", request, answer, ctx.shown())


@commands("validity", example="quotaledger validity --goal g --json")
@request_options(ValidityRequest)
def validity(ctx: Ctx, options: RequestOptions) -> Output:
    """Which results quota touched: one row per run of the goal and its verdict.

    A run's verdict is the first that applies: never_admitted (queued, refused or
    only observed), quota_failed (its host lane's last attempt failed
    quota_exhausted), continued (a quota failure of its lane was continued and the
    last attempt did not fail on quota), throttled (a 429 named it while it was
    active: its result may carry retries, timeouts or truncation), clean. --since and
    --until keep the runs whose first event falls in the range; --json prints one
    object with `counts` and `runs`, which join an inspect_ai log by sample uuid.
    """
    request = decode(ValidityRequest, options, CLI)
    with (
        ctx.service(OperatorService, write=False, fold=False) as ledger,
        progress_bar("validity", _size_hint(ledger)) as progress,
    ):
        answer: ValidityAnswer = ledger.validity(request, progress=progress)
    return output_of("validity", request, answer, ctx.shown())


def _listen(ctx: Ctx, listen: str, request: MetricsRequest) -> NoReturn:
    """`metrics --listen`: each scrape opens the journal anew (a journal replaced by
    import or a repair is read as it is now) and renders what `metrics` prints."""
    from quotaledger.server import metrics_listen

    host, port = metrics_listen.parse_listen(listen)
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

    metrics_listen.serve(host, port, render, ready)
    raise typer.Exit(EXIT_OK)  # interrupted: the one JSON object was the "listening" line


# -- text renderings -----------------------------------------------------------------------
