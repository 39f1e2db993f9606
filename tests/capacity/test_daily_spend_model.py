"""The product held to an independent model of SPEC §12.3 and §12.4
(`independent_daily_spend.py`): random histories of prices, observations (with runs
and models), admissions, releases and caps, over more than a day; after every step the
tpd/rpd figures and the spend agree, and every admission decides as the model does."""

from __future__ import annotations

import hashlib
import tempfile
import uuid
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaledger.api import Ledger
from quotaledger.journal.clock import US_PER_S, format_us, wall_us
from tests.capacity.independent_daily_spend import Model

BASE_US = (wall_us() // US_PER_S - 40 * 86_400) * US_PER_S
"""Forty days ago, whole seconds: histories stay in the past (SPEC §2.2's bound)."""
RUNS = ("r1", "r2", "r3")
MODELS = ("m1", "m2", "m3")


def dollars(top: str) -> st.SearchStrategy[float]:
    """Dollars with at most 6 decimals (as a JSON number carries them)."""
    return st.decimals(min_value=0, max_value=Decimal(top), places=6, allow_nan=False).map(float)


gaps = st.one_of(
    st.integers(0, 5).map(float),
    st.floats(0.000_001, 3.0),
    st.sampled_from([3_600.0, 40_000.0, 86_399.5, 86_400.0, 90_000.0]),
)
price_step = st.tuples(
    st.just("price"),
    st.fixed_dictionaries(
        {
            "model": st.sampled_from(MODELS[:2]),
            "input_usd_per_mtok": dollars("40"),
            "output_usd_per_mtok": dollars("40"),
            "cached_input_usd_per_mtok": st.one_of(st.none(), dollars("40")),
        }
    ),
)
observe_step = st.tuples(
    st.just("observe"),
    st.fixed_dictionaries(
        {
            "run": st.one_of(st.none(), st.sampled_from(RUNS)),
            "model": st.one_of(st.none(), st.sampled_from(MODELS)),
            "uncached_input": st.integers(0, 5_000),
            "cached_input": st.integers(0, 5_000),
            "cache_write_input": st.integers(0, 1_000),
            "output": st.integers(0, 3_000),
            "requests": st.one_of(st.none(), st.integers(0, 5)),
        }
    ),
)
admit_step = st.tuples(
    st.just("admit"),
    st.fixed_dictionaries(
        {
            "run": st.sampled_from(RUNS),
            "class_": st.sampled_from(["solver", "evaluator"]),
            "forecast_tokens": st.one_of(st.none(), st.integers(0, 30_000)),
            "forecast_requests": st.one_of(st.none(), st.integers(0, 12)),
            "forecast_usd": st.one_of(st.none(), dollars("1")),
        }
    ),
)
release_step = st.tuples(st.just("release"), st.fixed_dictionaries({"run": st.sampled_from(RUNS)}))
cap_step = st.tuples(
    st.just("cap"),
    st.fixed_dictionaries(
        {
            "cap_tokens": st.one_of(st.none(), st.integers(0, 80_000)),
            "cap_usd": st.one_of(st.none(), dollars("0.5")),
            "since_back_s": st.one_of(st.none(), st.integers(0, 200_000)),
        }
    ),
)
steps = st.lists(
    st.tuples(gaps, st.one_of(price_step, observe_step, admit_step, release_step, cap_step)),
    min_size=1,
    max_size=25,
)
limits = st.fixed_dictionaries(
    {
        "quota_tpd": st.one_of(st.none(), st.integers(20_000, 60_000)),
        "quota_rpd": st.one_of(st.none(), st.integers(5, 20)),
        "evaluator_reserve_tpd": st.integers(0, 5_000),
        "cached_input_weight": st.sampled_from([1.0, 0.5]),
    }
)


def past_genesis(path: Path, at: str) -> None:
    """A journal created at `at` (its genesis record by SPEC §2.1's formula): its
    journal-level events (prices) may then be stamped from that time on, as on a
    journal made earlier."""
    body = (
        f'{{"v":1,"seq":0,"at":"{at}","kind":"journal.created","goal":null,'
        f'"data":{{"journal_id":"{uuid.uuid4().hex}","format":"quotaledger/1"}},'
        f'"prev":"{"0" * 64}"}}'
    )
    digest = hashlib.sha256(body.encode()).hexdigest()
    path.write_text(body[:-1] + f',"hash":"{digest}"}}\n', encoding="utf-8")


def _close(left: Any, right: Fraction | Decimal) -> bool:
    return abs(Fraction(str(left)) - Fraction(right)) <= Fraction(1, 10**6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(limits, steps)
def test_the_product_agrees_with_the_model(config: dict[str, Any], history: list[Any]) -> None:
    model = Model(weight=Fraction(config["cached_input_weight"]))
    fields: dict[str, Any] = {"cached_input_weight": config["cached_input_weight"]}
    if config["quota_tpd"] is None and config["quota_rpd"] is None:
        config["quota_rpd"] = 10
    for dim in ("tpd", "rpd"):
        quota = config[f"quota_{dim}"]
        if quota is None:
            continue
        reserve = config["evaluator_reserve_tpd"] if dim == "tpd" else 0
        fields[f"quota_{dim}"] = quota
        fields[f"evaluator_reserve_{dim}"] = reserve
        model.limits[dim] = {
            "quota": quota,
            "target": quota * 9 // 10,
            "evaluator_reserve": reserve,
            "cold_start_reserve": 0,
        }
    now_us = BASE_US
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "j.jsonl"
        past_genesis(path, format_us(now_us))
        _run(path, model, fields, history, now_us)


def _run(path: Path, model: Model, fields: dict[str, Any], history: list[Any], now_us: int) -> None:
    with Ledger.open(str(path)) as ledger:
        ledger.configure(goal="g", at=format_us(now_us), **fields)
        for gap_s, (kind, step) in history:
            now_us += round(gap_s * US_PER_S)
            at = format_us(now_us)
            _step(ledger, model, kind, dict(step), now_us, at)
            _compare(ledger, model, now_us, at)


def _step(ledger: Any, model: Model, kind: str, step: dict[str, Any], now_us: int, at: str) -> None:
    if kind == "price":
        answer = ledger.price_set(at=at, **step)
        if answer["appended"]:
            cached = step["cached_input_usd_per_mtok"]
            model.price_set(
                step["model"],
                Decimal(repr(step["input_usd_per_mtok"])),
                Decimal(repr(step["output_usd_per_mtok"])),
                None if cached is None else Decimal(repr(cached)),
            )
    elif kind == "observe":
        ledger.observe(goal="g", at=at, **step)
        model.observe(now_us, **step)
    elif kind == "admit":
        if any(a.run == step["run"] for a in model.active_runs()):
            return  # idempotency is SPEC §3.3's, tested elsewhere
        answer = ledger.admit(goal="g", at=at, **step)
        forecasts = {k: v for k, v in step.items() if k.startswith("forecast_")}
        expected = model.reasons(now_us, step["class_"], **forecasts)
        assert answer.get("reasons", []) == expected, (answer, expected)
        if answer["admitted"]:
            model.admitted(step["run"], **forecasts)
    elif kind == "release":
        answer = ledger.release(goal="g", run=step["run"], at=at)
        if answer["released"]:
            model.released(step["run"])
    else:
        _cap(ledger, model, step, now_us, at)


def _cap(ledger: Any, model: Model, step: dict[str, Any], now_us: int, at: str) -> None:
    back = step.pop("since_back_s")
    given = {k: v for k, v in step.items() if v is not None}
    if not given:
        return
    since_us = None
    if back is not None:
        since_us = max(BASE_US, now_us - back * US_PER_S)
        given["cap_since"] = format_us(since_us)
    ledger.configure(goal="g", at=at, **given)
    if model.cap_since_us is None or since_us is not None:
        model.cap_since_us = now_us if since_us is None else since_us
    if "cap_tokens" in given:
        model.cap_tokens = given["cap_tokens"]
    if "cap_usd" in given:
        model.cap_usd = Decimal(repr(given["cap_usd"]))


def _compare(ledger: Any, model: Model, now_us: int, at: str) -> None:
    goal = ledger.inspect(goal="g", at=at)["goals"]["g"]
    for dim in model.limits:
        shown = goal["dimensions"][dim]
        assert _close(shown["usage"], model.usage(dim, now_us)), (dim, shown)
        assert _close(shown["reserved"], model.reserved(dim)), (dim, shown)
        assert _close(shown["load"], model.load(dim, now_us)), (dim, shown)
    tokens, usd, unpriced = model.spent()
    spend = goal["spend"]
    assert _close(spend["tokens"], tokens), spend
    assert _close(spend["usd"], usd), spend
    assert spend["unpriced_tokens"] == unpriced, spend
    assert _close(spend["reserved_usd"], model.reserved_usd()), spend
    assert _close(spend["reserved_tokens"], model.reserved("tpd")), spend
