"""`runledger demo` and `runledger bench`."""

import sys
from typing import Annotated

import typer

from commands.common import Ctx, command
from commands.output import Output, table
from journal import InvalidInput


def register(app: typer.Typer) -> None:
    @command(app, "bench", example="runledger bench --events 1000000 --compare sqlite --json")
    def bench(
        ctx: Ctx,
        events: Annotated[
            int, typer.Option("--events", help="Events in the large journal and batch run.")
        ] = 100_000,
        compare: Annotated[
            str | None, typer.Option("--compare", help="Also measure 'sqlite'.")
        ] = None,
        directory: Annotated[
            str | None,
            typer.Option("--dir", help="Where to write scratch journals [default: cwd]."),
        ] = None,
    ) -> Output:
        """Measure this machine: each figure beside its raw baseline and the ratio."""
        from commands.bench import run_bench

        if compare not in (None, "sqlite"):
            raise InvalidInput("--compare accepts only 'sqlite'", code="invalid_option")
        if not 1_000 <= events <= 10**8:
            raise InvalidInput("--events must be between 1000 and 10^8", code="invalid_option")

        def step(text: str) -> None:
            if sys.stderr.isatty() or not ctx.as_json:
                sys.stderr.write(f"bench: {text}\n")

        result = run_bench(
            events, compare_sqlite=compare == "sqlite", directory=directory, step=step
        )
        rows = [
            [name, f"{f['value']:,.1f} {f['unit']}", f"{f['baseline']:,.1f}", f"{f['ratio']:.2f}"]
            for name, f in result["figures"].items()
        ]
        return Output(result, text=table(rows, ["FIGURE", "VALUE", "BASELINE", "RATIO"]))
