"""Price commands (SPEC §12.4): `price set` records a model's price from now on (a
journal-level event), `prices` shows every model's price in force."""

from typing import Annotated, Any

import typer

from quotaledger.cli.common import AtOpt, CommandTable, Ctx
from quotaledger.render.answers import output_of
from quotaledger.render.output import Output
from quotaledger.services.prices import PricesService
from quotaledger.usecases.decode import CLI, decode
from quotaledger.usecases.prices import PriceSetRequest, PricesRequest

price_commands = CommandTable()
commands = CommandTable()


def register(app: typer.Typer) -> None:
    """Add `price set` and `prices` to the quotaledger app."""
    price = typer.Typer(
        help="Model prices: what an observation's tokens cost.", no_args_is_help=True
    )
    app.add_typer(price, name="price")
    price_commands.add_to(price)
    commands.add_to(app)


def _usd_option(flag: str, text: str) -> Any:
    return typer.Option(flag, help=text, show_default=False)


@price_commands(
    "set",
    example="quotaledger price set --model gpt-4o --input-usd-per-mtok 2.5 "
    "--output-usd-per-mtok 10 --cached-input-usd-per-mtok 1.25",
)
def set_(
    ctx: Ctx,
    model: Annotated[
        str, typer.Option("--model", help="The model, as observations name it (--model).")
    ],
    input_usd_per_mtok: Annotated[
        float, _usd_option("--input-usd-per-mtok", "US dollars per million input tokens.")
    ],
    output_usd_per_mtok: Annotated[
        float, _usd_option("--output-usd-per-mtok", "US dollars per million output tokens.")
    ],
    cached_input_usd_per_mtok: Annotated[
        float | None,
        _usd_option(
            "--cached-input-usd-per-mtok",
            "Per million cached input tokens [default: the input price].",
        ),
    ] = None,
    cache_write_usd_per_mtok: Annotated[
        float | None,
        _usd_option(
            "--cache-write-usd-per-mtok",
            "Per million tokens written to a prompt cache [default: the input price].",
        ),
    ] = None,
    at: AtOpt = None,
) -> Output:
    """Set a model's price from now on: observations appended after it are priced by it.

    At most 6 decimals; the same price again appends nothing.
    """
    values = {name: value for name, value in locals().items() if name != "ctx"}
    request = decode(PriceSetRequest, values, CLI)
    with ctx.service(PricesService, write=True) as ledger:
        answer = ledger.price_set(request)
    return output_of("price_set", request, answer, ctx.shown())


@commands("prices", example="quotaledger prices")
def prices(
    ctx: Ctx,
    at: Annotated[
        str | None, typer.Option("--at", help="The prices in force at this time (RFC 3339).")
    ] = None,
) -> Output:
    """Show every priced model's price in force, with the record that set it."""
    request = decode(PricesRequest, {"at": at}, CLI)
    with ctx.service(PricesService, write=False) as ledger:
        answer = ledger.prices(request)
    return output_of("prices", request, answer, ctx.shown())
