"""`quotaledger demo` and `quotaledger bench`."""

import sys
from typing import Annotated, Any

import typer

from quotaledger.cli.common import CommandTable, Ctx
from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.environment import JOURNAL_ENV
from quotaledger.render.output import Output, table

DEMO_JOURNAL = "./quotaledger-demo.jsonl"
WRITERS_MAX = 64
"""`bench --writers N`: at most this many writer processes."""
BenchDirOpt = Annotated[
    str | None, typer.Option("--dir", help="Where to write scratch journals [default: cwd].")
]
WritersOpt = Annotated[
    int | None,
    typer.Option(
        "--writers",
        help="Also measure N writer processes on one journal against one writer.",
        show_default=False,
    ),
]
DemoJournalOpt = Annotated[
    str | None,
    typer.Option(
        "--journal",
        help=f"Demo journal file ({JOURNAL_ENV} is ignored: the demo writes its own "
        "journal there) [default: ./quotaledger-demo.jsonl].",
        show_default=False,
    ),
]


ServeOpt = Annotated[
    bool,
    typer.Option(
        "--serve",
        help="Measure `quotaledger serve` against SQLite, Redis and the raw flock loop "
        "with N client processes (SPEC §9).",
    ),
]
RedisOpt = Annotated[
    str | None,
    typer.Option(
        "--redis",
        help="With --serve: this Redis (redis://...) instead of a private redis-server; "
        "its appendonly and appendfsync are restored afterwards.",
        show_default=False,
    ),
]
ClientsOpt = Annotated[
    list[int] | None,
    typer.Option("--clients", help="With --serve: the Ns measured [default: 1 12 32]."),
]
SecondsOpt = Annotated[
    float, typer.Option("--seconds", help="With --serve: seconds per system, N and round.")
]
RoundsOpt = Annotated[
    int, typer.Option("--rounds", help="With --serve: turns each system takes at each N.")
]


commands = CommandTable()


def register(app: typer.Typer) -> None:
    commands.add_to(app)


@commands(
    "demo",
    example="quotaledger demo --journal /tmp/demo.jsonl",
    journal_option=DemoJournalOpt,
    journal_default=DEMO_JOURNAL,
)
def demo(ctx: Ctx) -> Output:
    """Run a scripted, realistic session on a fresh embedded journal.

    Configure, usage, admissions until a refusal, a 429 with cooldown, releases,
    a quota failure continued on its session, a settlement resumed after a
    simulated crash; then `inspect` and the `audit` of the refusal.
    """
    from quotaledger.tools.demo import demo_text, run_demo

    if "://" in ctx.journal_target or ctx.journal_target.startswith("unix:"):
        raise InvalidInput(
            "demo runs on an embedded file journal, not a URL", code=codes.INVALID_OPTION
        )
    stream = sys.stderr if ctx.as_json else sys.stdout

    def say(text: str) -> None:
        stream.write(text + "\n")
        stream.flush()

    result = run_demo(ctx.journal_target, say)
    return Output(result, text=demo_text(result))


@commands(
    "bench",
    example="quotaledger bench --events 1000000 --compare sqlite "
    "--compare postgresql postgresql://postgres@127.0.0.1/test --json",
)
def bench(
    ctx: Ctx,
    url: Annotated[
        str | None,
        typer.Argument(
            help="The PostgreSQL server (postgresql://...) for --compare postgresql.",
            show_default=False,
        ),
    ] = None,
    events: Annotated[
        int, typer.Option("--events", help="Events in the large journal and batch run.")
    ] = 100_000,
    compare: Annotated[
        list[str] | None,
        typer.Option(
            "--compare", help="Also measure 'sqlite', and/or 'postgresql' on URL (repeatable)."
        ),
    ] = None,
    directory: BenchDirOpt = None,
    serve: ServeOpt = False,
    redis: RedisOpt = None,
    clients: ClientsOpt = None,
    seconds: SecondsOpt = 3.0,
    rounds: RoundsOpt = 2,
    writers: WritersOpt = None,
) -> Output:
    """Measure this machine: each figure beside its raw baseline, the ratio, and
    SPEC §9's target with whether this run met it."""
    from quotaledger.tools.bench_run import run_bench

    wanted = set(compare or ())
    if serve or redis is not None or clients:
        return _bench_serve(ctx, url, wanted, directory, redis, clients, (seconds, rounds), serve)
    if not wanted <= {"sqlite", "postgresql"}:
        raise InvalidInput("--compare accepts 'sqlite' and 'postgresql'", code=codes.INVALID_OPTION)
    if ("postgresql" in wanted) != (url is not None):
        raise InvalidInput(
            "--compare postgresql takes the server's URL (and a URL needs it)",
            code=codes.INVALID_OPTION,
        )
    if url is not None and not url.startswith(("postgresql://", "postgres://")):
        raise InvalidInput(f"{url!r} is not a postgresql:// URL", code=codes.INVALID_OPTION)
    if not 1_000 <= events <= 10**8:
        raise InvalidInput("--events must be between 1000 and 10^8", code=codes.INVALID_OPTION)
    if writers is not None and not 2 <= writers <= WRITERS_MAX:
        raise InvalidInput(f"--writers must be from 2 to {WRITERS_MAX}", code=codes.INVALID_OPTION)

    def step(text: str) -> None:
        if sys.stderr.isatty() or not ctx.as_json:
            sys.stderr.write(f"bench: {text}\n")

    result = run_bench(
        events,
        compare_sqlite="sqlite" in wanted,
        directory=directory,
        step=step,
        pg_url=url,
        writers=writers,
    )
    return Output(result, text=bench_text(result))


