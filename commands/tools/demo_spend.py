"""The daily-window and spend-cap part of `quotaledger demo` (SPEC §12.3, §12.4): a
nightly job with a daily token limit and a dollar budget, priced by the journal, runs
until its cap is reached; then nothing new starts, and the refusal says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quotaledger.api import Ledger
from quotaledger.render.per_event import admit_text
from quotaledger.tools.demo_capacity import clock
from quotaledger.usecases.capacity import AdmitAnswer
from quotaledger.usecases.decode import typed

SPEND_GOAL = "demo-nightly"
MODEL = "demo-model-large"
SESSION_S = 40
"""The spend session's length: its last admission is at t(40)."""


def run_spend(
    ledger: Ledger, say: Callable[[str], None], base_at: str | None = None
) -> dict[str, Any]:
    """Prices, a daily limit and a $0.60 budget: runs start while the budget allows,
    the observation that crosses it reaches the cap, and every later admission is
    refused `spend_cap_reached` with the figures."""
    t = clock(ledger, SPEND_GOAL, base_at)
    say(f"Goal {SPEND_GOAL}: 2M tokens per day, 5,000 requests per day, a $0.60 budget.")
    ledger.price_set(
        model=MODEL,
        input_usd_per_mtok=3,
        output_usd_per_mtok=15,
        cached_input_usd_per_mtok=0.3,
        at=t(0),
    )
    say(f"  price set: {MODEL} $3 input, $0.30 cached input, $15 output per million tokens")
    ledger.configure(goal=SPEND_GOAL, quota_tpd=2_000_000, quota_rpd=5_000, cap_usd=0.6, at=t(0))

    def admit(seconds: float, run_id: str, **request: Any) -> dict[str, Any]:
        result = ledger.admit(goal=SPEND_GOAL, run=run_id, at=t(seconds), **request)
        text = admit_text(typed(AdmitAnswer, result), run_id)
        say(f"  +{seconds:>3}s  " + text.replace("\n", "\n         "))
        return result

    say("Each run forecasts its totals; its spend is reserved until it is observed:")
    for i in range(3):
        start = 1 + 10 * i
        run_id = f"nightly-{i + 1:03d}"
        admit(start, run_id, forecast_tokens=60_000, forecast_requests=40, forecast_usd=0.15)
        ledger.observe(
            goal=SPEND_GOAL,
            run=run_id,
            model=MODEL,
            uncached_input=40_000,
            cached_input=20_000,
            output=6_000,
            requests=40,
            at=t(start + 5),
        )
        spend = ledger.inspect(goal=SPEND_GOAL, at=t(start + 5))["goals"][SPEND_GOAL]["spend"]
        say(f"  +{start + 5:>3}s  {run_id} observed: spent ${spend['usd']} of ${spend['cap_usd']}")
        ledger.release(goal=SPEND_GOAL, run=run_id, at=t(start + 6))
    reached = admit(40, "nightly-004", forecast_tokens=60_000, forecast_requests=40)
    view = ledger.inspect(goal=SPEND_GOAL, at=t(40))["goals"][SPEND_GOAL]
    say(f"  next action: {view['next_action']} (finish what runs, start nothing)")
    return {"goal": SPEND_GOAL, "cap_refusal": reached, "spend": view["spend"]}
