"""Journal commands: verify, digest, repair, checkpoint, log, export, import."""

import os
import sys
from typing import Annotated

import typer

from quotaledger.api import Ledger
from quotaledger.cli.common import AtOpt, CommandTable, Ctx
from quotaledger.cli.progress import progress_bar
from quotaledger.journal import InvalidInput, codes
from quotaledger.render.answers import output_of
from quotaledger.render.journal import (
    head_text,
    log_printed,
    repair_text,
    verify_text,
)
from quotaledger.render.outcome import EXIT_OK
from quotaledger.render.output import Output, plural
from quotaledger.services.journal import JournalService
from quotaledger.usecases.decode import CLI, decode
from quotaledger.usecases.journal import (
    CheckpointRequest,
    DigestRequest,
    ExportRequest,
    ImportRequest,
    LogRequest,
    RepairRequest,
    VerifyRequest,
)


def _size_hint(ledger: Ledger) -> int | None:
    journal = getattr(ledger, "journal", None)  # None: a server's client (no bar size)
    return None if journal is None else journal.store.size_hint(0, 0)


commands = CommandTable()


def register(app: typer.Typer) -> None:
    commands.add_to(app)


@commands("verify", example="quotaledger verify --journal runs.jsonl --digest 41:9f2c...")
def verify(
    ctx: Ctx,
    digest: Annotated[
        str | None,
        typer.Option("--digest", help="SEQ:HASH taken earlier: prove the journal only grew."),
    ] = None,
    decisions: Annotated[
        bool,
        typer.Option(
            "--decisions",
            help="Also re-take every recorded decision as audit does (exit 3 if one differs).",
        ),
    ] = False,
) -> Output:
    """Check the whole hash chain and every payload; print OK and the head."""
    request = decode(VerifyRequest, {"digest": digest, "decisions": decisions}, CLI)
    with (
        ctx.service(JournalService, write=False, allow_corrupt=True) as ledger,
        progress_bar("verify", _size_hint(ledger)) as progress,
    ):
        answer = ledger.verify(request, progress=progress)
    return Output(answer, text=verify_text(answer))


@commands("digest", example="quotaledger digest --journal runs.jsonl")
def digest(ctx: Ctx) -> Output:
    """Print the head as SEQ:HASH (what `verify --digest` takes), for anchoring
    elsewhere; --json adds the journal id."""
    request = decode(DigestRequest, {}, CLI)
    with ctx.service(JournalService, write=False) as ledger:
        answer = ledger.digest(request)
    return output_of("digest", request, answer, ctx.shown())


@commands("repair", example="quotaledger repair --truncate-after 41 --yes")
def repair(
    ctx: Ctx,
    truncate_after: Annotated[
        int, typer.Option("--truncate-after", help="Keep records up to this seq.")
    ],
    yes: Annotated[bool, typer.Option("--yes", help="Confirm moving later records.")] = False,
    at: AtOpt = None,
) -> Output:
    """Move every record after SEQ to a quarantine file beside the journal."""
    if not yes:
        raise InvalidInput(
            "repair moves records out of the journal; add --yes to confirm",
            code=codes.CONFIRMATION_REQUIRED,
        )
    request = decode(RepairRequest, {"truncate_after": truncate_after, "at": at}, CLI)
    with ctx.service(JournalService, write=True, allow_corrupt=True) as ledger:
        answer = ledger.repair(request)
    return Output(answer, text=repair_text(answer))


@commands("checkpoint", example="quotaledger checkpoint --journal runs.jsonl")
def checkpoint(ctx: Ctx) -> Output:
    """Write the projection state after the last record to <journal>.checkpoint."""
    request = decode(CheckpointRequest, {}, CLI)
    with ctx.service(JournalService, write=True) as ledger:
        answer = ledger.checkpoint(request)
    return Output(
        answer,
        text=f"checkpoint written after seq {answer.seq} ({answer.offset:,} bytes "
        f"folded; projection {answer.projection_version})",
    )


@commands("log", example="quotaledger log --goal g --kind capacity --since 2026-11-29T14:00:00Z")
def log(
    ctx: Ctx,
    goal: Annotated[str | None, typer.Option("--goal", help="Only this goal.")] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="Only the events that name this run.")
    ] = None,
    kind: Annotated[
        str | None, typer.Option("--kind", help="Only this kind (or prefix: capacity).")
    ] = None,
    since: Annotated[str | None, typer.Option("--since", help="Only at >= T.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Only at <= T.")] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", help="The first N events (of those kept).")
    ] = None,
    last: Annotated[
        int | None, typer.Option("--last", help="The last N events (of those kept).")
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="Then print events as they are appended, until Ctrl-C."
        ),
    ] = False,
) -> Output:
    """List events (a table; --json prints JSON Lines, one event per line).

    On a corrupt journal it lists the verified prefix, then reports the corruption
    (exit 3): what an operator reads to choose `repair --truncate-after`. With
    --follow it keeps printing what writers append (a write still in progress is
    waited for, never reported), until interrupted (exit 0).
    """
    filters = {"goal": goal, "run": run, "kind": kind, "since": since, "until": until}
    request = decode(LogRequest, {**filters, "limit": limit, "last": last, "follow": follow}, CLI)
    with ctx.service(JournalService, write=False, allow_corrupt=True) as ledger:
        try:
            for piece in log_printed(ledger.log(request), as_json=ctx.as_json, follow=follow):
                sys.stdout.write(piece)
                if follow:
                    sys.stdout.flush()
        except KeyboardInterrupt:  # the way out of --follow: not an error
            pass
    raise typer.Exit(EXIT_OK)


@commands("export", example="quotaledger export --journal postgresql://... --to copy.jsonl")
def export(
    ctx: Ctx,
    to: Annotated[str, typer.Option("--to", help="New file to write, or - for stdout.")],
) -> Output:
    """Write every verified record, byte for byte, to a new JSONL file (or stdout).

    With `--to -` the records go to stdout and the summary to stderr.
    """
    request = decode(ExportRequest, {"to": to}, CLI)  # exit 2 before the journal is opened
    with (
        ctx.service(JournalService, write=False) as ledger,
        progress_bar("export", _size_hint(ledger)) as progress,
    ):
        answer = ledger.export(request, progress=progress)
    where = "stdout" if to == "-" else to
    text = (
        f"exported {plural(answer.records, 'record')} ({answer.bytes:,} bytes) "
        f"to {where}; head {head_text(answer.head)}"
    )
    return Output(answer, text=text, on_stderr=to == "-")


@commands("import", example="quotaledger import --journal postgresql://... runs.jsonl")
def import_(
    ctx: Ctx,
    file: Annotated[str, typer.Argument(help="A verifying JSONL journal.")],
    allow_unreproduced: Annotated[
        bool,
        typer.Option(
            "--allow-unreproduced",
            help="Import even if a recorded decision does not reproduce (see verify --decisions).",
        ),
    ] = False,
) -> Output:
    """Load a verified JSONL journal into an empty journal, hashes preserved."""
    values = {"file": file, "allow_unreproduced": allow_unreproduced}
    request = decode(ImportRequest, values, CLI)  # exit 2 before the journal is opened
    size_bytes = os.path.getsize(file) if os.path.isfile(file) else None
    with (
        ctx.service(JournalService, write=True) as ledger,
        progress_bar("import", size_bytes) as progress,
    ):
        answer = ledger.import_(request, progress=progress)
    return Output(
        answer,
        text=f"imported {plural(answer.records, 'record')} from {file}; "
        f"head {head_text(answer.head)}",
    )
