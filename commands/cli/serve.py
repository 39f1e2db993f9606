"""`quotaledger serve` (SPEC §11): the HTTP server, imported only when invoked."""

import sys
from typing import Annotated

import typer

from quotaledger.cli.common import CommandTable, Ctx
from quotaledger.cli.output import Output
from quotaledger.journal import InvalidInput, codes

commands = CommandTable()

DEFAULT_LISTEN = "127.0.0.1:8765"
MAX_BATCH_DEFAULT = 1024


def register(app: typer.Typer) -> None:
    commands.add_to(app)


@commands("serve", example="quotaledger serve --journal ledger.jsonl --listen 127.0.0.1:8765")
def serve(
    ctx: Ctx,
    listen: Annotated[
        str, typer.Option("--listen", help="HOST:PORT, or unix:PATH for a unix socket.")
    ] = DEFAULT_LISTEN,
    token_file: Annotated[
        str | None, typer.Option("--token-file", help="A file holding the bearer token.")
    ] = None,
    read_token_file: Annotated[
        str | None,
        typer.Option("--read-token-file", help="A file holding a token that may only read."),
    ] = None,
    max_batch: Annotated[
        int, typer.Option("--max-batch", help="Requests decided in one commit, at most.")
    ] = MAX_BATCH_DEFAULT,
    tls_cert: Annotated[str | None, typer.Option("--tls-cert", help="TLS certificate.")] = None,
    tls_key: Annotated[str | None, typer.Option("--tls-key", help="TLS private key.")] = None,
) -> Output:
    """Serve the journal over HTTP to many runners, committing their requests together.

    Every writer is POST /v1/COMMAND, every reader GET; the body is the --json answer.
    Listening on any address but loopback needs --token-file.
    """
    from quotaledger.server.auth import Tokens, read_token
    from quotaledger.server.listen import check_exposure, parse_address
    from quotaledger.server.run import serve as run_server

    address = parse_address(listen)
    check_exposure(address, token_file is not None)
    if max_batch < 1:
        raise InvalidInput("--max-batch must be at least 1", code=codes.INVALID_ARGUMENT)
    if (tls_cert is None) != (tls_key is None):
        raise InvalidInput("--tls-cert and --tls-key go together", code=codes.INVALID_USAGE)
    tokens = Tokens(
        read_token(token_file) if token_file else None,
        read_token(read_token_file) if read_token_file else None,
    )
    tls = (tls_cert, tls_key) if tls_cert and tls_key else None
    sys.stderr.write(f"quotaledger: serving {ctx.journal_target} on {address.shown()}\n")
    sys.stderr.flush()
    code = run_server(ctx.journal_target, address, tokens, max_batch, tls)
    answer = {"ok": code == 0, "listen": address.shown(), "exit_code": code}
    return Output(answer, text="quotaledger: stopped", exit_code=code)
