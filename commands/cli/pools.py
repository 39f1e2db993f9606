"""Pool commands (SPEC §12.1): `pool configure` creates or changes a pool, a named
limit several goals share (a goal joins with `configure --pool`)."""

from typing import Annotated, Any

import typer

from quotaledger.cli.common import (
    AtOpt,
    CommandTable,
    Ctx,
    choice_option,
    duration_option,
    request_of,
)
from quotaledger.cli.config_options import CapTokensOpt, CapUsdOpt
from quotaledger.projections.capacity import CAP_UNITS, DIMENSIONS
from quotaledger.render.answers import output_of
from quotaledger.render.output import Output
from quotaledger.services.pools import PoolsService
from quotaledger.usecases.pools import PoolConfigureRequest, PoolsRequest

pool_commands = CommandTable()
commands = CommandTable()


def register(app: typer.Typer) -> None:
    """Add `pool configure` and `pools` to the quotaledger app."""
    pool = typer.Typer(help="Pools: one provider limit several goals share.", no_args_is_help=True)
    app.add_typer(pool, name="pool")
    pool_commands.add_to(pool)
    commands.add_to(app)


def _option(flag: str, text: str) -> Any:
    return typer.Option(flag, help=text, show_default=False)


def _limit(kind: str, dimension: str) -> Any:
    what = "the provider's quota" if kind == "quota" else "what to fill [default: 90% of quota]"
    return _option(f"--{kind}-{dimension}", f"{dimension}: {what}.")


@pool_commands(
    "configure",
    example="quotaledger pool configure --pool org --quota-tpm 1000000 --quota-rpm 5000",
)
def configure(
    ctx: Ctx,
    pool: Annotated[str, typer.Option("--pool", help="The pool's name (a goal's never).")],
    quota_tpm: Annotated[int | None, _limit("quota", "tpm")] = None,
    target_tpm: Annotated[int | None, _limit("target", "tpm")] = None,
    quota_itpm: Annotated[int | None, _limit("quota", "itpm")] = None,
    target_itpm: Annotated[int | None, _limit("target", "itpm")] = None,
    quota_otpm: Annotated[int | None, _limit("quota", "otpm")] = None,
    target_otpm: Annotated[int | None, _limit("target", "otpm")] = None,
    quota_rpm: Annotated[int | None, _limit("quota", "rpm")] = None,
    target_rpm: Annotated[int | None, _limit("target", "rpm")] = None,
    quota_tpd: Annotated[int | None, _limit("quota", "tpd")] = None,
    target_tpd: Annotated[int | None, _limit("target", "tpd")] = None,
    quota_rpd: Annotated[int | None, _limit("quota", "rpd")] = None,
    target_rpd: Annotated[int | None, _limit("target", "rpd")] = None,
    cached_input_weight: Annotated[
        float | None,
        _option(
            "--cached-input-weight", "How much a cached input token counts, 0-1 [default: 1.0]."
        ),
    ] = None,
    cooldown_base_s: Annotated[
        int | None,
        duration_option("--cooldown-base-s", "First cooldown after a member's 429 [15s]."),
    ] = None,
    cooldown_max_s: Annotated[
        int | None,
        duration_option("--cooldown-max-s", "Longest cooldown, Retry-After included [300s]."),
    ] = None,
    cap_tokens: CapTokensOpt = None,
    cap_usd: CapUsdOpt = None,
    cap_since: Annotated[
        str | None,
        _option("--cap-since", "Caps count from this time [default: when first configured]."),
    ] = None,
    remove_cap: Annotated[
        list[str] | None,
        choice_option("--remove-cap", CAP_UNITS, "Remove a spend cap (repeatable)."),
    ] = None,
    remove_limit: Annotated[
        list[str] | None,
        choice_option("--remove-limit", DIMENSIONS, "Remove a dimension (repeatable)."),
    ] = None,
    at: AtOpt = None,
) -> Output:
    """Create or change a pool: only the flags given change.

    Its members (configure --goal G --pool P --pool-share F) share every dimension's
    target by their shares, may borrow what others leave unused up to their borrowing
    limit, and never take what another member is guaranteed.
    """
    request = request_of(
        PoolConfigureRequest,
        dict(locals()),
        remove_cap=remove_cap or [],
        remove_limit=remove_limit or [],
    )
    with ctx.service(PoolsService, write=True) as ledger:
        answer = ledger.pool_configure(request)
    return output_of("pool_configure", request, answer, ctx.shown())


@commands("pools", example="quotaledger pools")
def pools(
    ctx: Ctx,
    at: Annotated[
        str | None, typer.Option("--at", help="The pools as of this time (RFC 3339).")
    ] = None,
) -> Output:
    """Show every pool: each dimension's load against its target, each member's share,
    load, borrowing and guaranteed part, the cooldown and the queue."""
    request = request_of(PoolsRequest, {"at": at})
    with ctx.service(PoolsService, write=False) as ledger:
        answer = ledger.pools(request)
    return output_of("pools", request, answer, ctx.shown())
