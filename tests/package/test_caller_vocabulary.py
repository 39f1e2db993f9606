"""Issue 29: a message names the parameter in the caller's vocabulary (generated).

Every method of `quotaledger.Ledger` and every keyword of its request type is fed
values of every wrong kind (an int for a string, a string for an int, a float, None,
a list, a dict, a bool) and of the right kind but doubtful (negative, 10**30, a
trailing newline, empty). Whatever the call does, nothing but a `quotaledger.Error`
escapes, and no message speaks the CLI's or the engine's vocabulary: no `--flag`, no
environment variable, no class or method of the implementation. A value of the wrong
kind is `InvalidInput` whose message names the keyword as the API spells it.

The server is the same decoding with the body's keys: a sample of the same values
posted as JSON names the body key; the CLI's side (its flags) is
tests/cli/test_bad_input_generated.py's.
"""

from __future__ import annotations

import datetime as dt
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quotaledger import Error, InvalidInput, Ledger
from quotaledger.usecases.decode import field_rule
from quotaledger.usecases.registry import USE_CASES
from tests.server.serving import serving
from tests.support import run_cli

G = "g"
EFFECT = "0" * 32
BIND = "0" * 64


def _minimal(tmp: Path) -> dict[str, dict[str, Any]]:
    """Each method's keywords that make a valid call on the `_setup` journal."""
    lane = {"goal": G, "lane": "l"}
    turn = {"goal": G, "agent": "a", "turn": "t"}
    return {
        "configure": {"goal": G, "quota_tpm": 100_000, "max_active_cases": 3},
        "observe": {"goal": G, "uncached_input": 0, "cached_input": 0, "output": 0},
        "admit": {"goal": G, "run": "r"},
        "reject": {"goal": G},
        "release": {"goal": G, "run": "r"},
        "inspect": {},
        "price_set": {"model": "m", "input_usd_per_mtok": 1, "output_usd_per_mtok": 2},
        "prices": {},
        "pool_configure": {"pool": "pool-p", "quota_tpm": 1000},
        "pools": {},
        "host_phase": {**lane, "deadline": "+1h"},
        "host_start": {**lane, "attempt": "a1", "session": "s", "profile": "p"},
        "host_exit": {"goal": G, "attempt": "a1"},
        "host_return": {"goal": G, "attempt": "a1", "outcome": "completed"},
        "host_continue": {
            **lane,
            "bind": BIND,
            "deadline": "+1h",
            "session": "s",
            "cursor": "c",
            "profile": "p",
        },
        "host_stop": {"goal": G},
        "host_replan": {**lane, "replan": "rp", "action": "open"},
        "host_heartbeat": {**lane, "session": "s"},
        "host_status": {"goal": G},
        "budget_configure": {"goal": G, "allowed_units": 100, "window_hours": 1},
        "turn_open": {**turn, "task": "x"},
        "turn_writeback": {**turn, "amount": 1},
        "turn_spend": {**turn, "effect": EFFECT, "amount": 1},
        "turn_resume": {"goal": G, "agent": "a"},
        "turn_status": {"goal": G},
        "goals": {},
        "audit": {"seq": 1},
        "whatif": {"goal": G},
        "report": {"goal": G, "out": str(tmp / "report.html")},
        "metrics": {},
        "validity": {"goal": G},
        "verify": {},
        "digest": {},
        "log": {},
        "export": {"to": str(tmp / "export.jsonl")},
        "repair": {"truncate_after": 10**6},
        "checkpoint": {},
        "import_": {"file": str(tmp / "absent.jsonl")},
        "probe_run": {"goal": G, "command": ["true"]},
        "latest_probe": {"goal": G},
    }


VALUES: list[Any] = [7, "7", 1.5, None, ["x"], {"a": 1}, True, -1, 10**30, "g\n", ""]
"""Wrong kinds for most keywords, and values of the right kind a rule may refuse."""

LEAKS = re.compile(
    r"--|QUOTALEDGER_|Service|Request\b|__init__|msgspec|Struct|\$\.|Expected `|NoneType"
)
"""What a message to the Python API never says: a CLI flag, an environment variable
(no keyword is one), the implementation's classes, methods and library."""

NOT_FED = {("log", "follow")}
"""`log(follow=...)` waits for events forever once given a true value."""


def _kinds(hint: Any) -> set[type]:
    """The Python types a keyword's type accepts (`object`: anything)."""
    hint = getattr(hint, "__origin__", hint) if _annotated(hint) else hint
    origin = typing.get_origin(hint)
    if hint is Any:
        return {object}
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_kinds(arg) for arg in typing.get_args(hint)))
    if origin is typing.Literal:
        return {type(arg) for arg in typing.get_args(hint)}
    if origin is not None:
        return {origin}
    if hint is type(None):
        return {type(None)}
    if hint is float:
        return {float, int}
    return {hint}


def _annotated(hint: Any) -> bool:
    return typing.get_origin(hint) is typing.Annotated


def _never_valid(value: Any, kinds: set[type]) -> bool:
    if object in kinds:
        return False
    if isinstance(value, bool):
        return bool not in kinds
    return type(value) not in kinds


def _names(keyword: str, message: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(keyword)}(?!\w)", message) is not None


def _setup(ledger: Ledger) -> None:
    ledger.configure(goal=G, quota_tpm=100_000, max_active_cases=3)
    ledger.observe(goal=G, uncached_input=1, cached_input=0, output=0)
    ledger.host_phase(goal=G, lane="l", deadline="+1h", session="s", profile="p")
    ledger.budget_configure(goal=G, allowed_units=100, window_hours=1)
    ledger.turn_open(goal=G, agent="a", turn="t", task="x")


