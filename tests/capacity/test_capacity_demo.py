"""The scripted capacity session of `quotaledger demo` runs on a fresh journal, reaches a
token refusal, and what it returns names that very record."""

from __future__ import annotations

import json

from quotaledger.api import Ledger
from quotaledger.projections import reasons as R
from quotaledger.tools import demo_capacity, demo_queue
from tests.support import run_cli


def test_demo_session_reaches_a_token_refusal(journal_path):
    said: list[str] = []
    with Ledger.open(journal_path) as ledger:
        result = demo_capacity.run(ledger, said.append, "2026-11-29T14:00:00Z")
    assert result["goal"] == demo_capacity.GOAL
    assert R.TOKEN_HEADROOM_EXHAUSTED in result["refusal_reasons"]
    assert "run-004" in result["admitted"]  # backfilled once the cooldown ended
    with open(journal_path, "rb") as handle:
        records = [json.loads(line) for line in handle.read().splitlines()]
    refusal = records[result["refusal_seq"]]
    assert (refusal["kind"], refusal["hash"]) == ("capacity.refused", result["refusal_hash"])
    kinds = {r["kind"] for r in records}
    assert {"capacity.configured", "capacity.observed", "capacity.admitted", "capacity.rejected",
            "capacity.released"} <= kinds  # fmt: skip
    assert any("429" in line for line in said) and any("REFUSED" in line for line in said)
    assert run_cli("verify", "--journal", journal_path).code == 0
    # Run again on the same journal (a later session): times move forward, no regression.
    with Ledger.open(journal_path) as ledger:
        again = demo_capacity.run(ledger, said.append)
    assert again["refusal_seq"] > result["refusal_seq"]


def test_demo_limits_chapter_shows_rpm_provider_and_audit(journal_path):
    said: list[str] = []
    with Ledger.open(journal_path) as ledger:
        result = demo_capacity.run_limits(ledger, said.append, "2026-11-29T14:00:00Z")
    rpm = result["rpm_refusal"]
    assert rpm["reasons"] == ["rpm_headroom_exhausted"]
    assert rpm["figures"]["dimensions"]["tpm"]["headroom"] > 70_000  # TPM had room
    assert result["outside_tokens"] == 75_000 - 9_000
    provider = result["provider_refusal"]
    assert provider["reasons"] == [R.TOKEN_HEADROOM_EXHAUSTED, R.TPM_PROVIDER_EXHAUSTED]
    audit = result["audit"]
    assert audit["reproduced"] is True
    assert audit["explanation"]["binding_dimension"] == "rpm"
    assert audit["explanation"]["shortfall"] == {"rpm": 1}
    assert any("from elsewhere" in line for line in said)


def test_demo_queue_chapter_starts_a_run_at_its_estimate(journal_path):
    said: list[str] = []
    with Ledger.open(journal_path) as ledger:
        result = demo_queue.run_queue(ledger, said.append, "2026-11-29T14:00:00Z")
    assert result["estimated_start_at"] == "2026-11-29T14:00:30.000000Z"
    assert result["started_at"] == result["estimated_start_at"]
    assert result["behind_estimate"] == "2026-11-29T14:01:30.000000Z"  # after q-002's lease
    assert result["promoted_by_release"] == [{"goal": demo_queue.QUEUE_GOAL, "run": "q-003"}]
    assert any("QUEUED q-002: position 1" in line for line in said)
