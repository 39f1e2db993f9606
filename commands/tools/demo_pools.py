"""The pool part of `quotaledger demo` (SPEC §12.1): two campaigns and a nightly job
share one provider limit. One campaign borrows what the other leaves idle, the
nightly job starts inside its own share, and a further borrow is refused because it
would take what the idle campaign is guaranteed; that campaign then starts at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quotaledger.api import Ledger
from quotaledger.render.per_event import admit_text
from quotaledger.tools.demo_capacity import clock
from quotaledger.usecases.capacity import AdmitAnswer
from quotaledger.usecases.decode import typed

POOL = "demo-org"
CAMPAIGN_A = "demo-pool-campaign-a"
CAMPAIGN_B = "demo-pool-campaign-b"
NIGHTLY = "demo-pool-nightly"
SESSION_S = 10
"""The pool session's length: its last admission is at t(10)."""


def run_pools(
    ledger: Ledger, say: Callable[[str], None], base_at: str | None = None
) -> dict[str, Any]:
    """Play the pool session; returns the refusal a guaranteed share caused."""
    t = clock(ledger, POOL, base_at)
    say(f"Pool {POOL}: one key's 100,000 TPM (target 90,000) shared by three goals.")
    ledger.pool_configure(pool=POOL, quota_tpm=100_000, at=t(0))
    terms = ((CAMPAIGN_A, 0.4, None), (CAMPAIGN_B, 0.4, 0.1), (NIGHTLY, 0.2, None))
    for goal, share, lending in terms:
        ledger.configure(
            goal=goal, pool=POOL, pool_share=share, pool_lending_limit=lending, at=t(0)
        )
        ledger.observe(goal=goal, uncached_input=0, cached_input=0, output=0, at=t(0))
    say(f"  {CAMPAIGN_A} 40%, {CAMPAIGN_B} 40% (lends 10%: 30% stays guaranteed), {NIGHTLY} 20%")

    def admit(seconds: float, goal: str, run_id: str, forecast_tpm: int) -> dict[str, Any]:
        result = ledger.admit(goal=goal, run=run_id, forecast_tpm=forecast_tpm, at=t(seconds))
        text = admit_text(typed(AdmitAnswer, result), run_id)
        say(f"  +{seconds:>3}s  {goal}: " + text.replace("\n", "\n         "))
        return result

    say(f"{CAMPAIGN_B} idles; {CAMPAIGN_A} borrows beyond its 36,000:")
    admit(1, CAMPAIGN_A, "a-001", 30_000)
    admit(2, CAMPAIGN_A, "a-002", 20_000)
    admit(3, NIGHTLY, "n-001", 10_000)
    say(f"A third borrow would take what {CAMPAIGN_B} is guaranteed:")
    refused = admit(4, CAMPAIGN_A, "a-003", 10_000)
    say(f"{CAMPAIGN_B} starts inside its own share at once:")
    admit(5, CAMPAIGN_B, "b-001", 30_000)
    pools = ledger.pools(at=t(SESSION_S))
    borrowed = pools["pools"][POOL]["members"][CAMPAIGN_A]["dimensions"]["tpm"]["borrowed"]
    say(f"  {CAMPAIGN_A} borrowed {borrowed:,} TPM while {CAMPAIGN_B} was idle")
    return {
        "pool": POOL,
        "borrowed": borrowed,
        "refusal": refused,
        "pools": pools,
    }