def test_every_method_has_minimal_keywords(tmp_path: Path) -> None:
    assert set(_minimal(tmp_path)) == set(USE_CASES)


@pytest.mark.parametrize("method", sorted(USE_CASES))
def test_every_keyword_fed_every_wrong_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative `out` or `to` lands in scratch
    request_type = USE_CASES[method].request_type()
    hints = typing.get_type_hints(request_type, include_extras=True)
    minimal = _minimal(tmp_path)[method]
    problems: list[str] = []
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        _setup(ledger)
        call = getattr(ledger, method)
        for field in request_type.__struct_fields__:
            if (method, field) in NOT_FED:
                continue
            kinds = _kinds(hints[field])
            if field in ("at", "since", "until"):
                kinds.add(dt.datetime)
            for value in VALUES:
                rule = field_rule(request_type, field)
                code = None if rule is None else rule.code
                problem = _problem(call, {**minimal, field: value}, field, value, kinds, code)
                if problem:
                    problems.append(f"{method}({field}={value!r}): {problem}")
    assert not problems, "\n".join(problems)


def _problem(
    call: Any, given: dict[str, Any], field: str, value: Any, kinds: set[type], code: str | None
) -> str:
    """What is wrong with the call's outcome (`code`: the keyword's rule's code, which
    any error about its value has), or ""."""
    try:
        result = call(**given)
        if isinstance(result, Iterator):
            list(result)
    except Error as error:
        message = error.message
        if LEAKS.search(message):
            return f"leaks: {message!r}"
        if _never_valid(value, kinds) and not isinstance(error, InvalidInput):
            return f"{type(error).__name__} {message!r}"
        about_the_value = _never_valid(value, kinds) or error.code == code
        if about_the_value and not _names(field, message):
            return f"does not name {field}: {message!r}"
        return ""
    except Exception as error:  # the defect this test is for
        return f"escaped {type(error).__name__}: {error}"
    if _never_valid(value, kinds):
        return "accepted"
    return ""


SERVER_SAMPLE = [
    ("admit", {"goal": G, "run": "r"}, "forecast_tpm", "7"),
    ("admit", {"goal": G, "run": "r"}, "class_", 7),
    ("observe", {"goal": G}, "uncached_input", 1.5),
    ("configure", {"goal": G}, "quota_itpm", -1),
    ("configure", {"goal": G}, "max_observation_age_s", "soon"),
    ("host_phase", {"goal": G, "lane": "l"}, "deadline", 7),
    ("host_return", {"goal": G, "attempt": "a1"}, "outcome", ["completed"]),
    ("turn_spend", {"goal": G, "agent": "a", "turn": "t", "amount": 1}, "effect", "x\n"),
    ("budget_configure", {"goal": G, "allowed_units": 1}, "window_hours", None),
    ("reject", {"goal": G}, "retry_after_s", {"a": 1}),
]


def test_the_server_names_the_body_key(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    with Ledger.open(str(journal)) as ledger:
        _setup(ledger)
    problems = []
    with serving(journal) as server:
        for method, body, key, value in SERVER_SAMPLE:
            answer = server.post(method, **{**body, key: value})
            error = answer.json.get("error") or {}
            message = error.get("message", "")
            if answer.status != 400 or not _names(key, message) or LEAKS.search(message):
                problems.append(f"{method} {key}={value!r}: {answer.status} {answer.body!r}")
        for query, key in (("seq=x", "seq"), ("goal=g%0A", "goal"), ("at=7", "at")):
            answer = server.get("inspect", query)
            message = answer.json["error"]["message"]
            if answer.status != 400 or not _names(key, message) or LEAKS.search(message):
                problems.append(f"inspect ?{query}: {answer.status} {answer.body!r}")
    assert not problems, "\n".join(problems)


CONFIG_ERRORS = [
    # (configure's keywords, the message's part in the API's words)
    ({"quota_tpm": 100_000, "target_tpm": 200_000}, "target_tpm (200000) must be <= quota_tpm"),
    ({"target_itpm": 5}, "target_itpm needs quota_itpm"),
    ({"target_active_cases": 2}, "the case gate needs max_active_cases"),
    ({"cached_input_weight": 0.5}, "the token gate needs quota_tpm or a quota of another"),
]


@pytest.mark.parametrize(("given", "words"), CONFIG_ERRORS)
def test_a_config_error_names_fields_as_the_caller_does(
    tmp_path: Path, given: dict[str, Any], words: str
) -> None:
    """A refused config named fields by the engine's names to the CLI (`target_tpm
    (200000) must be <= quota_tpm`) and by flags to the API (`needs --max-active-cases`)."""
    journal = str(tmp_path / "j.jsonl")
    with Ledger.open(journal) as ledger, pytest.raises(InvalidInput) as raised:
        ledger.configure(goal=G, **given)
    assert raised.value.code == "invalid_config"
    assert words in raised.value.message and "--" not in raised.value.message
    args = [f"--{k.replace('_', '-')}={v}" for k, v in given.items()]
    done = run_cli("configure", "--goal", G, *args, "--journal", journal)
    assert done.code == 2
    flagged = re.sub(r"[a-z]+(?:_[a-z]+)+", lambda m: "--" + m.group().replace("_", "-"), words)
    assert flagged in done.stderr, done.stderr
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", done.stderr.split("[")[0]), done.stderr
