"""Payload members added after the first version (SPEC §3.1): defaults, old lines, new lines.

A line written before a member existed decodes as before and, re-encoded, gives the
very same bytes (so an old event and a new event without the new members look alike);
the new members round-trip; unknown members are still refused.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput
from quotaledger.projections import capacity as cap
from tests.capacity.capacity_helpers import at

# Payloads as the first version wrote them (its canonical encoding, member order kept).
OLD_LINES: dict[str, bytes] = {
    cap.CONFIGURED: (
        b'{"cases":{"max_active_cases":3,"target_active_cases":3,"max_baseline_cases":3,'
        b'"max_test_cases":3,"reserved_test_cases":0},"tokens":{"quota_tpm":100000,'
        b'"target_tpm":90000,"evaluator_reserve_tpm":0,"cold_start_reserve_tpm":0,'
        b'"cached_input_weight":1.0,"max_observation_age_s":60,"cooldown_base_s":15,'
        b'"cooldown_max_s":300}}'
    ),
    cap.OBSERVED: (
        b'{"run":"r1","uncached_input":10,"cached_input":2,"output":3,"requests":null,'
        b'"coverage":"measured","source":null}'
    ),
    cap.REJECTED: (
        b'{"run":null,"retry_after_s":30,"cooldown_s":30,"clamped":false,'
        b'"cooldown_until":"2026-11-29T14:00:30.000000Z","streak":1,"detail":null}'
    ),
    cap.RELEASED: b'{"run":"r1"}',
}

OLD_REQUEST = (
    b'{"run":"r1","case":null,"arm":"baseline","class":"solver","forecast_tpm":500,"lease_s":null}'
)
OLD_FIGURES = (
    b'{"usage_tpm":15,"usage":{"uncached_input":10,"cached_input":2,"output":3},'
    b'"reserved_tpm":0,"load_tpm":15,"target_tpm":90000,"headroom_tpm":89985,'
    b'"forecast_tpm":500,"coverage":"measured","observation_stale":false,'
    b'"last_observation_at":"2026-11-29T14:00:00.000000Z","cooldown_until":null,'
    b'"active_cases":{"total":0,"baseline":0,"test":0},"target_active_cases":3,'
    b'"max_active_cases":3,"quota_tpm":100000,"evaluator_reserve_tpm":0,'
    b'"cold_start_reserve_tpm":0}'
)


@pytest.mark.parametrize("kind", sorted(OLD_LINES))
def test_an_old_line_decodes_and_reencodes_to_the_same_bytes(kind: str) -> None:
    payload = msgspec.json.decode(OLD_LINES[kind], type=cap.EVENTS[kind])
    assert msgspec.json.encode(payload) == OLD_LINES[kind]


def test_old_payloads_take_the_new_members_defaults() -> None:
    observed = msgspec.json.decode(OLD_LINES[cap.OBSERVED], type=cap.CapacityObserved)
    assert observed.cache_write_input == 0 and observed.provider is None
    rejected = msgspec.json.decode(OLD_LINES[cap.REJECTED], type=cap.CapacityRejected)
    assert rejected.provider is None
    assert rejected.retry_after_s == 30 and isinstance(rejected.retry_after_s, int)
    configured = msgspec.json.decode(OLD_LINES[cap.CONFIGURED], type=cap.CapacityConfigured)
    assert configured.explicit == []
    assert configured.tokens is not None and configured.tokens.limits == {}
    request = msgspec.json.decode(OLD_REQUEST, type=cap.AdmitRequest)
    assert (request.forecast_itpm, request.forecast_otpm, request.forecast_rpm) == (None,) * 3
    assert msgspec.json.encode(request) == OLD_REQUEST
    figures = msgspec.json.decode(OLD_FIGURES, type=cap.Figures)
    assert figures.dimensions == {} and figures.binding_dimension is None
    assert figures.usage.cache_write_input == 0


def test_old_decision_events_decode() -> None:
    refused = b'{"request":%s,"reasons":["token_headroom_exhausted"],"figures":%s}' % (
        OLD_REQUEST,
        OLD_FIGURES,
    )
    payload = msgspec.json.decode(refused, type=cap.CapacityRefused)
    assert payload.reasons == ["token_headroom_exhausted"]


NEW_PAYLOADS: list[tuple[str, dict[str, Any]]] = [
    (
        cap.OBSERVED,
        {
            "run": "r1",
            "uncached_input": 10,
            "cached_input": 2,
            "cache_write_input": 7,
            "output": 3,
            "requests": 1,
            "coverage": "measured",
            "source": None,
            "provider": {
                "rpm": {"limit": 50, "remaining": 49, "reset_at": "2026-11-29T14:00:01.000000Z"},
                "itpm": {"limit": 1000, "remaining": 500, "reset_at": None},
            },
        },
    ),
    (
        cap.REJECTED,
        {
            "run": None,
            "retry_after_s": 1.5,
            "cooldown_s": 1.5,
            "clamped": False,
            "cooldown_until": "2026-11-29T14:00:01.500000Z",
            "streak": 1,
            "detail": None,
            "provider": {"tpm": {"limit": 10, "remaining": 0, "reset_at": None}},
        },
    ),
    (
        cap.CONFIGURED,
        {
            "cases": None,
            "tokens": {
                "quota_tpm": None,
                "target_tpm": None,
                "evaluator_reserve_tpm": 0,
                "cold_start_reserve_tpm": 0,
                "cached_input_weight": 1.0,
                "max_observation_age_s": 60,
                "cooldown_base_s": 15,
                "cooldown_max_s": 300,
                "limits": {
                    "rpm": {
                        "quota": 50,
                        "target": 45,
                        "evaluator_reserve": 5,
                        "cold_start_reserve": 0,
                    }
                },
            },
            "explicit": ["quota_rpm", "evaluator_reserve_rpm"],
        },
    ),
]


@pytest.mark.parametrize(("kind", "data"), NEW_PAYLOADS, ids=[k for k, _ in NEW_PAYLOADS])
def test_new_members_round_trip(kind: str, data: dict[str, Any]) -> None:
    line = json.dumps(data, separators=(",", ":")).encode()
    payload = msgspec.json.decode(line, type=cap.EVENTS[kind])
    assert msgspec.to_builtins(payload) == data
    assert msgspec.json.encode(payload) == line


def test_admit_request_forecasts_round_trip() -> None:
    line = OLD_REQUEST[:-1] + b',"forecast_itpm":400,"forecast_otpm":100,"forecast_rpm":2}'
    request = msgspec.json.decode(line, type=cap.AdmitRequest)
    assert (request.forecast_itpm, request.forecast_otpm, request.forecast_rpm) == (400, 100, 2)
    assert msgspec.json.encode(request) == line


@pytest.mark.parametrize(
    ("kind", "line"),
    [
        # unknown members are still an error
        (cap.OBSERVED, OLD_LINES[cap.OBSERVED][:-1] + b',"cache_read_input":1}'),
        # an unknown dimension in a provider report
        (cap.OBSERVED, OLD_LINES[cap.OBSERVED][:-1] + b',"provider":{"tpd":{"limit":1,'
         b'"remaining":1,"reset_at":null}}}'),
        # a provider report without its reset_at member
        (cap.REJECTED, OLD_LINES[cap.REJECTED][:-1] + b',"provider":{"rpm":{"limit":1,'
         b'"remaining":1}}}'),
        # a negative Retry-After
        (cap.REJECTED, OLD_LINES[cap.REJECTED].replace(b'"retry_after_s":30',
                                                       b'"retry_after_s":-0.5')),
        # quota_tpm may be null only with limits
        (cap.CONFIGURED, OLD_LINES[cap.CONFIGURED].replace(b'"quota_tpm":100000,"target_tpm":90000',
                                                           b'"quota_tpm":null,"target_tpm":null')),
        # a dimension's target above its quota
        (cap.CONFIGURED, OLD_LINES[cap.CONFIGURED][:-2] + b',"limits":{"otpm":{"quota":10,'
         b'"target":11,"evaluator_reserve":0,"cold_start_reserve":0}}}}'),
        # limits of tpm live in TokenConfig's own fields, not under limits
        (cap.CONFIGURED, OLD_LINES[cap.CONFIGURED][:-2] + b',"limits":{"tpm":{"quota":10,'
         b'"target":9,"evaluator_reserve":0,"cold_start_reserve":0}}}}'),
    ],
)  # fmt: skip
def test_malformed_new_members_do_not_decode(kind: str, line: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(line, type=cap.EVENTS[kind])


def test_cache_write_input_counts_in_usage_and_reports_apart(tmp_path: Any) -> None:
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        ledger.configure(goal="g", quota_tpm=1000, at=at(0))
        answer = ledger.observe(
            goal="g", uncached_input=10, cached_input=4, cache_write_input=100, output=1, at=at(1)
        )
        assert answer["usage_tpm"] == 115
        assert answer["usage"] == {
            "uncached_input": 10,
            "cached_input": 4,
            "cache_write_input": 100,
            "output": 1,
        }
        goal = ledger.inspect(goal="g", at=at(2))["goals"]["g"]
        assert goal["usage_tpm"] == 115 and goal["usage"]["cache_write_input"] == 100
        assert ledger.inspect(goal="g", at=at(61.5))["goals"]["g"]["usage_tpm"] == 0


def test_a_fractional_retry_after_sets_a_fractional_cooldown(tmp_path: Any) -> None:
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        ledger.configure(goal="g", quota_tpm=1000, cooldown_base_s=15, at=at(0))
        rejected = ledger.reject(goal="g", retry_after_s=1.5, at=at(1))
        assert rejected["retry_after_s"] == 1.5 and rejected["cooldown_s"] == 1.5
        assert rejected["cooldown_until"] == at(2.5)
        # a whole number of seconds is recorded as an integer, as it always was
        whole = ledger.reject(goal="g", retry_after_s=3.0, at=at(3))
        assert whole["retry_after_s"] == 3 and isinstance(whole["retry_after_s"], int)
        # float noise never ends a cooldown a microsecond late
        tenth = ledger.reject(goal="g", retry_after_s=0.1, at=at(10))
        assert tenth["cooldown_until"] == at(10.1)
        with pytest.raises(InvalidInput):
            ledger.reject(goal="g", retry_after_s=float("nan"), at=at(11))


def test_provider_reports_are_recorded_in_dimension_order(tmp_path: Any) -> None:
    path = tmp_path / "j.jsonl"
    report = {
        "rpm": {"limit": 50, "remaining": 49, "reset_at": at(1.02)},
        "tpm": {"limit": 1000, "remaining": 900, "reset_at": at(6)},
    }
    with Ledger.open(str(path)) as ledger:
        ledger.configure(goal="g", quota_tpm=1000, at=at(0))
        ledger.observe(
            goal="g", uncached_input=1, cached_input=0, output=1, provider=report, at=at(1)
        )
        ledger.reject(goal="g", provider={"otpm": report["rpm"]}, at=at(2))
        with pytest.raises(InvalidInput) as bad:
            ledger.observe(
                goal="g",
                uncached_input=0,
                cached_input=0,
                output=0,
                provider={"rpm": {"limit": 1}},
                at=at(3),
            )
        assert bad.value.code == "invalid_provider_report"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert list(lines[2]["data"]["provider"]) == ["tpm", "rpm"]
    assert lines[3]["data"]["provider"] == {"otpm": report["rpm"]}
    assert len(lines) == 4  # the bad report appended nothing
