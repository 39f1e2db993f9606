"""The demo's settlement chapter: a real runtime killed between writeback and spend,
then the resumed spend runs once and its replay adds nothing."""

from __future__ import annotations

import pytest

from quotaledger.api import Ledger
from quotaledger.tools import demo_settlement
from tests.settlement.settlement_helpers import events
from tests.support import run_cli


@pytest.mark.slow
def test_demo_resumes_a_settlement_after_a_sigkilled_runtime(journal_path) -> None:
    said: list[str] = []
    summary = demo_settlement.run(
        lambda: Ledger.open(journal_path), said.append, "demo", journal_path
    )
    assert summary["ok"] is True
    assert summary["crash"]["returncode"] == -9
    assert summary["resumed"]["phase"] == "spend_owed"
    assert summary["resumed"]["command"].startswith("quotaledger turn spend --goal demo ")
    assert summary["new_turn_refused"] == ["settlement_owed"]
    assert summary["foreign_spend_refused"] == ["spend_identity_mismatch"]
    assert summary["spend"]["appended"] is True and summary["replay"]["appended"] is False
    assert summary["debited_units"] == summary["resumed"]["amount"]
    assert summary["final_phase"] == "settled"
    assert any("SIGKILL" in line for line in said)
    spends = [e["data"]["turn"] for e in events(journal_path, "quota.spent")]
    assert spends == ["turn-1", "turn-2"]  # one debit per turn, none from the killed runtime
    assert run_cli("verify", "--journal", journal_path, "--json").code == 0
