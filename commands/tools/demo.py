"""`quotaledger demo`: a scripted, realistic session on a fresh embedded journal.

Chapters, each in its own module and each driving the Python API exactly as a
runner would: capacity admission until a refusal and a provider 429 (demo_capacity),
a quota failure continued on its session (demo_host), a settlement resumed after a
runtime was killed between writeback and spend (demo_settlement). It ends with
`inspect` of the capacity goal and the `audit` of its refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.clock import US_PER_S, format_us, wall_us
from quotaledger.render import followup
from quotaledger.render.capacity import inspect_text
from quotaledger.render.operator import audit_text
from quotaledger.tools import (
    demo_capacity,
    demo_host,
    demo_pools,
    demo_queue,
    demo_settlement,
    demo_spend,
)
from quotaledger.tools.demo_files import fresh_path, remember
from quotaledger.usecases.capacity_state import InspectAnswer
from quotaledger.usecases.decode import typed
from quotaledger.usecases.operator import AuditAnswer

Say = Callable[[str], None]


def run_demo(path: str, say: Say) -> dict[str, Any]:
    moved = fresh_path(path)
    if moved is not None:
        say(f"demo: moved the previous demo journal aside to {moved}")
    say(f"demo: a fresh journal at {path}\n")
    with Ledger.open(path) as ledger:
        limits_at, spend_at, queue_at, pools_at, capacity_at = _session_starts(ledger)
        # Marked as the demo's once its genesis is durable: the next run may rotate it.
        journal_id = ledger.journal.head.journal_id
        if journal_id is not None:
            remember(path, journal_id)
        capacity = demo_capacity.run(ledger, say, capacity_at)
        say("")
        limits = demo_capacity.run_limits(ledger, say, limits_at)
        say("")
        spend = demo_spend.run_spend(ledger, say, spend_at)
        say("")
        queue = demo_queue.run_queue(ledger, say, queue_at)
        say("")
        pools = demo_pools.run_pools(ledger, say, pools_at)
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
        "spend": {
            "goal": spend["goal"],
            "cap_refusal_seq": spend["cap_refusal"]["event"]["seq"],
            "cap_refusal_reasons": spend["cap_refusal"]["reasons"],
            "spent_usd": spend["spend"]["usd"],
        },
        "queue": queue,
        "pools": {
            "pool": pools["pool"],
            "borrowed": pools["borrowed"],
            "refusal_seq": pools["refusal"]["event"]["seq"],
            "refusal_reasons": pools["refusal"]["reasons"],
        },
        "hosts": hosts,
        "settlement": settlement,
        "inspect": inspect,
        "audit": audit,
    }


def _session_starts(ledger: Ledger) -> tuple[str, str, str, str, str]:
    """When the scripted sessions start (limits, spend, queue, pools, capacity): one after another,
    the last ending a second before now. A session is dated in the past, never ahead
    of the wall clock, so a user's `--at now` right after the demo is no time
    regression; the journal is created at the first session's start, so its
    journal-level events (a price) are no regression either. The capacity session
    comes last: `inspect` right after the demo shows it as it ended."""
    spans_s = (
        demo_capacity.LIMITS_SESSION_S,
        demo_spend.SESSION_S,
        demo_queue.SESSION_S,
        demo_pools.SESSION_S,
        demo_capacity.SESSION_S,
    )
    start_us = wall_us() - round((sum(spans_s) + len(spans_s)) * US_PER_S)
    ledger.journal.create(at=format_us(start_us))
    starts = []
    for span_s in spans_s:
        starts.append(format_us(start_us))
        start_us += round((span_s + 1) * US_PER_S)
    limits_at, spend_at, queue_at, pools_at, capacity_at = starts
    return limits_at, spend_at, queue_at, pools_at, capacity_at


def demo_text(result: dict[str, Any]) -> str:
    """The demo's closing screens: inspect of the capacity goal, audit of the refusal."""
    goal, seq = result["capacity"]["goal"], result["capacity"]["refusal_seq"]
    # Printed as commands to paste: complete, and naming the demo's journal.
    journal = followup.journal_words(result["journal"])
    return "\n".join(
        [
            "$ " + followup.command_line(["inspect", "--goal", goal], journal),
            inspect_text(typed(InspectAnswer, result["inspect"])),
            "",
            "$ " + followup.audit_line(seq, journal),
            audit_text(typed(AuditAnswer, result["audit"])),
            "",
            f"journal {result['journal']}: head seq {result['head']['seq']} "
            f"hash {result['head']['hash']}",
        ]
    )
