"""`quotaledger serve`: the journal's server (SPEC §11; quotaledger.server)."""

from typing import Annotated

import typer

from quotaledger.cli.common import CommandTable, Ctx
from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.limits import MAX_BATCH_DEFAULT
from quotaledger.render.output import Output
from quotaledger.server import LISTEN_DEFAULT  # the package alone: no HTTP

commands = CommandTable()


def register(app: typer.Typer) -> None:
    commands.add_to(app)


@commands(
    "serve",
    example="quotaledger serve --journal runs.jsonl --listen 127.0.0.1:8765",
)
def serve(
    ctx: Ctx,
    listen: Annotated[
        str,
        typer.Option(
            "--listen",
            help="HOST:PORT or unix:PATH. Any address but loopback needs --token-file.",
        ),
    ] = LISTEN_DEFAULT,
    token_file: Annotated[
        str | None,
        typer.Option("--token-file", help="A file holding the bearer token every request needs."),
    ] = None,
    read_token_file: Annotated[
        str | None,
        typer.Option(
            "--read-token-file", help="A file holding a token that may only call readers."
        ),
    ] = None,
    max_batch: Annotated[
        int,
        typer.Option("--max-batch", help="At most this many requests committed together."),
    ] = MAX_BATCH_DEFAULT,
    tls_cert: Annotated[
        str | None, typer.Option("--tls-cert", help="TLS certificate (PEM), with --tls-key.")
    ] = None,
    tls_key: Annotated[
        str | None, typer.Option("--tls-key", help="TLS private key (PEM), with --tls-cert.")
    ] = None,
) -> Output:
    """Serve the journal over HTTP to many runners, with group commit.

    Every writer is `POST /v1/COMMAND` with its parameters as a JSON object, every
    reader `GET /v1/COMMAND?...`; the answer is what `--json` prints. Concurrent
    requests are decided in arrival order and made durable together (one write and
    one fdatasync per batch). SIGTERM answers what waits and exits 0; a failed
    commit answers its batch `storage_failure` and exits 4.
    """
    if ctx.journal_target.startswith(("http://", "https://", "unix:")):
        raise InvalidInput(
            "serve serves a journal (a path or a postgresql:// URL), not another server",
            code=codes.INVALID_OPTION,
        )
    from quotaledger.server.run import serve as run_server

    code = run_server(
        ctx.journal_target,
        listen,
        token_file=token_file,
        read_token_file=read_token_file,
        max_batch=max_batch,
        tls_cert=tls_cert,
        tls_key=tls_key,
        lock_timeout_s=ctx.lock_timeout_s,
    )
    return Output({"ok": code == 0, "exit_code": code}, text="", exit_code=code)
