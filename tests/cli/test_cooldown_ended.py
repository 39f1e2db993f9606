"""Issue 41: a passed cooldown reads as ended. `inspect`, a refusal and `audit` said
"cooldown until T" for a T already past at the time they describe, as if it held;
their JSON says `cooldown_active` beside `cooldown_until` (inspect, audit) and a
refusal's reasons say whether it held. A cooldown that holds still reads "until"."""

from __future__ import annotations

from pathlib import Path

from quotaledger import Ledger
from quotaledger.render.capacity import inspect_text
from quotaledger.render.operator import audit_text
from quotaledger.render.per_event import admit_text
from quotaledger.usecases.capacity import AdmitAnswer
from quotaledger.usecases.capacity_state import InspectAnswer
from quotaledger.usecases.decode import typed
from quotaledger.usecases.operator import AuditAnswer

AT = "2026-11-29T14:00:{:02d}Z"
UNTIL = "2026-11-29T14:00:12.000000Z"
ZERO = {"uncached_input": 0, "cached_input": 0, "output": 0}


def _texts(ledger: Ledger, run: str, second: int) -> dict[str, str]:
    at = AT.format(second)
    refused = ledger.admit(goal="g", run=run, arm="baseline", forecast_tpm=95_000, at=at)
    assert not refused["admitted"]
    inspected = ledger.inspect(goal="g", at=at)
    audited = ledger.audit(goal="g", run=run)
    assert inspected["goals"]["g"]["cooldown_active"] is (second < 12)
    assert audited["explanation"]["cooldown_active"] is (second < 12)
    return {
        "refusal": admit_text(typed(AdmitAnswer, refused), run),
        "inspect": inspect_text(typed(InspectAnswer, inspected)),
        "audit": audit_text(typed(AuditAnswer, audited)),
    }


def test_a_cooldown_reads_until_while_it_holds_and_ended_after(tmp_path: Path) -> None:
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        ledger.configure(goal="g", max_active_cases=2, quota_tpm=100_000, at=AT.format(0))
        ledger.observe(goal="g", **ZERO, at=AT.format(1))
        ledger.reject(goal="g", retry_after_s=10, at=AT.format(2))
        holding = _texts(ledger, "r1", 5)
        ended = _texts(ledger, "r2", 30)
    for face, text in holding.items():
        assert f"cooldown until {UNTIL}" in text, (face, text)
    for face, text in ended.items():
        assert f"cooldown until {UNTIL}" not in text, (face, text)
        assert f"cooldown ended {UNTIL}" in text, (face, text)
