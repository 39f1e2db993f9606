"""The capacity part of `quotaledger demo`: a scripted, realistic admission session.

A benchmark campaign shares a 100k TPM quota: it configures both gates, reports usage,
admits runs until the token gate refuses one, records a provider 429 (cooldown),
releases runs and backfills. Every call goes through the Python API at explicit
times, so the session is the same on every machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.clock import US_PER_S, format_us, parse_at, wall_us
from quotaledger.projections.capacity import Figures
from quotaledger.render import readable
from quotaledger.render.capacity import config_summary
from quotaledger.render.per_event import admit_text, figures_text
from quotaledger.usecases.capacity import AdmitAnswer
from quotaledger.usecases.capacity_state import ConfigView
from quotaledger.usecases.decode import typed

GOAL = "demo-campaign"
SESSION_S = 60
"""The capacity session's length: its last event is at t(60)."""
LIMITS_SESSION_S = 21
"""The limits session's length: its latest time is the provider's reset at t(21)."""


def clock(ledger: Ledger, goal: str, base_at: str | None) -> Callable[[float], str]:
    """`t(seconds)`: the time that many seconds into the session, which starts at
    `base_at` (now by default) or at the goal's last event, whichever is later."""
    last = ledger.journal.head.goal_last_at.get(goal)
    base_us = parse_at(base_at) if base_at is not None else wall_us()
    if last is not None:
        base_us = max(base_us, parse_at(last))

    def t(seconds: float) -> str:
        return format_us(base_us + round(seconds * US_PER_S))

    return t


def run(
    ledger: Ledger,
    say: Callable[[str], None],
    base_at: str | None = None,
) -> dict[str, Any]:
    """Play the session on `ledger`; returns the goal and the token refusal to audit."""
    t = clock(ledger, GOAL, base_at)

    def admit(seconds: float, run_id: str, **request: Any) -> dict[str, Any]:
        result = ledger.admit(goal=GOAL, run=run_id, at=t(seconds), **request)
        text = admit_text(typed(AdmitAnswer, result), run_id)
        say(f"  +{seconds:>3}s  " + text.replace("\n", "\n         "))
        return result

    _configure_and_observe(ledger, say, t)
    say("Admissions until the token gate says no:")
    admitted = [
        admit(6, "run-001", case="case-17", arm="baseline", forecast_tpm=20_000),
        admit(8, "run-002", case="case-17", arm="treatment", forecast_tpm=20_000),
        admit(10, "run-003", case="case-18", arm="control", forecast_tpm=25_000),
    ]
    ledger.observe(
        goal=GOAL,
        run="run-001",
        uncached_input=16_000,
        cached_input=0,
        output=4_000,
        requests=25,
        at=t(12),
    )
    refusal = admit(14, "run-004", case="case-18", arm="explore", forecast_tpm=25_000)
    admitted.append(
        admit(
            15, "eval-001", case="case-17", arm="treatment", class_="evaluator", forecast_tpm=8_000
        )
    )
    _cooldown(ledger, say, t)
    say("Runs finish and are released; the runner backfills after the cooldown:")
    for seconds, run_id in ((30, "run-001"), (31, "run-003")):
        ledger.release(goal=GOAL, run=run_id, at=t(seconds))
        say(f"  +{seconds:>3}s  released {run_id}")
    ledger.observe(
        goal=GOAL, uncached_input=0, cached_input=0, output=0, source="provider-meter", at=t(55)
    )
    backfill = admit(56, "run-004", case="case-18", arm="explore", forecast_tpm=25_000)
    _release_everything(ledger, say, t)
    event = refusal["event"]
    assert event is not None  # a refusal is journaled
    say(f"The refusal of run-004 is seq {event['seq']} ({event['hash'][:12]}…):")
    say("  " + figures_text(typed(Figures, refusal["figures"]), refusal["at"]))
    return {
        "goal": GOAL,
        "refusal_seq": event["seq"],
        "refusal_hash": event["hash"],
        "refusal_reasons": refusal["reasons"],
        "admitted": [a["receipt"]["run"] for a in admitted if a["admitted"]]
        + ([backfill["receipt"]["run"]] if backfill["admitted"] else []),
        "base_at": t(0),
        "end_at": t(60),
    }


def _configure_and_observe(
    ledger: Ledger, say: Callable[[str], None], t: Callable[[float], str]
) -> None:
    say(f"Goal {GOAL}: 4 case slots (1 kept for test arms), 100k TPM quota, 90k target.")
    configured = ledger.configure(
        goal=GOAL,
        max_active_cases=4,
        reserved_test_cases=1,
        quota_tpm=100_000,
        target_tpm=90_000,
        evaluator_reserve_tpm=10_000,
        cold_start_reserve_tpm=2_000,
        cached_input_weight=0.5,
        cooldown_base_s=15,
        cooldown_max_s=120,
        at=t(0),
    )
    say("  configured: " + config_summary(typed(ConfigView, configured["config"])))
    say("The runner reports provider usage (a zero-token heartbeat, then real traffic):")
    ledger.observe(
        goal=GOAL, uncached_input=0, cached_input=0, output=0, source="provider-meter", at=t(0)
    )
    usage = ledger.observe(
        goal=GOAL,
        uncached_input=18_000,
        cached_input=8_000,
        output=4_000,
        requests=40,
        source="provider-meter",
        at=t(5),
    )
    say(f"  +  5s  usage {usage['usage_tpm']} TPM (cached input counts half)")


