"""Issue 2's check, against real `quotaledger` processes and a second §2.1 implementation.

quotaledger's journals (every event kind) verify line by line with naive_spec_journal; journals
naive_spec_journal writes — its own key order, nulls for absent optionals, integers where a
float is allowed, non-ASCII text raw or escaped — are read, verified and appended to
by quotaledger, and the result still verifies independently.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.journal.naive_spec_journal import SPEC_KINDS, SpecViolation, SpecWriter, read_journal
from tests.support import run_process

# SPEC §5.1: effect = first 32 hex of SHA-256 of goal \0 agent \0 task \0 turn.
EFFECT = hashlib.sha256(b"s\0a1\0k1\0t1").hexdigest()[:32]


def rl(*args: str, journal: Path) -> Any:
    """`quotaledger ARGS --journal J --json` as a real process; (exit code, JSON)."""
    cut = args.index("--") if "--" in args else len(args)  # options before a probe's CMD
    res = run_process(*args[:cut], "--journal", str(journal), "--json", *args[cut:])
    assert "Traceback" not in res.stderr, res.stderr
    return res.code, res.json


def test_quotaledger_journal_with_every_kind_verifies_independently(tmp_path: Path) -> None:
    journal = tmp_path / "demo.jsonl"
    res = run_process("demo", "--journal", str(journal))
    assert res.code == 0, res.stderr
    # Kinds the demo does not write, through the CLI too.
    assert rl("host", "stop", "--goal", "h", journal=journal)[0] == 0
    assert rl("host", "stop", "--goal", "h", "--clear", journal=journal)[0] == 0
    replan = ("host", "replan", "--goal", "h", "--lane", "l1", "--replan", "r1")
    assert rl(*replan, "--open", journal=journal)[0] == 0
    assert rl(*replan, "--settle", journal=journal)[0] == 0
    code, out = rl("probe", "run", "--goal", "p", "--input-revision", "rév-1", "--", "true",
                   journal=journal)  # fmt: skip
    assert code == 0, out
    # A member's 429 cools its pool down (pool.cooldown, SPEC §12.1).
    assert rl("reject", "--goal", "demo-pool-nightly", journal=journal)[0] == 0
    code, out = rl("release", "--goal", "demo-campaign", "--run", "ghost", journal=journal)
    assert code == 0 and out["appended"] is False
    # A queue entry cancelled (capacity.dequeued, SPEC §12.2).
    assert rl("configure", "--goal", "qq", "--max-active-cases", "1", journal=journal)[0] == 0
    held = ("admit", "--goal", "qq", "--arm", "baseline", "--lease-s", "60")
    assert rl(*held, "--run", "r1", journal=journal)[0] == 0
    assert rl(*held, "--run", "r2", "--queue", journal=journal)[0] == 1
    code, out = rl("admit", "--goal", "qq", "--run", "r2", "--cancel", journal=journal)
    assert code == 0 and out["cancelled"] is True

    parsed = read_journal(journal.read_bytes())
    kinds = {r["kind"] for r in parsed.records}
    assert kinds == set(SPEC_KINDS), set(SPEC_KINDS) ^ kinds
    code, out = rl("verify", journal=journal)
    assert code == 0
    assert out["head"]["hash"] == parsed.head["hash"]
    assert out["head"]["seq"] == parsed.head["seq"] == len(parsed.records) - 1
    assert out["head"]["journal_id"] == parsed.records[0]["data"]["journal_id"]


def _spec_journal(writer: SpecWriter) -> dict[str, str]:
    """A journal written from the spec's tables alone; returns hashes by name."""
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)

    def t(i: int) -> str:  # recent: the observation is fresh for quotaledger's admit
        return (base + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    hashes = {"genesis": writer.genesis(t(0)), "observed_at": t(2)}
    writer.append(
        t(1),
        "capacity.configured",
        "g",
        {
            "cases": {
                "max_active_cases": 3,
                "target_active_cases": 3,
                "max_baseline_cases": 3,
                "max_test_cases": 3,
                "reserved_test_cases": 0,
            },
            "tokens": {
                "quota_tpm": 100000,
                "target_tpm": 90000,
                "evaluator_reserve_tpm": 0,
                "cold_start_reserve_tpm": 0,
                "cached_input_weight": 1,  # an integer where a float is allowed
                "max_observation_age_s": 3600,
                "cooldown_base_s": 15,
                "cooldown_max_s": 300,
            },
        },
    )
    writer.append(
        t(2),
        "capacity.observed",
        "g",
        {
            "run": None,
            "uncached_input": 1000,
            "cached_input": 500,
            "output": 250,
            "requests": None,
            "coverage": "measured",
            "source": "compteur — 計測 ✓",
        },
    )
    writer.append(t(3), "capacity.released", "g", {"run": "never-admitted"})
    writer.append(t(4), "budget.configured", "s", {"allowed_units": 1000, "window_hours": 24})
    writer.append(t(5), "turn.opened", "s", {"agent": "a1", "turn": "t1", "task": "k1"})
    writer.append(
        t(6),
        "turn.writeback_verified",
        "s",
        {"agent": "a1", "turn": "t1", "effect": EFFECT, "amount": 40},
    )
    writer.append(t(7), "host.stop_requested", "h", {})
    writer.append(t(8), "host.stop_cleared", "h", {})
    writer.append(
        t(9),
        "host.phase_appended",
        "h",
        {
            "lane": "l1",
            "phase": 1,
            "deadline": "2099-01-01T00:00:00.000000Z",
            "session": "s1",
            "profile": "p1",
            "basis": "initial",
            "bound": None,
            "handoff": None,
        },
    )
    writer.append(
        t(10),
        "host.attempt_started",
        "h",
        {
            "lane": "l1",
            "phase": 1,
            "attempt": "a1",
            "number": 1,
            "session": "s1",
            "profile": "p1",
            "pid": 4242,
        },
    )
    writer.append(
        t(11), "host.process_exited", "h", {"attempt": "a1", "exit_code": 0, "signal": None}
    )
    hashes["returned"] = writer.append(
        t(12),
        "host.attempt_returned",
        "h",
        {
            "attempt": "a1",
            "outcome": "failed",
            "failure": {"code": "retryable", "detail": "flaky — réseau"},
            "cursor": "c7",
        },
    )
    hashes["head"] = writer.prev
    return hashes


@pytest.mark.parametrize("ascii_escapes", [False, True], ids=["raw-utf8", "ascii-escapes"])
def test_independently_written_journal_is_read_and_extended_by_quotaledger(
    tmp_path: Path, ascii_escapes: bool
) -> None:
    writer = SpecWriter(ascii_escapes=ascii_escapes)
    hashes = _spec_journal(writer)
    journal = tmp_path / "spec.jsonl"
    journal.write_bytes(writer.bytes())
    read_journal(journal.read_bytes())  # the writer is right by its own reading
    count = len(writer.lines)

    code, out = rl("verify", journal=journal)
    assert code == 0, out
    assert out["head"] == {
        "seq": count - 1,
        "hash": hashes["head"],
        "journal_id": writer.journal_id,
    }
    code, out = rl("inspect", "--goal", "g", "--at", hashes["observed_at"], journal=journal)
    assert code == 0, out
    goal = out["goals"]["g"]
    assert goal["usage_tpm"] == 1750  # weight 1 counts cached input fully
    assert goal["usage"] == {
        "uncached_input": 1000,
        "cached_input": 500,
        "cache_write_input": 0,
        "output": 250,
    }
    assert goal["active_runs"] == []
    res = run_process("log", "--journal", str(journal), "--json")
    assert res.code == 0, res.stderr
    logged = [json.loads(line) for line in res.stdout.splitlines()]
    assert [e["seq"] for e in logged] == list(range(count))
    assert any("計測" in json.dumps(e, ensure_ascii=False) for e in logged)
    code, out = rl("turn", "resume", "--goal", "s", "--agent", "a1", journal=journal)
    assert code == 0 and out["phase"] == "spend_owed" and out["amount"] == 40, out
    code, out = rl("host", "status", "--goal", "h", journal=journal)
    assert code == 0 and out["lanes"]["l1"]["last_failure"]["hash"] == hashes["returned"], out

    # quotaledger appends to it; the whole file still verifies independently.
    admit = ("admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--forecast-tpm", "1000")
    code, out = rl(*admit, journal=journal)
    assert code == 0 and out["admitted"] is True and out["appended"] is True, out
    code, out = rl("turn", "spend", "--goal", "s", "--agent", "a1", "--turn", "t1",
                   "--effect", EFFECT, "--amount", "40", journal=journal)  # fmt: skip
    assert code == 0 and out["appended"] is True, out
    code, out = rl("host", "start", "--goal", "h", "--lane", "l1", "--attempt", "a2",
                   "--session", "s1", "--profile", "p1", journal=journal)  # fmt: skip
    # A retryable failure below the attempt limit may be retried by a plain start.
    assert code == 0 and out["appended"] is True, out
    parsed = read_journal(journal.read_bytes())
    assert parsed.lines[:count] == writer.lines  # quotaledger never rewrote the old bytes
    assert [r["kind"] for r in parsed.records[count:]] == [
        "capacity.admitted",
        "quota.spent",
        "host.attempt_started",
    ]
    assert rl("verify", journal=journal)[0] == 0


def test_quotaledger_reports_what_the_independent_reader_refuses(tmp_path: Path) -> None:
    """Both implementations agree where an independently written journal breaks."""
    writer = SpecWriter()
    _spec_journal(writer)
    good = writer.bytes()
    lines = good.splitlines(keepends=True)
    cases = {
        "flipped byte": lines[0]
        + lines[1].replace(b'"quota_tpm"', b'"quota_tpM"')
        + b"".join(lines[2:]),
        "seq gap": lines[0] + lines[1] + b"".join(lines[3:]),
        "unknown member": _rewrite(lines, 3, {"run": "x", "extra": 1}),
    }
    for name, raw in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        path.write_bytes(raw)
        with pytest.raises(SpecViolation) as mine:
            read_journal(raw)
        code, out = rl("verify", journal=path)
        assert code == 3, (name, out)
        err = out["error"]
        assert err["code"] == "journal_corrupt" and err["seq"] == mine.value.seq, (name, out)
        assert err["offset"] == mine.value.offset and err["reason"], (name, out)
        assert path.read_bytes() == raw


def _rewrite(lines: list[bytes], seq: int, data: dict[str, Any]) -> bytes:
    """Re-chain a journal after replacing record `seq`'s data (hashes stay valid)."""
    writer = SpecWriter(reverse_data_keys=False)
    for line in lines:
        rec = json.loads(line)
        writer.append(
            rec["at"], rec["kind"], rec["goal"], data if rec["seq"] == seq else rec["data"]
        )
    return writer.bytes()


def _spec_figures(active: int) -> dict[str, Any]:
    """`figures` with exactly the members SPEC §3.3 lists, for a case-gate-only goal."""
    return {
        "usage_tpm": 0,
        "usage": {"uncached_input": 0, "cached_input": 0, "output": 0},
        "reserved_tpm": 0,
        "load_tpm": 0,
        "target_tpm": None,
        "headroom_tpm": None,
        "forecast_tpm": None,
        "coverage": "measured",
        "cooldown_until": None,
        "active_cases": {"total": active, "baseline": 0, "test": active},
    }


def test_admissions_written_from_the_spec_lists_are_read(tmp_path: Path) -> None:
    """A receipt and figures with only §3.3's members (no quotaledger extras) decode."""
    writer = SpecWriter()
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)

    def t(i: int) -> str:
        return (base + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    writer.genesis(t(0))
    cases = {"max_active_cases": 1, "target_active_cases": 1, "max_baseline_cases": 1,
             "max_test_cases": 1, "reserved_test_cases": 0}  # fmt: skip
    writer.append(t(1), "capacity.configured", "c", {"cases": cases, "tokens": None})

    def request(run: str) -> dict[str, Any]:
        return {"run": run, "case": None, "arm": "treatment", "class": "solver",
                "forecast_tpm": None, "lease_s": None}  # fmt: skip

    receipt = {**_spec_figures(0), "run": "r1", "at": t(2), "cases": "slot_taken",
               "tokens": "not_configured"}  # fmt: skip
    writer.append(t(2), "capacity.admitted", "c", {"request": request("r1"), "receipt": receipt})
    refused = {
        "request": request("r2"),
        "reasons": [
            "target_capacity_exhausted",
            "total_capacity_exhausted",
            "test_capacity_exhausted",
        ],
        "figures": _spec_figures(1),
    }
    writer.append(t(3), "capacity.refused", "c", refused)
    journal = tmp_path / "spec.jsonl"
    journal.write_bytes(writer.bytes())

    assert rl("verify", journal=journal)[0] == 0
    code, out = rl("inspect", "--goal", "c", journal=journal)
    assert code == 0 and [r["run"] for r in out["goals"]["c"]["active_runs"]] == ["r1"], out
    code, out = rl("audit", "--seq", "3", journal=journal)
    # The decision replays; quotaledger-only figure members the writer left out may be
    # reported as differences (audit compares figures too), never §3.3's members.
    assert out["replayed"] == out["recorded"], json.dumps(out)
    spec_members = set(_spec_figures(0))
    for difference in out.get("differences", []):
        assert difference.split(":")[0].removeprefix("figures.") not in spec_members, difference
    admit_r1 = ("admit", "--goal", "c", "--run", "r1", "--arm", "treatment")
    code, out = rl(*admit_r1, journal=journal)
    assert code == 0 and out["idempotent"] is True and out["appended"] is False, out
    code, out = rl("release", "--goal", "c", "--run", "r1", journal=journal)
    assert code == 0 and out["released"] is True, out
    read_journal(journal.read_bytes())
