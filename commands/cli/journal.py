"""Journal commands: verify, digest, repair, checkpoint, log, export, import."""

import json
import os
import sys
from typing import Annotated

import typer

from quotaledger.api import Ledger
from quotaledger.cli.common import AtOpt, Ctx, command
from quotaledger.cli.output import Output, table
from quotaledger.cli.progress import progress_bar
from quotaledger.journal import InvalidInput, JournalCorrupt
from quotaledger.services.journal import JournalService, LogFilter, check_import_source
from quotaledger.services.outfile import check_out_path


def _size_hint(ledger: Ledger) -> int | None:
    return ledger.journal.store.size_hint(0, 0)


def register(app: typer.Typer) -> None:
    @command(app, "verify", example="quotaledger verify --journal runs.jsonl --digest 41:9f2c...")
    def verify(
        ctx: Ctx,
        digest: Annotated[
            str | None,
            typer.Option("--digest", help="SEQ:HASH taken earlier: prove the journal only grew."),
        ] = None,
    ) -> dict:
        """Check the whole hash chain and every payload; print the head."""
        with (
            ctx.service(JournalService, write=False, allow_corrupt=True) as ledger,
            progress_bar("verify", _size_hint(ledger)) as progress,
        ):
            return ledger.verify(digest=digest, progress=progress)

    @command(app, "digest", example="quotaledger digest --journal runs.jsonl")
    def digest(ctx: Ctx) -> dict:
        """Print the head (seq, hash, journal id) for anchoring elsewhere."""
        with ctx.service(JournalService, write=False) as ledger:
            return ledger.digest()

    @command(app, "repair", example="quotaledger repair --truncate-after 41 --yes")
    def repair(
        ctx: Ctx,
        truncate_after: Annotated[
            int, typer.Option("--truncate-after", help="Keep records up to this seq.")
        ],
        yes: Annotated[bool, typer.Option("--yes", help="Confirm moving later records.")] = False,
        at: AtOpt = None,
    ) -> dict:
        """Move every record after SEQ to a quarantine file beside the journal."""
        if not yes:
            raise InvalidInput(
                "repair moves records out of the journal; add --yes to confirm",
                code="confirmation_required",
            )
        if truncate_after < 0:
            raise InvalidInput("--truncate-after must be >= 0", code="invalid_option")
        with ctx.service(JournalService, write=True, allow_corrupt=True) as ledger:
            return ledger.repair(truncate_after=truncate_after, at=at)

    @command(app, "checkpoint", example="quotaledger checkpoint --journal runs.jsonl")
    def checkpoint(ctx: Ctx) -> dict:
        """Write the projection state after the last record to <journal>.checkpoint."""
        with ctx.service(JournalService, write=True) as ledger:
            return ledger.checkpoint()

    @command(
        app, "log", example="quotaledger log --goal g --kind capacity --since 2026-11-29T14:00:00Z"
    )
    def log(
        ctx: Ctx,
        goal: Annotated[str | None, typer.Option("--goal", help="Only this goal.")] = None,
        kind: Annotated[
            str | None, typer.Option("--kind", help="Only this kind (or prefix: capacity).")
        ] = None,
        since: Annotated[str | None, typer.Option("--since", help="Only at >= T.")] = None,
        until: Annotated[str | None, typer.Option("--until", help="Only at <= T.")] = None,
        limit: Annotated[int | None, typer.Option("--limit", help="At most N events.")] = None,
    ) -> Output:
        """List events (a table; --json prints JSON Lines, one event per line).

        On a corrupt journal it lists the verified prefix, then reports the corruption
        (exit 3): what an operator reads to choose `repair --truncate-after`.
        """
        LogFilter.of(goal=goal, kind=kind, since=since, until=until, limit=limit)  # exit 2 first
        with ctx.service(JournalService, write=False, allow_corrupt=True) as ledger:
            events = ledger.log(goal=goal, kind=kind, since=since, until=until, limit=limit)
            if ctx.as_json:
                for event in events:
                    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
                raise typer.Exit(0)
            rows: list[list[str]] = []
            header = ["SEQ", "AT", "GOAL", "KIND", "DATA"]
            try:
                for e in events:
                    rows.append(
                        [str(e["seq"]), e["at"], e["goal"] or "-", e["kind"], _summary(e["data"])]
                    )
            except JournalCorrupt:
                sys.stdout.write(table(rows, header) + "\n")
                raise
        return Output({"ok": True}, text=table(rows, header))

    @command(app, "export", example="quotaledger export --journal postgresql://... --to copy.jsonl")
    def export(
        ctx: Ctx,
        to: Annotated[str, typer.Option("--to", help="New file to write, or - for stdout.")],
    ) -> Output:
        """Write every verified record, byte for byte, to a new JSONL file (or stdout).

        With `--to -` the records go to stdout and the summary to stderr.
        """
        if to != "-":
            check_out_path("--to", to)  # exit 2 before the journal is opened
        with (
            ctx.service(JournalService, write=False) as ledger,
            progress_bar("export", _size_hint(ledger)) as progress,
        ):
            result = ledger.export(to=to, progress=progress)
        where = "stdout" if to == "-" else to
        text = f"exported {result['records']} records ({result['bytes']:,} bytes) to {where}"
        return Output(result, text=text, on_stderr=to == "-")

    @command(app, "import", example="quotaledger import --journal postgresql://... runs.jsonl")
    def import_(
        ctx: Ctx, file: Annotated[str, typer.Argument(help="A verifying JSONL journal.")]
    ) -> dict:
        """Load a verified JSONL journal into an empty journal, hashes preserved."""
        check_import_source(file)  # exit 2 before the target journal is opened
        size_bytes = os.path.getsize(file) if os.path.isfile(file) else None
        with (
            ctx.service(JournalService, write=True) as ledger,
            progress_bar("import", size_bytes) as progress,
        ):
            return ledger.import_(file=file, progress=progress)


def _summary(data: dict, width: int = 80) -> str:
    text = json.dumps(data, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"
