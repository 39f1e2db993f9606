"""`audit`: every journaled decision reproduces on the state rebuilt just before it;
an edited (rehashed) history or a changed rule shows loudly as NOT REPRODUCED;
`earliest_admissible_at` is exact."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaledger.api import Ledger
from quotaledger.journal.clock import parse_at
from quotaledger.projections import capacity as cap
from quotaledger.projections import reasons as R
from tests.operators.operators_helpers import (
    STEP_DT_US,
    at,
    decision_seqs,
    play,
    random_history,
    random_step,
    rewrite,
)
from tests.support import run_cli, run_process

operation = st.randoms(use_true_random=False).map(random_step)
history = st.lists(st.tuples(st.sampled_from(STEP_DT_US), operation), min_size=5, max_size=60)


def _scenario(path: str) -> dict[str, int]:
    """A small known history: r1 admitted, r2 and r3 refused for headroom, a 429."""
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=4, quota_tpm=10_000, target_tpm=9_000,
                         at=at(0))  # fmt: skip
        ledger.observe(goal="g", run="r1", uncached_input=3000, cached_input=1000, output=500,
                       at=at(10))  # fmt: skip
        admitted = ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=4000, at=at(11))
        ledger.observe(
            goal="g", run="r2", uncached_input=2000, cached_input=0, output=500, at=at(20)
        )
        refused = ledger.admit(goal="g", run="r2", arm="control", forecast_tpm=3000, at=at(21))
        ledger.reject(goal="g", run="r2", retry_after_s=30, at=at(25))
        cooled = ledger.admit(goal="g", run="r3", arm="control", forecast_tpm=1000, at=at(30))
    return {
        "admitted": admitted["event"]["seq"],
        "refused": refused["event"]["seq"],
        "cooled": cooled["event"]["seq"],
    }


# -- reproduction --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=history)
def test_audit_reproduces_every_decision_of_a_generated_history(steps: list) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "j.jsonl")
        with Ledger.open(path) as ledger:
            play(ledger, steps)
        seqs = decision_seqs(path)
        with Ledger.open(path, write=False) as reader:
            for seq in seqs:
                result = reader.audit(seq=seq)
                assert result["reproduced"] is True, result["differences"]
                assert result["ok"] is True
                assert result["recorded"] == {
                    "admitted": result["replayed"]["admitted"],
                    "reasons": result["replayed"]["reasons"],
                }


def test_audit_reproduces_a_long_history_with_a_checkpoint(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    random_history(path, 400, seed=11)
    with Ledger.open(path) as ledger:
        ledger.checkpoint()  # fold_as_of may start from it for later decisions
    seqs = decision_seqs(path)
    assert len(seqs) > 100
    with Ledger.open(path, write=False) as reader:
        outcomes = {reader.audit(seq=seq)["reproduced"] for seq in seqs}
    assert outcomes == {True}


def test_audit_json_has_the_spec_keys(journal_path: str) -> None:
    seqs = _scenario(journal_path)
    result = run_cli("audit", "--journal", journal_path, "--json", "--seq", seqs["refused"])
    assert result.code == 0, result.stdout
    body = result.json
    assert {"ok", "event", "recorded", "replayed", "reproduced", "explanation"} <= set(body)
    assert set(body["event"]) >= {"seq", "hash", "kind", "at", "goal", "run"}
    assert set(body["recorded"]) == {"admitted", "reasons"}
    assert {"admitted", "reasons"} <= set(body["replayed"])
    assert set(body["explanation"]) >= {
        "binding_constraint",
        "shortfall_tpm",
        "usage_tpm",
        "reserved_tpm",
        "load_tpm",
        "target_tpm",
        "top_contributors",
        "cooldown_until",
        "coverage",
        "earliest_admissible_at",
    }
    assert body["event"]["run"] == "r2" and body["event"]["kind"] == "capacity.refused"


def test_audit_explains_a_headroom_refusal(journal_path: str) -> None:
    seqs = _scenario(journal_path)
    with Ledger.open(journal_path, write=False) as reader:
        body = reader.audit(seq=seqs["refused"])
    ex = body["explanation"]
    assert body["recorded"] == {"admitted": False, "reasons": [R.TOKEN_HEADROOM_EXHAUSTED]}
    # usage 3000+1000+500 (r1) + 2000+500 (r2) = 7000 > reserved 4000 -> load 7000;
    # 7000 + 3000 - 9000 = 1000 short.
    assert ex["binding_constraint"] == R.TOKEN_HEADROOM_EXHAUSTED
    assert (ex["usage_tpm"], ex["reserved_tpm"], ex["load_tpm"]) == (7000, 4000, 7000)
    assert ex["target_tpm"] == 9000 and ex["shortfall_tpm"] == 1000
    assert [(c["run"], c["usage_tpm"]) for c in ex["top_contributors"]] == [
        ("r1", 4500),
        ("r2", 2500),
    ]
    assert ex["top_contributors"][0]["samples"][0]["uncached_input"] == 3000
    assert ex["coverage"] == "measured" and ex["cooldown_until"] is None
    assert [r["run"] for r in ex["reservations"]] == ["r1"]
    # r1's sample leaves the window at 70 s: usage 2500, load max(2500, 4000) = 4000, fits.
    assert ex["earliest_admissible_at"] == at(70)


def test_audit_explains_a_cooldown_refusal_and_an_admission(journal_path: str) -> None:
    seqs = _scenario(journal_path)
    with Ledger.open(journal_path, write=False) as reader:
        cooled = reader.audit(seq=seqs["cooled"])
        admitted = reader.audit(seq=seqs["admitted"])
    ex = cooled["explanation"]
    assert cooled["recorded"]["reasons"] == [R.CAPACITY_COOLDOWN_ACTIVE]
    assert ex["binding_constraint"] == R.CAPACITY_COOLDOWN_ACTIVE
    # SPEC §7's formula applies to every token-gate reason: 7000 + 1000 + 0 - 9000.
    assert ex["shortfall_tpm"] == -1000
    assert ex["cooldown_until"] == at(55)
    assert ex["earliest_admissible_at"] == at(55)  # load 7000 + 1000 <= 9000 once it ends
    assert admitted["explanation"]["binding_constraint"] is None
    assert admitted["explanation"]["earliest_admissible_at"] == at(11)
    assert admitted["reproduced"] is True


def test_audit_by_hash_and_by_goal_and_run(journal_path: str) -> None:
    seqs = _scenario(journal_path)
    with Ledger.open(journal_path, write=False) as reader:
        by_seq = reader.audit(seq=seqs["refused"])
        by_hash = reader.audit(hash=by_seq["event"]["hash"])
        latest_r2 = reader.audit(goal="g", run="r2")
    assert by_hash["event"] == by_seq["event"]
    assert latest_r2["event"]["seq"] == seqs["refused"]
    cli = run_cli("audit", "--journal", journal_path, "--json", "--goal", "g", "--run", "r1")
    assert cli.code == 0 and cli.json["event"]["seq"] == seqs["admitted"]


@pytest.mark.parametrize(
    "args, code",
    [
        (["--seq", "2"], "not_a_decision"),  # an observation
        (["--seq", "999"], "seq_out_of_range"),  # past the head (SPEC §8)
        (["--hash", "ab" * 32], "decision_not_found"),
        (["--hash", "xyz"], "invalid_option"),
        (["--goal", "g", "--run", "nobody"], "unknown_run"),  # no event names it
        (["--goal", "g"], "invalid_option"),
        (["--seq", "3", "--goal", "g", "--run", "r1"], "invalid_option"),
        ([], "invalid_option"),
    ],
)
def test_audit_bad_selectors_exit_2(journal_path: str, args: list[str], code: str) -> None:
    _scenario(journal_path)
    result = run_cli("audit", "--journal", journal_path, "--json", *args)
    assert result.code == 2, result.stdout
    assert result.json["error"]["code"] == code


def test_audit_of_settlement_decisions_reproduces(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.budget_configure(goal="g", allowed_units=100, window_hours=1, at=at(0))
        opened = ledger.turn_open(goal="g", agent="a", turn="t1", task="k", at=at(1))
        written = ledger.turn_writeback(goal="g", agent="a", turn="t1", amount=5, at=at(2))
        effect = opened["effect"]
        spent = ledger.turn_spend(goal="g", agent="a", turn="t1", effect=effect, amount=5, at=at(3))
    with Ledger.open(journal_path, write=False) as reader:
        for answer in (opened, written, spent):
            body = reader.audit(seq=answer["event"]["seq"])
            assert body["reproduced"] is True, body["differences"]
            assert body["event"]["kind"] == answer["event"]["kind"]


# -- tampering and changed rules -------------------------------------------------------------


def test_an_edited_refusal_with_recomputed_hashes_is_not_reproduced(journal_path: str) -> None:
    seqs = _scenario(journal_path)

    def forge(event: dict) -> dict | None:
        if event["seq"] == seqs["refused"]:
            event["data"]["reasons"] = [R.TARGET_CAPACITY_EXHAUSTED]
            return event
        return None

    rewrite(journal_path, forge)
    verify = run_cli("verify", "--journal", journal_path, "--json")
    assert verify.code == 0, verify.stdout  # the chain itself is valid again
    result = run_cli("audit", "--journal", journal_path, "--seq", seqs["refused"])
    assert result.code == 1
    assert "NOT REPRODUCED" in result.stdout
    body = run_cli("audit", "--journal", journal_path, "--json", "--seq", seqs["refused"]).json
    assert body["reproduced"] is False and body["ok"] is False
    assert body["recorded"]["reasons"] == [R.TARGET_CAPACITY_EXHAUSTED]
    assert body["replayed"]["reasons"] == [R.TOKEN_HEADROOM_EXHAUSTED]


def test_an_edited_observation_makes_the_next_decision_not_reproduced(journal_path: str) -> None:
    seqs = _scenario(journal_path)

    def forge(event: dict) -> dict | None:
        if event["kind"] == "capacity.observed" and event["data"]["run"] == "r1":
            event["data"]["uncached_input"] = 1000  # the record said 3000
            return event
        return None

    rewrite(journal_path, forge)
    body = run_cli("audit", "--journal", journal_path, "--json", "--seq", seqs["admitted"]).json
    assert body["reproduced"] is False
    assert any("usage_tpm" in d for d in body["differences"]), body["differences"]
    # The refusal's recorded figures no longer match either (and, with 2000 TPM less
    # usage, the replay admits it).
    refused = run_cli("audit", "--journal", journal_path, "--json", "--seq", seqs["refused"]).json
    assert refused["reproduced"] is False
    assert refused["replayed"]["admitted"] is True


def _patch_capacity(monkeypatch, name: str, value: object) -> None:
    """A changed rule: `name` replaced wherever the capacity package binds it (its
    modules import one another's names, so each holds its own reference)."""
    for module in (cap, cap.config, cap.events, cap.fold, cap.evaluation, cap.decision):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, value)


