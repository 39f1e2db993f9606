"""Every option and parameter that takes a duration, in one table (issue 29: one
duration grammar everywhere, SPEC §2.2 as revised): each takes a compound (`1h30m`),
a fraction where its quantity allows it (`--max-observation-age-s 0.5` was refused),
and refuses a bad one with the same words, naming the option the way its caller
spells it (the CLI's flag, the API's keyword, the environment variable)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from quotaledger import InvalidInput, Ledger
from quotaledger.journal.clock import max_clock_skew_us
from tests.support import run_cli

AT = "2026-11-29T14:00:00Z"
GRAMMAR = "(seconds, or e.g. 90s, 1.5h, 1h30m, 2d)"


class Option(NamedTuple):
    command: tuple[str, ...]
    flag: str
    fractional: bool
    """Whether the quantity takes a fraction of a second."""
    before: tuple[str, ...] = ()
    """What makes the rest of the command line valid."""
    prefix: str = ""
    """What the value is written after (`--deadline +D`)."""


HOST = ("--goal", "g", "--lane", "l1")
OPTIONS = [
    Option(("admit",), "--lease-s", False, ("--goal", "g", "--run", "r", "--forecast-tpm", "1")),
    Option(("reject",), "--retry-after-s", True, ("--goal", "g")),
    Option(("configure",), "--max-observation-age-s", True, ("--goal", "g")),
    Option(("configure",), "--cooldown-base-s", False, ("--goal", "g")),
    Option(("configure",), "--cooldown-max-s", False, ("--goal", "g")),
    Option(("whatif",), "--max-observation-age-s", True, ("--goal", "g")),
    Option(("host", "phase"), "--max-phase", True, (*HOST, "--deadline", "+1m")),
    Option(("host", "phase"), "--deadline", True, HOST, prefix="+"),
    Option(("inspect",), "--lock-timeout-s", True, ("--goal", "g")),
]
IDS = [f"{' '.join(o.command)} {o.flag}" for o in OPTIONS]


@pytest.fixture
def journal(journal_path: str) -> str:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=AT)
        ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=AT)
    return journal_path


def _run(option: Option, value: str, journal: str) -> Any:
    return run_cli(*option.command, *option.before, option.flag, option.prefix + value,
                   "--journal", journal, "--json", "--at", AT)  # fmt: skip


@pytest.mark.parametrize("option", OPTIONS, ids=IDS)
def test_every_duration_option_takes_a_compound(option: Option, journal: str) -> None:
    done = _run(option, "1h30m", journal)
    assert done.code in (0, 1), (done.stdout, done.stderr)


@pytest.mark.parametrize("option", OPTIONS, ids=IDS)
def test_a_fraction_where_the_quantity_allows_it(option: Option, journal: str) -> None:
    done = _run(option, "1m0.5s", journal)
    if option.fractional:
        assert done.code in (0, 1), (done.stdout, done.stderr)
    else:
        assert done.code == 2, done.stdout
        message = done.json["error"]["message"]
        assert message == f"{option.flag} must be a whole number of seconds, got '1m0.5s'"


@pytest.mark.parametrize("option", OPTIONS, ids=IDS)
def test_every_bad_duration_is_worded_alike_naming_the_flag(option: Option, journal: str) -> None:
    done = _run(option, "1h30", journal)
    assert done.code == 2, done.stdout
    assert done.json["error"]["message"] == f"{option.flag} '1h30' is not a duration {GRAMMAR}"


ENVIRONMENT = ["QUOTALEDGER_LOCK_TIMEOUT_S", "QUOTALEDGER_MAX_CLOCK_SKEW_S"]


@pytest.mark.parametrize("variable", ENVIRONMENT)
def test_the_environments_durations_take_the_grammar(variable: str, journal: str) -> None:
    args = ("observe", "--goal", "g", "--uncached-input", "0", "--cached-input", "0",
            "--output", "0", "--journal", journal, "--json")  # fmt: skip
    assert run_cli(*args, env={variable: "1m30.5s"}).code == 0
    bad = run_cli(*args, env={variable: "1h30"})
    assert bad.code == 2, bad.stdout
    assert bad.json["error"] == {
        "code": "invalid_duration",
        "message": f"{variable} '1h30' is not a duration {GRAMMAR}",
        **{k: v for k, v in bad.json["error"].items() if k not in ("code", "message")},
    }


def test_the_clock_skew_bound_reads_the_grammar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUOTALEDGER_MAX_CLOCK_SKEW_S", "1m30.5s")
    assert max_clock_skew_us() == 90_500_000
    monkeypatch.setenv("QUOTALEDGER_MAX_CLOCK_SKEW_S", "1d0.5s")
    with pytest.raises(InvalidInput) as caught:
        max_clock_skew_us()
    assert caught.value.code == "invalid_duration"
    assert caught.value.message.startswith("QUOTALEDGER_MAX_CLOCK_SKEW_S '1d0.5s' must be")


class Parameter(NamedTuple):
    method: str
    keyword: str
    fractional: bool
    given: dict[str, Any]
    """Valid values of the other parameters (`at: None`: it takes no `at`)."""
    text: bool = False
    """The API takes it as text in the grammar (a number of seconds otherwise)."""


PARAMETERS = [
    Parameter("admit", "lease_s", False, {"goal": "g", "run": "r", "forecast_tpm": 1}),
    Parameter("reject", "retry_after_s", True, {"goal": "g"}),
    Parameter("configure", "max_observation_age_s", True, {"goal": "g"}),
    Parameter("configure", "cooldown_base_s", False, {"goal": "g"}),
    Parameter("configure", "cooldown_max_s", False, {"goal": "g"}),
    Parameter("whatif", "max_observation_age_s", True, {"goal": "g", "at": None}),
    Parameter("host_phase", "max_phase", True, {"goal": "g", "lane": "l", "deadline": "+1m"}, True),
]


@pytest.mark.parametrize(
    "parameter", PARAMETERS, ids=[f"{p.method} {p.keyword}" for p in PARAMETERS]
)
def test_the_api_takes_fractions_where_the_quantity_allows_them(
    parameter: Parameter, journal: str
) -> None:
    value: Any = "1m0.5s" if parameter.text else 60.5
    with Ledger.open(journal) as ledger:
        call: Callable[..., Any] = getattr(ledger, parameter.method)
        given = {"at": AT, **parameter.given, parameter.keyword: value}
        kwargs = {key: value for key, value in given.items() if value is not None}
        if parameter.fractional:
            assert call(**kwargs)["ok"] in (True, False)
        else:
            with pytest.raises(InvalidInput) as caught:
                call(**kwargs)
            assert parameter.keyword in caught.value.message
        if parameter.text:
            with pytest.raises(InvalidInput) as bad:
                call(**{**kwargs, parameter.keyword: "1h30"})
            assert bad.value.message == f"{parameter.keyword} '1h30' is not a duration {GRAMMAR}"


def test_a_bad_relative_deadline_names_the_keyword(journal: str) -> None:
    with Ledger.open(journal) as ledger, pytest.raises(InvalidInput) as bad:
        ledger.host_phase(goal="g", lane="l", deadline="+1h30", at=AT)
    assert bad.value.message == f"deadline '1h30' is not a duration {GRAMMAR}"
