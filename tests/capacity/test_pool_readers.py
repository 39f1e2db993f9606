"""Pools' readers (SPEC §12.1): `pools`, `inspect --pool P`, goal readers refusing a
pool's name and pool readers a goal's, the metrics families, on the API, the CLI and
the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quotaledger import Error, Ledger
from tests.capacity.capacity_helpers import at
from tests.server.serving import serving


def borrowing(ledger: Any) -> None:
    """a borrows 200 beyond its 500 while b (lending 100 of its 500) idles."""
    ledger.pool_configure(pool="org", quota_tpm=1000, target_tpm=1000, at=at(0))
    ledger.configure(goal="a", pool="org", pool_share=0.5, priority=3, at=at(0))
    ledger.configure(goal="b", pool="org", pool_share=0.5, pool_lending_limit=0.1, at=at(0))
    assert ledger.admit(goal="a", run="r1", forecast_tpm=600, at=at(1))["admitted"]
    report = {"tpm": {"limit": 5000, "remaining": 4000, "reset_at": at(50)}}
    ledger.observe(goal="b", uncached_input=0, cached_input=0, output=0, provider=report, at=at(2))


EXPECTED = {
    "dimensions": {
        "tpm": {
            "quota": 1000,
            "target": 1000,
            "usage": 0,
            "reserved": 600,
            "provider_used": 1000,
            "load": 1000,
        }
    },
    "cooldown_until": None,
    "members": {
        "a": {
            "share": 0.5,
            "borrowing_limit": 0.5,
            "lending_limit": 0.5,
            "priority": 3,
            "dimensions": {"tpm": {"load": 600, "borrowed": 100, "protected": 0}},
        },
        "b": {
            "share": 0.5,
            "borrowing_limit": 0.5,
            "lending_limit": 0.1,
            "priority": 0,
            "dimensions": {"tpm": {"load": 0, "borrowed": 0, "protected": 400}},
        },
    },
    "queue_length": 0,
    "spend": {  # no cap: the members' whole spending in the pool (SPEC §12.4's shape)
        "since": None,
        "tokens": 0,
        "usd": 0.0,
        "unpriced_tokens": 0,
        "cap_tokens": None,
        "cap_usd": None,
        "reserved_tokens": 0,
        "reserved_usd": 0.0,
        "remaining_tokens": None,
        "remaining_usd": None,
    },
}


def test_pools_and_inspect_pool(tmp_path: Path) -> None:
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        borrowing(ledger)
        pools = ledger.pools(at=at(3))
        assert pools["pools"]["org"] == {"at": at(3), **EXPECTED}
        one = ledger.inspect(pool="org", at=at(3))
        assert set(one) == {"ok", "pools"}
        shown = one["pools"]["org"]
        assert shown["provider"]["tpm"]["used"] == 1000 and shown["provider"]["tpm"]["live"]
        assert shown["members"] == EXPECTED["members"]


def test_goal_readers_refuse_a_pool_and_pool_readers_a_goal(tmp_path: Path) -> None:
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        borrowing(ledger)
        for call in (ledger.inspect, ledger.validity, ledger.host_status):
            with pytest.raises(Error) as raised:
                call(goal="org")
            assert raised.value.code == "unknown_goal"
            assert "inspect --pool org" in raised.value.message
        with pytest.raises(Error) as raised:
            ledger.inspect(pool="a")
        assert raised.value.code == "unknown_pool"
        assert sorted(ledger.goals()["goals"]) == ["a", "b"]


def test_metrics_families(tmp_path: Path) -> None:
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        borrowing(ledger)
        metrics = ledger.metrics(at=at(3))["metrics"]

    def samples(name: str) -> dict[tuple[tuple[str, str], ...], Any]:
        return {tuple(sorted(s["labels"].items())): s["value"] for s in metrics[name]["samples"]}

    pool_tpm = (("dimension", "tpm"), ("pool", "org"))
    assert samples("quotaledger_pool_load") == {pool_tpm: 1000}
    assert samples("quotaledger_pool_target") == {pool_tpm: 1000}
    a = (("dimension", "tpm"), ("goal", "a"), ("pool", "org"))
    b = (("dimension", "tpm"), ("goal", "b"), ("pool", "org"))
    assert samples("quotaledger_pool_goal_load") == {a: 600, b: 0}
    assert samples("quotaledger_pool_borrowed") == {a: 100, b: 0}


def test_the_cli_prints_pools(cli: Any) -> None:
    assert cli("pool", "configure", "--pool", "org", "--quota-rpm", "100").code == 0
    assert cli("configure", "--goal", "g", "--pool", "org", "--pool-share", "0.25").code == 0
    done = cli("pools")
    assert done.code == 0 and done.json["pools"]["org"]["members"]["g"]["share"] == 0.25


def test_the_server_serves_pools(tmp_path: Path) -> None:
    with serving(tmp_path / "s.jsonl") as server:
        made = server.post("pool_configure", pool="org", quota_tpm=1000)
        assert made.status == 200 and made.json["appended"]
        joined = server.post("configure", goal="g", pool="org", pool_share=0.5)
        assert joined.json["config"]["pool"]["share"] == 0.5
        admitted = server.post("admit", goal="g", run="r1", forecast_tpm=100)
        assert admitted.json["receipt"]["pool"]["name"] == "org"
        listed = server.get("pools")
        assert listed.json["pools"]["org"]["members"]["g"]["dimensions"]["tpm"]["load"] == 100
        document = server.call("GET", "/openapi.json").json
        assert "/v1/pool_configure" in document["paths"] and "/v1/pools" in document["paths"]
        bad = server.post("configure", goal="g2", pool="org", pool_share=0.6)
        assert bad.status == 400 and bad.json["error"]["code"] == "pool_overcommitted"


def test_audit_of_a_pooled_decision(tmp_path: Path) -> None:
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        ledger.pool_configure(pool="org", quota_tpm=1000, target_tpm=1000, at=at(0))
        ledger.configure(goal="a", pool="org", pool_share=0.5, at=at(0))
        ledger.configure(goal="b", pool="org", pool_share=0.5, at=at(0))  # lends it all
        ledger.observe(goal="b", uncached_input=300, cached_input=0, output=0, at=at(1))
        assert ledger.admit(goal="a", run="r1", forecast_tpm=500, at=at(2))["admitted"]
        refused = ledger.admit(goal="a", run="r2", forecast_tpm=250, at=at(3))
        assert refused["reasons"] == ["pool_headroom_exhausted"]
        audit = ledger.audit(seq=refused["event"]["seq"])
        assert audit["reproduced"] is True
        explanation = audit["explanation"]
        assert explanation["binding_constraint"] == "pool_headroom_exhausted"
        assert explanation["pool"]["dimensions"]["tpm"]["load"] == 800
        # b's 300 leaves the window at 61 s: then 500 + 250 fits.
        assert explanation["earliest_admissible_at"] == at(61)


def test_a_pooled_command_decodes_its_pools_sections_alone(tmp_path: Path) -> None:
    """SPEC §12.1's cost: a decision folds the pool and its members, not the other goals."""
    journal = str(tmp_path / "c.jsonl")
    with Ledger.open(journal, checkpoint_every=10**9) as ledger:
        ledger.pool_configure(pool="org", quota_tpm=1000, at=at(0))
        for n in range(3):
            ledger.configure(goal=f"m{n}", pool="org", pool_share=0.25, at=at(0))
        for n in range(50):
            ledger.configure(goal=f"g{n}", max_active_cases=2, at=at(0))
        ledger.checkpoint()
    with Ledger.open(journal) as ledger:
        assert ledger.admit(goal="m1", run="r", forecast_tpm=10, at=at(1))["admitted"]
        source = ledger.journal._fold.source
        assert source is not None and source.loaded == {"m1", "m0", "m2", "org"}
    with Ledger.open(journal, write=False) as ledger:
        assert ledger.inspect(pool="org")["pools"]["org"]["dimensions"]["tpm"]["load"] == 10
        source = ledger.journal._fold.source
        assert source is not None and source.loaded == {"m1", "m0", "m2", "org"}


