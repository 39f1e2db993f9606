"""`whatif`: the recorded config flips nothing; a changed config flips exactly the
decisions an independent reading of the scenario expects; nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from quotaledger.api import Ledger
from tests.operators.operators_helpers import at, decision_seqs, random_history
from tests.support import run_cli


def _scenario(path: str) -> dict[str, int]:
    """target 9000: a, b admitted (4000 each); c (4000) and d (3000) refused for
    headroom; a released; e (4000) admitted; a 429 then f refused for the cooldown."""
    seqs: dict[str, int] = {}
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", quota_tpm=10_000, at=at(0))  # target: the default 9000
        ledger.observe(
            goal="g", uncached_input=0, cached_input=0, output=0, at=at(1)
        )  # heartbeat: fresh, 0 usage
        for t, run, forecast in ((2, "a", 4000), (3, "b", 4000), (4, "c", 4000), (5, "d", 3000)):
            seqs[run] = ledger.admit(goal="g", run=run, forecast_tpm=forecast, at=at(t))["event"][
                "seq"
            ]
        ledger.release(goal="g", run="a", at=at(6))
        seqs["e"] = ledger.admit(goal="g", run="e", forecast_tpm=4000, at=at(7))["event"]["seq"]
        ledger.release(goal="g", run="b", at=at(8))
        ledger.reject(goal="g", retry_after_s=30, at=at(9))
        seqs["f"] = ledger.admit(goal="g", run="f", forecast_tpm=1000, at=at(10))["event"]["seq"]
    return seqs


def _whatif(path: str, *args: str) -> dict:
    result = run_cli("whatif", "--journal", path, "--json", "--goal", "g", *map(str, args))
    assert result.code == 0, result.stdout
    return result.json


def _flipped(body: dict) -> list[tuple[str, bool]]:
    return [(f["run"], f["whatif_admitted"]) for f in body["flips"]]


def test_the_recorded_config_flips_nothing(journal_path: str) -> None:
    _scenario(journal_path)
    body = _whatif(journal_path)
    assert body["ok"] is True and body["decisions"] == 6 and body["flips"] == []
    assert body["assumptions"] and all(isinstance(a, str) for a in body["assumptions"])


def test_the_recorded_config_flips_nothing_on_a_long_generated_history(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    random_history(path, 600, seed=3)
    random_history(path, 200, seed=4, goal="h")  # a second goal in the same journal
    body = _whatif(path)
    assert body["decisions"] == len(decision_seqs(path, goal="g")) > 150
    assert body["flips"] == []


def test_a_larger_target_flips_the_headroom_refusals(journal_path: str) -> None:
    seqs = _scenario(journal_path)
    body = _whatif(journal_path, "--quota-tpm", 20_000, "--target-tpm", 18_000)
    # c: 8000 + 4000 <= 18000, d: 12000 + 3000 <= 18000; e still fits (b, c, d hold
    # 11000 after a's release); f is still refused: the cooldown does not depend on it.
    assert _flipped(body) == [("c", True), ("d", True)]
    flip = body["flips"][0]
    assert flip == {
        "seq": seqs["c"],
        "run": "c",
        "at": at(4),
        "recorded_admitted": False,
        "whatif_admitted": True,
        "whatif_reasons": [],
        "recorded_reasons": ["token_headroom_exhausted"],
        "whatif_idempotent": False,
    }


def test_counterfactual_admissions_hold_capacity_until_their_release(journal_path: str) -> None:
    _scenario(journal_path)
    body = _whatif(journal_path, "--quota-tpm", 20_000, "--target-tpm", 13_000)
    # c fits (12000); d does not (15000 > 13000); e at 7 s: b and c hold 8000 -> fits.
    assert _flipped(body) == [("c", True)]
    body = _whatif(journal_path, "--quota-tpm", 20_000, "--target-tpm", 11_000)
    # c: 12000 > 11000 still refused; d: 8000 + 3000 = 11000 fits. e at 7 s: b and d
    # hold 7000, + 4000 = 11000 fits exactly (it would not if a still held its 4000).
    assert _flipped(body) == [("d", True)]


def test_runs_refused_in_the_replay_hold_nothing(journal_path: str) -> None:
    _scenario(journal_path)
    body = _whatif(journal_path, "--target-tpm", 5_000)
    # b: 4000 + 4000 > 5000 -> refused (flip). After a's release nothing is held, so e
    # (4000) is admitted as it was — it would be refused if b still held its forecast.
    assert _flipped(body) == [("b", False)]
    assert body["flips"][0]["whatif_reasons"] == ["token_headroom_exhausted"]


def test_a_shorter_cooldown_flips_the_cooldown_refusal(journal_path: str) -> None:
    _scenario(journal_path)
    body = _whatif(journal_path, "--cooldown-max-s", 0)
    assert _flipped(body) == [("f", True)]


def test_a_larger_quota_moves_a_default_target_and_flips_the_headroom_refusals(
    journal_path: str,
) -> None:
    _scenario(journal_path)  # target 9000 is the default 90% of quota 10000
    body = _whatif(journal_path, "--quota-tpm", 20_000)
    # The target follows the quota as configure's default would: 18000, so c and d fit.
    assert _flipped(body) == [("c", True), ("d", True)]
    assert any("follows its source" in a for a in body["assumptions"])


def test_a_larger_quota_keeps_an_explicit_target(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", quota_tpm=10_000, target_tpm=5_000, at=at(0))
        ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(1))
        ledger.admit(goal="g", run="a", forecast_tpm=4000, at=at(2))
        ledger.admit(goal="g", run="b", forecast_tpm=4000, at=at(3))  # refused: 8000 > 5000
    assert _whatif(path, "--quota-tpm", 20_000)["flips"] == []
    assert _flipped(_whatif(path, "--quota-tpm", 20_000, "--target-tpm", 9_000)) == [("b", True)]


def test_a_case_gate_change_flips_admissions(journal_path: str) -> None:
    _scenario(journal_path)
    body = _whatif(journal_path, "--max-active-cases", 1)
    # A case gate built from SPEC defaults (target 1) where none was configured: the
    # scenario's requests give no --arm, so every admission flips (case_arm_required).
    assert _flipped(body) == [("a", False), ("b", False), ("e", False)]
    assert all("case_arm_required" in f["whatif_reasons"] for f in body["flips"])


@pytest.mark.parametrize(
    "args",
    [
        ["--quota-tpm", "5000", "--target-tpm", "9000"],  # a target above the quota
        ["--target-tpm", "20000"],  # above the recorded quota
        ["--cached-input-weight", "1.5"],
        ["--evaluator-reserve-tpm", "9000", "--cold-start-reserve-tpm", "1"],
        ["--since", "yesterday"],
        ["--since", at(5), "--until", at(1)],
    ],
)
def test_an_invalid_whatif_exits_2_and_writes_nothing(journal_path: str, args: list[str]) -> None:
    _scenario(journal_path)
    before = Path(journal_path).read_bytes()
    result = run_cli("whatif", "--journal", journal_path, "--json", "--goal", "g", *args)
    assert result.code == 2, result.stdout
    assert result.json["ok"] is False
    assert Path(journal_path).read_bytes() == before


def test_whatif_range(journal_path: str) -> None:
    _scenario(journal_path)
    body = _whatif(journal_path, "--since", at(4), "--until", at(5), "--target-tpm", 10_000)
    # Only c and d are replayed; a and b hold their recorded admissions (8000), so with
    # target 10000 neither c (12000) nor d (11000) fits.
    assert body["decisions"] == 2 and body["flips"] == []
    body = _whatif(
        journal_path,
        "--since",
        at(4),
        "--until",
        at(5),
        "--quota-tpm",
        20_000,
        "--target-tpm",
        11_000,
    )
    assert _flipped(body) == [("d", True)]


def test_whatif_writes_nothing(journal_path: str) -> None:
    _scenario(journal_path)
    before = Path(journal_path).read_bytes()
    listing = sorted(p.name for p in Path(journal_path).parent.iterdir())
    _whatif(journal_path, "--quota-tpm", 20_000, "--target-tpm", 18_000)
    text = run_cli("whatif", "--journal", journal_path, "--goal", "g", "--target-tpm", 5000)
    assert text.code == 0 and "assumptions:" in text.stdout and "b" in text.stdout
    assert Path(journal_path).read_bytes() == before
    assert sorted(p.name for p in Path(journal_path).parent.iterdir()) == listing
