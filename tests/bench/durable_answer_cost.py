"""What the durable-answer fdatasync (SPEC §2.3) costs when nothing is dirty.

Not part of the test suite; run it by hand:

    python tests/bench/durable_answer_cost.py [CALLS]

A command that appends nothing fdatasyncs the journal before it answers. This times
that call (FileStore.make_durable) inside an idempotent `admit` replay on a fresh
handle and inside a reader (open + inspect), and the whole call around it, on a
journal whose bytes are all durable already.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

from quotaledger.api import Ledger
from quotaledger.journal.filestore import FileStore


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    path = os.path.join(tempfile.mkdtemp(dir="."), "j.jsonl")
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=1)
        ledger.admit(goal="g", run="r1", case="c1", arm="baseline")
        for i in range(200):
            ledger.observe(goal="g", uncached_input=i, cached_input=0, output=1)
    real = FileStore.make_durable
    spent: list[float] = []

    def timed(self: FileStore) -> None:
        start = time.perf_counter()
        real(self)
        spent.append(time.perf_counter() - start)

    def replay() -> None:
        with Ledger.open(path) as ledger:
            assert ledger.admit(goal="g", run="r1", case="c1", arm="baseline")["idempotent"]

    def reader() -> None:
        with Ledger.open(path, write=False) as ledger:
            ledger.inspect(goal="g")

    FileStore.make_durable = timed  # type: ignore[method-assign]
    for name, call in (("idempotent admit replay", replay), ("reader (open + inspect)", reader)):
        spent.clear()
        whole = []
        for _ in range(calls):
            start = time.perf_counter()
            call()
            whole.append(time.perf_counter() - start)
        assert len(spent) == calls, "one fdatasync per answer"
        sync_us, call_us = statistics.median(spent) * 1e6, statistics.median(whole) * 1e6
        p90_us = statistics.quantiles(spent, n=10)[-1] * 1e6
        print(
            f"{name}: fdatasync median {sync_us:.0f} us (p90 {p90_us:.0f} us) of a "
            f"{call_us:.0f} us call ({sync_us / call_us:.1%})"
        )


if __name__ == "__main__":
    main()
