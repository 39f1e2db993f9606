"""`from quotaledger import Ledger`: keyword-only, typed, and checked at the boundary.

A wrong type or range raises `InvalidInput` naming the parameter (never a bare
TypeError from deep inside), nothing is written, and a closed ledger refuses every
call.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import quotaledger
from quotaledger import Error, InvalidInput, Ledger

G = "g"
COUNTS = {"uncached_input": 1, "cached_input": 0, "output": 0}


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


@pytest.mark.parametrize(
    ("method", "kwargs", "parameter"),
    [
        ("observe", {"goal": G, **COUNTS, "uncached_input": "12"}, "uncached_input"),
        ("observe", {"goal": G, **COUNTS, "output": True}, "output"),
        ("observe", {"goal": 7, **COUNTS}, "goal"),
        ("admit", {"goal": G, "run": "r", "arm": "baseline", "lease_s": "soon"}, "lease_s"),
        ("reject", {"goal": G, "retry_after_s": [20]}, "retry_after_s"),
        ("observe", {"goal": G, **COUNTS, "at": dt.datetime(2026, 1, 1)}, "at"),
        ("observe", {"goal": G, **COUNTS, "at": 1_700_000_000}, "at"),
        ("turn_open", {"goal": G, "agent": "a", "turn": "t", "task": 5}, "task"),
        ("configure", {"goal": G, "quota_tpm": 1000.0}, "quota_tpm"),
        ("inspect", {"goal": G, "seq": "3"}, "seq"),
    ],
)
def test_a_wrong_type_names_the_parameter_and_writes_nothing(
    tmp_path: Path, method: str, kwargs: dict[str, Any], parameter: str
) -> None:
    path = tmp_path / "j.jsonl"
    with Ledger.open(str(path)) as ledger:
        before = _size(path)
        with pytest.raises(InvalidInput) as raised:
            getattr(ledger, method)(**kwargs)
    assert raised.value.context.get("parameter") == parameter, raised.value.message
    assert parameter in raised.value.message
    assert raised.value.exit_code == 2
    assert _size(path) == before


def test_positional_and_unknown_arguments_are_invalid_input(tmp_path: Path) -> None:
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        with pytest.raises(InvalidInput, match="keyword arguments only"):
            ledger.turn_resume("g", "a")  # type: ignore[misc]
        with pytest.raises(InvalidInput, match="bogus"):
            ledger.observe(goal=G, **COUNTS, bogus=1)  # type: ignore[call-arg]


def test_at_takes_an_aware_datetime_or_an_rfc3339_string(tmp_path: Path) -> None:
    now = dt.datetime.now(dt.UTC).replace(microsecond=123456)
    zone = dt.timezone(dt.timedelta(hours=2))
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        ledger.configure(goal=G, quota_tpm=1000, at=now - dt.timedelta(seconds=3))
        first = ledger.observe(goal=G, **COUNTS, at=now - dt.timedelta(seconds=2))
        second = ledger.observe(
            goal=G, **COUNTS, at=(now - dt.timedelta(seconds=1)).astimezone(zone)
        )
        third = ledger.observe(goal=G, **COUNTS, at=now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    expected = [now - dt.timedelta(seconds=2), now - dt.timedelta(seconds=1), now]
    for answer, moment in zip((first, second, third), expected, strict=True):
        assert answer["event"]["at"] == moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_closed_ledger_refuses_every_call(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "j.jsonl"))
    ledger.configure(goal=G, quota_tpm=1000)
    ledger.observe(goal=G, **COUNTS)
    ledger.close()
    ledger.close()  # closing twice is harmless
    for call in (
        lambda: ledger.inspect(),
        lambda: ledger.observe(goal=G, **COUNTS),
        lambda: ledger.digest(),
        lambda: ledger.turn_resume(goal=G, agent="a"),
    ):
        with pytest.raises(InvalidInput) as raised:
            call()
        assert raised.value.code == "ledger_closed"


@pytest.mark.parametrize("target", ["", None, 5])
def test_open_needs_a_target(target: Any) -> None:
    with pytest.raises(InvalidInput) as raised:
        Ledger.open(target)
    assert raised.value.context["parameter"] == "target"


def test_the_public_names() -> None:
    assert issubclass(InvalidInput, Error)
    assert quotaledger.Ledger is Ledger
    for name in quotaledger.__all__:
        assert getattr(quotaledger, name) is not None
    with pytest.raises(AttributeError):
        quotaledger.Nope  # noqa: B018


def test_every_use_case_is_a_keyword_only_api_method(tmp_path: Path) -> None:
    """Every use case of the registry (SPEC's method names: command words joined by
    `_`) is a Ledger method, and every one refuses positional arguments."""
    from quotaledger.usecases.registry import USE_CASES

    assert "admit" in USE_CASES and "host_status" in USE_CASES and "import_" in USE_CASES
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        for name in USE_CASES:
            method = getattr(ledger, name)
            with pytest.raises(InvalidInput) as refused:
                method("positional")
            assert refused.value.code == "invalid_argument", name