def _bench_serve(
    ctx: Ctx,
    url: str | None,
    wanted: set[str],
    directory: str | None,
    redis: str | None,
    clients: list[int] | None,
    timing: tuple[float, int],
    serve: bool,
) -> Output:
    """`bench --serve`: the server against SQLite, Redis and the raw loop (SPEC §9)."""
    if not serve:
        raise InvalidInput("--redis and --clients go with --serve", code=codes.INVALID_OPTION)
    if not wanted <= {"postgresql"} or (url is not None) != ("postgresql" in wanted):
        raise InvalidInput(
            "with --serve, --compare accepts only 'postgresql URL' (SQLite is always measured)",
            code=codes.INVALID_OPTION,
        )
    if url is not None and not url.startswith(("postgresql://", "postgres://")):
        raise InvalidInput(f"{url!r} is not a postgresql:// URL", code=codes.INVALID_OPTION)
    if redis is not None and not redis.startswith("redis://"):
        raise InvalidInput(f"--redis {redis!r} is not a redis:// URL", code=codes.INVALID_OPTION)
    if clients is not None and not all(1 <= n <= 256 for n in clients):
        raise InvalidInput("--clients must be from 1 to 256", code=codes.INVALID_OPTION)
    seconds, rounds = timing
    if not 0.05 <= seconds <= 600:
        raise InvalidInput("--seconds must be from 0.05 to 600", code=codes.INVALID_OPTION)
    if not 1 <= rounds <= 100:
        raise InvalidInput("--rounds must be from 1 to 100", code=codes.INVALID_OPTION)
    from quotaledger.tools.bench_serve import CLIENTS, run_bench_serve

    def say(text: str) -> None:
        if sys.stderr.isatty() or not ctx.as_json:
            sys.stderr.write(f"bench: {text}\n")
            sys.stderr.flush()

    result = run_bench_serve(
        clients=tuple(clients or CLIENTS),
        seconds=seconds,
        rounds=rounds,
        directory=directory,
        redis_url=redis,
        pg_url=url,
        say=say,
    )
    return Output(result, text=bench_serve_text(result))


def bench_serve_text(result: dict[str, Any]) -> str:
    """Each system's figures at each N, then the ratios against SPEC §9's targets."""

    def number(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    rows = [
        [
            at,
            name,
            number(m["events_per_s"]),
            number(m["p50_ms"], 2),
            number(m["p99_ms"], 2),
            number(m["max_ms"], 1),
            number(m["busiest_to_least"], 2),
            number(m["server_cpu_us_per_event"]),
        ]
        for at, systems in result["measurements"].items()
        for name, m in systems.items()
    ]
    head = ["N", "SYSTEM", "EVENTS/S", "P50 MS", "P99 MS", "MAX MS", "BUSIEST/LEAST",
            "SERVER CPU US/EVENT"]  # fmt: skip
    load = result["load"]
    api = result["in_process_api_eps"]
    return "\n".join(
        [
            f"load average {load['before']} before, {load['after']} after; "
            f"{result['cpus']} CPUs; {result['rounds']} x {result['seconds']:g} s per system",
            table(rows, head),
            f"in-process API: observe {api['observe']:,.1f} events/s, admit+release "
            f"{api['admit_release']:,.1f} events/s",
            "",
            bench_text(result),
        ]
    )


def _p50(ms: float | None) -> str:
    """A baseline's p50 latency, where it has one (the raw loops of durable figures)."""
    return "" if ms is None else f" (p50 {ms:,.3f} ms)"


def bench_text(result: dict[str, Any]) -> str:
    """One row per figure: value, baseline, ratio, SPEC §9's target and whether it was met."""

    def number(value: float | None, digits: int) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    met = {True: "yes", False: "NO", None: "-"}
    rows = [
        [
            name,
            f"{number(f['value'], 1)} {f['unit']}" + (" (stopped)" if f.get("timed_out") else ""),
            number(f["baseline"], 1) + _p50(f.get("baseline_p50_ms")),
            number(f["ratio"], 2),
            f.get("target") or "-",
            met[f.get("met")],
        ]
        for name, f in result["figures"].items()
    ]
    return table(rows, ["FIGURE", "VALUE", "BASELINE", "RATIO", "TARGET", "MET"])