def _cooldown(ledger: Ledger, say: Callable[[str], None], t: Callable[[float], str]) -> None:
    say("The provider answers HTTP 429 with Retry-After: 30 — a bounded cooldown starts:")
    rejected = ledger.reject(
        goal=GOAL, run="run-002", retry_after_s=30, detail="HTTP 429 Too Many Requests", at=t(20)
    )
    say(f"  + 20s  cooldown {rejected['cooldown_s']}s until {rejected['cooldown_until']}")
    polled = ledger.admit(
        goal=GOAL, run="run-004", arm="explore", forecast_tpm=25_000, at=t(22), dry_run=True
    )
    say("  + 22s  poll (dry run, nothing journaled): " + ", ".join(polled["reasons"]))


def _release_everything(
    ledger: Ledger, say: Callable[[str], None], t: Callable[[float], str]
) -> None:
    view = ledger.inspect(goal=GOAL, at=t(57))["goals"][GOAL]
    say(
        f"State at +57s: {view['active_counts']['total']} active, load {view['load_tpm']} TPM, "
        f"next action {view['next_action']}"
    )
    for run_id in [r["run"] for r in view["active_runs"]]:
        ledger.release(goal=GOAL, run=run_id, at=t(60))
    say("  + 60s  the session ends: every run released")


LIMITS_GOAL = "demo-limits"


def run_limits(
    ledger: Ledger, say: Callable[[str], None], base_at: str | None = None
) -> dict[str, Any]:
    """The limits providers enforce (SPEC §3.6): a refusal bound by RPM while TPM has
    headroom, a provider report that reveals traffic this journal never saw, and the
    audit of the RPM refusal."""
    t = clock(ledger, LIMITS_GOAL, base_at)
    say(f"Goal {LIMITS_GOAL}: the provider enforces 100k TPM and 10 requests per minute.")
    configured = ledger.configure(goal=LIMITS_GOAL, quota_tpm=100_000, quota_rpm=10, at=t(0))
    say("  configured: " + config_summary(typed(ConfigView, configured["config"])))
    ledger.observe(
        goal=LIMITS_GOAL, uncached_input=6_000, cached_input=0, output=1_000, requests=6, at=t(1)
    )
    say("  +  1s  6 requests, 7000 tokens observed")
    rpm = ledger.admit(
        goal=LIMITS_GOAL, run="agent-a", forecast_tpm=10_000, forecast_rpm=4, at=t(2)
    )
    say("  +  2s  " + admit_text(typed(AdmitAnswer, rpm), "agent-a").replace("\n", "\n         "))
    say("The provider's headers on the next response reveal outside traffic:")
    reset = t(21)
    ledger.observe(
        goal=LIMITS_GOAL,
        uncached_input=1_500,
        cached_input=0,
        output=500,
        provider={
            "tpm": {"limit": 100_000, "remaining": 25_000, "reset_at": reset},
            "rpm": {"limit": 10, "remaining": 2, "reset_at": t(7)},
        },
        at=t(3),
    )
    view = ledger.inspect(goal=LIMITS_GOAL, at=t(3))["goals"][LIMITS_GOAL]
    seen = view["dimensions"]["tpm"]["usage"]
    used = view["provider"]["tpm"]["used"]
    assert used is not None  # the report above is live
    say(
        f"  +  3s  the provider counts {used} tokens used this minute; this journal saw "
        f"{seen}: {used - seen} came from elsewhere on the organisation"
    )
    tpm = ledger.admit(
        goal=LIMITS_GOAL, run="agent-b", forecast_tpm=30_000, forecast_rpm=1, at=t(4)
    )
    say("  +  4s  " + admit_text(typed(AdmitAnswer, tpm), "agent-b").replace("\n", "\n         "))
    assert rpm["event"] is not None  # a refusal is journaled
    audit = ledger.audit(seq=rpm["event"]["seq"])
    explanation: Mapping[str, Any] = audit["explanation"]  # a capacity refusal's
    say(
        f"Audit of the agent-a refusal (seq {rpm['event']['seq']}): reproduced "
        f"{audit['reproduced']}, binding dimension {explanation['binding_dimension']}, "
        f"{readable.shortfall_text(explanation['shortfall'], audit['recorded']['reasons'])}, "
        "earliest admissible at "
        f"{explanation['earliest_admissible_at']}"
    )
    return {
        "goal": LIMITS_GOAL,
        "rpm_refusal": rpm,
        "provider_refusal": tpm,
        "audit": audit,
        "outside_tokens": used - seen,
    }