def test_a_changed_rule_is_not_reproduced(journal_path: str, monkeypatch) -> None:
    seqs = _scenario(journal_path)
    original = cap.token_reasons

    def lenient(ev, request):  # a "new release" that ignores headroom
        reasons = original(ev, request)
        return [r for r in reasons if r != R.TOKEN_HEADROOM_EXHAUSTED]

    _patch_capacity(monkeypatch, "token_reasons", lenient)
    result = run_cli("audit", "--journal", journal_path, "--seq", seqs["refused"])
    assert result.code == 1 and "NOT REPRODUCED" in result.stdout
    body = run_cli("audit", "--journal", journal_path, "--json", "--seq", seqs["refused"]).json
    assert body["replayed"]["admitted"] is True and body["reproduced"] is False


def test_a_changed_figure_rule_is_not_reproduced(journal_path: str, monkeypatch) -> None:
    """Even a rule change that keeps every verdict shows: the figures differ."""
    seqs = _scenario(journal_path)
    _patch_capacity(monkeypatch, "WINDOW_US", 61 * 1_000_000)
    body = run_cli("audit", "--journal", journal_path, "--json", "--seq", seqs["admitted"]).json
    assert body["reproduced"] is True  # no sample sits between 60 and 61 s back
    _patch_capacity(monkeypatch, "weighted_tpm", lambda u, c, o, w, cw=0: u + o)  # cached ignored
    body = run_cli("audit", "--journal", journal_path, "--json", "--seq", seqs["admitted"]).json
    assert body["reproduced"] is False
    assert any(d.startswith("receipt.usage_tpm") for d in body["differences"])


