"""An identifier in a request is refused when the request is decoded, by the journal's
own rule (SPEC §8), with the identifier's code and message, on every way in.

msgspec's `pattern` is a regular expression searched with `re`, whose `$` also
matches before a final newline: "g\\n" passes it. Refused later (an unknown goal, an
error about a payload), it would be refused with another code, or not at all where
nothing is appended.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

import quotaledger.usecases.decode as decoding
from quotaledger import InvalidInput
from quotaledger.journal import codes
from quotaledger.journal.identifier import not_an_identifier
from quotaledger.server import routes
from quotaledger.usecases.registry import SERVED, USE_CASES
from tests.package.test_one_request_per_use_case import cases, query_of

BAD_ENDINGS = ["\n", "\r", " ", "\t"]


def identifier_cases(tmp: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(use case, identifier keyword, the case's valid keywords), for every keyword of
    every use case whose rule is the identifier's."""
    found = []
    for name, (_, keywords) in cases(tmp).items():
        request_type = USE_CASES[name].request_type()
        for keyword in keywords:
            rule = decoding.field_rule(request_type, keyword)
            if rule is not None and rule.code == codes.INVALID_IDENTIFIER:
                found.append((name, keyword, keywords))
    return found


def test_the_identifier_keywords_are_found(tmp_path: Path) -> None:
    found = {(name, keyword) for name, keyword, _ in identifier_cases(tmp_path)}
    assert {("admit", "goal"), ("admit", "run"), ("observe", "goal")} <= found
    assert {("host_start", "attempt"), ("turn_open", "task")} <= found
    assert len(found) >= 40


def refused(keyword: str, value: str, decode: Any, *args: Any) -> None:
    with pytest.raises(InvalidInput) as error:
        decode(*args)
    assert error.value.code == codes.INVALID_IDENTIFIER
    assert error.value.message == not_an_identifier(keyword, value).message


@pytest.mark.parametrize("ending", BAD_ENDINGS, ids=repr)
def test_an_identifier_with_a_trailing_character_is_refused_at_decode(
    tmp_path: Path, ending: str
) -> None:
    for name, keyword, keywords in identifier_cases(tmp_path):
        request_type = USE_CASES[name].request_type()
        value = f"{keywords[keyword]}{ending}"
        bad = {**keywords, keyword: value}
        refused(keyword, value, decoding.decode, request_type, bad, decoding.API)
        body = msgspec.json.encode(bad)
        refused(keyword, value, decoding.decode_json, request_type, body, decoding.API)
        if name in SERVED and not USE_CASES[name].writes:
            query = query_of(bad).encode()
            refused(keyword, value, routes.request_of_query, USE_CASES[name], query)


def test_the_api_refuses_a_goal_with_a_newline_as_an_identifier(tmp_path: Path) -> None:
    """Not `unknown_goal`: the value is wrong whatever the journal holds."""
    from quotaledger import Ledger

    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        ledger.configure(goal="g", max_active_cases=2)
        with pytest.raises(InvalidInput) as error:
            ledger.admit(goal="g\n", run="r", arm="baseline", forecast_tpm=1)
    assert error.value.code == codes.INVALID_IDENTIFIER
    assert error.value.message == not_an_identifier("goal", "g\n").message
