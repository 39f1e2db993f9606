"""A worker process for the concurrency tests: `python -m tests.store.appender TARGET WORKER COUNT`
(from the repository root).

Appends COUNT toy notes, one transaction each, through the engine (file or
PostgreSQL store); prints the seqs it was acknowledged as JSON.
"""

from __future__ import annotations

import json
import sys

from quotaledger.journal import Journal
from tests.toyprojector import TOY, Note


def main(target: str, worker: int, count: int) -> None:
    acknowledged = []
    with Journal.open(target, TOY, lock_timeout_s=60) as journal:
        for i in range(count):
            with journal.transaction() as txn:
                pending = txn.append(
                    "toy.note", f"w{worker}", Note(n=worker * 1000 + i), txn.time_for(f"w{worker}")
                )
            acknowledged.append(pending.record.seq)
    print(json.dumps(acknowledged))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
