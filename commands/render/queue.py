"""The text of a queue: `inspect`'s table for a goal's or a pool's (SPEC §12.2)."""

from quotaledger.render.output import table
from quotaledger.usecases.capacity import QueueEntryView


def queue_lines(queue: list[QueueEntryView]) -> list[str]:
    """A queue (a goal's or a pool's, SPEC §12.2), in order: none when nobody waits."""
    if not queue:
        return []
    queued = [
        [
            str(e.position),
            f"{e.goal}/{e.run}",
            e.queued_at,
            e.estimated_start_at or "-",
            e.expires_at,
            ",".join(e.reasons) or "-",
        ]
        for e in queue
    ]
    header = ["POS", "RUN", "QUEUED_AT", "ESTIMATED_START", "EXPIRES_AT", "HELD_BY"]
    table_text = "    " + table(queued, header).replace("\n", "\n    ")
    return [f"  queue: {len(queue)} waiting", table_text]
