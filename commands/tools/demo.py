"""`quotaledger demo`: a scripted, realistic session on a fresh embedded journal.

Chapters, each in its own module and each driving the Python API exactly as a
runner would: capacity admission until a refusal and a provider 429 (demo_capacity),
a quota failure continued on its session (demo_host), a settlement resumed after a
runtime was killed between writeback and spend (demo_settlement). It ends with
`inspect` of the capacity goal and the `audit` of its refusal.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal import NotAJournal, NotRegularFile
from quotaledger.journal.chain import not_a_journal
from quotaledger.journal.limits import LINE_BYTES_MAX
from quotaledger.tools import demo_capacity, demo_host, demo_settlement

Say = Callable[[str], None]


def fresh_path(path: str) -> str | None:
    """Move an earlier demo journal (and its checkpoint) aside to `<path>.previous`,
    replacing the one an earlier run moved there: one previous demo is kept, so
    running the demo again and again leaves no pile of journals."""
    if not os.path.lexists(path):
        return None
    if not stat.S_ISREG(os.lstat(path).st_mode):  # a directory, FIFO, symlink: not a demo's
        raise NotRegularFile(
            f"{path} is not a regular file; the demo moves only its own", path=path
        )
    with open(path, "rb") as previous:
        start = previous.read(LINE_BYTES_MAX + 1)
    if not_a_journal(start):  # a README given by mistake is not moved, let alone replaced
        raise NotAJournal(
            f"{path} is not a quotaledger journal; give the demo another --journal", path=path
        )
    aside = f"{path}.previous"
    os.replace(path, aside)
    checkpoint = path + ".checkpoint"
    if os.path.lexists(checkpoint):
        os.replace(checkpoint, aside + ".checkpoint")
    elif os.path.lexists(aside + ".checkpoint"):  # the older previous demo's
        os.unlink(aside + ".checkpoint")
    return aside


def run_demo(path: str, say: Say) -> dict[str, Any]:
    moved = fresh_path(path)
    if moved is not None:
        say(f"demo: moved the previous demo journal aside to {moved}")
    say(f"demo: a fresh journal at {path}\n")
    with Ledger.open(path) as ledger:
        capacity = demo_capacity.run(ledger, say)
        say("")
        limits = demo_capacity.run_limits(ledger, say)
        say("")
        hosts = demo_host.run(ledger, say, goal="demo-hosts")
        say("")
    settlement = demo_settlement.run(
        lambda: Ledger.open(path), say, goal="demo-settlement", journal_path=path
    )
    say("")
    with Ledger.open(path, write=False) as ledger:
        inspect = ledger.inspect(goal=capacity["goal"])
        audit = ledger.audit(seq=capacity["refusal_seq"])
        head = ledger.digest()
    return {
        "ok": True,
        "journal": path,
        "head": {"seq": head["seq"], "hash": head["hash"]},
        "capacity": capacity,
        "limits": {
            "goal": limits["goal"],
            "rpm_refusal_seq": limits["rpm_refusal"]["event"]["seq"],
            "provider_refusal_seq": limits["provider_refusal"]["event"]["seq"],
            "outside_tokens": limits["outside_tokens"],
        },
        "hosts": hosts,
        "settlement": settlement,
        "inspect": inspect,
        "audit": audit,
    }
