"""Run by test_parallel_verify in a fresh process (one thread, so verify may fork):
prints what `verify` answers for each journal path, sequential or parallel.

usage: python fanout_outcomes.py sequential|parallel|fallback SEGMENTS_PER_WORKER PATH...

`fallback`: the fan-out is allowed, and may hand the file back to the sequential scan
(a verified prefix ending inside a transaction).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import msgspec

from quotaledger.journal import Journal, fanout
from quotaledger.journal.errors import JournalCorrupt
from quotaledger.projections.ledger import PROJECTOR


def outcome(path: str, parallel: bool) -> dict[str, Any]:
    journal = Journal.open(path, PROJECTOR, write=False, allow_corrupt=True)
    try:
        if parallel:  # the fan-out must really run here, not fall back to one core
            fd = journal.store.local_fd()
            assert fd is not None
            assert fanout.verify_file(fd, os.path.getsize(path), journal.decoder), path
        try:
            head = journal.verify()
        except JournalCorrupt as exc:
            return {"corrupt": {"message": exc.message, **exc.context}}
        torn = journal.torn_tail
        return {
            "head": [head.next_seq, head.prev_hash, head.offset, head.journal_id],
            "goal_last_at": {str(goal): at for goal, at in head.goal_last_at.items()},
            "torn": None if torn is None else [torn.seq, torn.offset, torn.reason],
        }
    finally:
        journal.close()


def main() -> None:
    mode, segments, *paths = sys.argv[1:]
    parallel = mode == "parallel"
    fanout.PARALLEL_VERIFY_BYTES_MIN = 0 if mode != "sequential" else 1 << 62
    fanout.SEGMENTS_PER_WORKER = int(segments)
    sys.stdout.buffer.write(msgspec.json.encode([outcome(p, parallel) for p in paths]))


if __name__ == "__main__":
    main()