def test_whatif_over_a_pool(tmp_path: Path, cli: Any, journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.pool_configure(pool="org", quota_tpm=1000, target_tpm=1000, at=at(0))
        ledger.configure(goal="a", pool="org", pool_share=0.5, at=at(0))
        ledger.configure(goal="b", pool="org", pool_share=0.5, pool_lending_limit=0.1, at=at(0))
        assert ledger.admit(goal="a", run="r1", forecast_tpm=600, at=at(1))["admitted"]
        assert ledger.admit(goal="a", run="r2", forecast_tpm=50, at=at(2))["reasons"] == [
            "pool_share_protected"
        ]
        # b at 0.4 guarantees 400 - 100 = 300: 650 + 300 fits the 1000.
        shared = ledger.whatif(pool="org", share=["b=0.4"])
        assert [(f["goal"], f["run"], f["whatif_admitted"]) for f in shared["flips"]] == [
            ("a", "r2", True)
        ]
        assert shared["changes"] == {"share b": 0.4} and shared["decisions"] == 2
        lower = ledger.whatif(pool="org", target_tpm=500)
        assert [(f["run"], f["whatif_reasons"]) for f in lower["flips"]] == [
            ("r1", ["pool_forecast_exceeds_target", "pool_headroom_exhausted",
                    "pool_borrowing_limit"]),
            ("r2", []),
        ]  # fmt: skip
        for bad, code in (
            ({"pool": "org", "share": ["b=1.5"]}, "invalid_pool_share"),
            ({"goal": "a", "share": ["b=0.4"]}, "invalid_option"),
            ({"goal": "a", "pool": "org"}, "invalid_option"),
            ({"pool": "a"}, "unknown_pool"),
            ({}, "invalid_option"),
        ):
            with pytest.raises(Error) as raised:
                ledger.whatif(**bad)
            assert raised.value.code == code, bad
    done = cli("whatif", "--pool", "org", "--share", "b=0.4")
    assert done.code == 0 and done.json["flips"][0]["run"] == "r2"


def test_a_pooled_goals_readiness_is_its_pools_too(tmp_path: Path) -> None:
    """`inspect --goal`, `goals` and the metrics' `admission_ready` and `next_action`
    include the pool's reasons (SPEC §3.5, §12.1): a goal whose pool refuses a forecast
    of 1 is not ready, and a pool's cooldown is waited for."""
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        ledger.pool_configure(pool="org", quota_tpm=1000, target_tpm=1000, at=at(0))
        ledger.configure(goal="a", pool="org", pool_share=0.5, at=at(0))
        ledger.configure(goal="b", pool="org", pool_share=0.5, at=at(0))
        fresh = ledger.inspect(goal="b", at=at(0))["goals"]["b"]
        assert (fresh["admission_ready"], fresh["next_action"]) == (True, "backfill_to_target")
        assert ledger.admit(goal="a", run="r1", forecast_tpm=1000, at=at(1))["admitted"]
        refused = ledger.admit(goal="b", run="r2", forecast_tpm=1, dry_run=True, at=at(2))
        assert refused["reasons"] == ["pool_headroom_exhausted"]
        full = ledger.inspect(goal="b", at=at(2))["goals"]["b"]
        assert (full["admission_ready"], full["next_action"]) == (False, "hold_at_target")
        summary = ledger.goals(at=at(2))["goals"]["b"]
        assert (summary["admission_ready"], summary["next_action"]) == (False, "hold_at_target")
        metrics = ledger.metrics(goal="b", at=at(2))["metrics"]
        assert metrics["quotaledger_admission_ready"]["samples"][0]["value"] == 0
        ledger.release(goal="a", run="r1", at=at(3))
        ledger.reject(goal="a", at=at(4))  # the pool's cooldown: 15 s
        cooling = ledger.inspect(goal="b", at=at(5))["goals"]["b"]
        assert (cooling["admission_ready"], cooling["next_action"]) == (False, "wait_for_cooldown")
        after = ledger.inspect(goal="b", at=at(20))["goals"]["b"]
        assert (after["admission_ready"], after["next_action"]) == (True, "backfill_to_target")


def test_goals_hide_pools_on_every_handle(tmp_path: Path) -> None:
    """`goals` lists goals only (SPEC §12.1), whatever the handle folded: a reader with
    a checkpoint, a reader that has folded nothing yet, now or as of a time."""
    from quotaledger.services.operator import OperatorService
    from quotaledger.usecases.operator import GoalsRequest

    journal = str(tmp_path / "c.jsonl")
    with Ledger.open(journal, checkpoint_every=2) as ledger:
        borrowing(ledger)
        ledger.checkpoint()
    with Ledger.open(journal, write=False) as reader:
        assert sorted(reader.goals()["goals"]) == ["a", "b"]
        assert sorted(reader.goals(at=at(3))["goals"]) == ["a", "b"]
    for when in (None, at(3)):
        with OperatorService.open_unfolded(journal) as service:
            assert sorted(service.goals(GoalsRequest(at=when)).goals) == ["a", "b"]


def test_a_pooled_goals_metrics_include_its_pool(tmp_path: Path) -> None:
    """`metrics --goal G` of a pooled goal has its pool's families (SPEC §12.1), and no
    other pool's."""
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        borrowing(ledger)
        ledger.pool_configure(pool="other", quota_tpm=500, at=at(0))
        ledger.configure(goal="c", pool="other", pool_share=1, at=at(0))
        ledger.configure(goal="lone", quota_tpm=100, at=at(0))
        metrics = ledger.metrics(goal="a", at=at(3))["metrics"]
        lone = ledger.metrics(goal="lone", at=at(3))["metrics"]
    loads = {
        (s["labels"]["pool"], s["labels"]["dimension"]): s["value"]
        for s in metrics["quotaledger_pool_load"]["samples"]
    }
    assert loads == {("org", "tpm"): 1000}
    goal_loads = {s["labels"]["goal"] for s in metrics["quotaledger_pool_goal_load"]["samples"]}
    assert goal_loads == {"a", "b"}
    assert "quotaledger_pool_load" not in lone