# -- earliest admissible time ---------------------------------------------------------------


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=history)
def test_earliest_admissible_at_is_exact(steps: list) -> None:
    """Deciding again at earliest_admissible_at passes; 1 µs earlier it fails; null means
    no later time passes (checked at every change point and far in the future)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "j.jsonl")
        with Ledger.open(path) as ledger:
            play(ledger, steps)
        with Ledger.open(path, write=False) as reader:
            records = {r.seq: (r, p) for r, p, _ in reader.journal.records()}
            for seq in decision_seqs(path):
                record, payload = records[seq]
                if record.kind != "capacity.refused":
                    continue
                body = reader.audit(seq=seq)
                goal = cap.goal_of(reader.journal.fold_as_of(seq=seq - 1)[0].capacity, "g")
                request, at_us = payload.request, parse_at(record.at)
                earliest = body["explanation"]["earliest_admissible_at"]
                if earliest is None:
                    later = [*cap.change_points_after(goal, at_us), at_us + 10**12]
                    assert not any(cap.decide_admission(goal, request, t).ok for t in later)
                    continue
                earliest_us = parse_at(earliest)
                assert earliest_us > at_us
                assert cap.decide_admission(goal, request, earliest_us).ok
                assert not cap.decide_admission(goal, request, earliest_us - 1).ok


def test_earliest_admissible_at_when_a_lease_ends(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", max_active_cases=1, at=at(0))
        ledger.admit(goal="g", run="r1", arm="baseline", lease_s=90, at=at(1))
        refused = ledger.admit(goal="g", run="r2", arm="baseline", at=at(2))
        body = ledger.audit(seq=refused["event"]["seq"])
    assert body["explanation"]["binding_constraint"] == R.TARGET_CAPACITY_EXHAUSTED
    assert body["explanation"]["earliest_admissible_at"] == at(91)


def test_earliest_admissible_at_is_null_when_never(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=10_000, at=at(0))
        ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(0))
        refused = ledger.admit(goal="g", run="r1", forecast_tpm=9_500, at=at(1))
        body = ledger.audit(seq=refused["event"]["seq"])
    assert body["recorded"]["reasons"] == [R.FORECAST_EXCEEDS_TARGET, R.TOKEN_HEADROOM_EXHAUSTED]
    assert body["explanation"]["earliest_admissible_at"] is None
    assert body["explanation"]["shortfall_tpm"] == 500


def test_audit_writes_nothing(journal_path: str) -> None:
    seqs = _scenario(journal_path)
    before = Path(journal_path).read_bytes()
    listing = sorted(p.name for p in Path(journal_path).parent.iterdir())
    for seq in seqs.values():
        run_cli("audit", "--journal", journal_path, "--seq", seq)
    assert Path(journal_path).read_bytes() == before
    assert sorted(p.name for p in Path(journal_path).parent.iterdir()) == listing


def test_audit_as_a_real_process(journal_path: str) -> None:
    seqs = _scenario(journal_path)
    good = run_process("audit", "--journal", journal_path, "--json", "--seq", seqs["refused"])
    assert good.code == 0 and good.json["reproduced"] is True

    def forge(event: dict) -> dict | None:
        if event["seq"] == seqs["refused"]:
            event["data"]["figures"]["usage_tpm"] = 100  # the record said 7000
            return event
        return None

    rewrite(journal_path, forge)
    bad = run_process("audit", "--journal", journal_path, "--seq", seqs["refused"])
    assert bad.code == 1 and "NOT REPRODUCED" in bad.stdout
    assert "figures.usage_tpm: recorded 100, replayed 7000" in bad.stdout
