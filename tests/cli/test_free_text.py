"""Free text has one code (SPEC §8: one code per condition, every bad value of an
option gets that option's code): `invalid_text` for text over 4 KiB in UTF-8 and for
text UTF-8 cannot hold, the message naming the limit, through the CLI, the Python API
and a real server, nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quotaledger.usecases.decode as decoding
from quotaledger import InvalidInput, Ledger
from quotaledger.usecases import fields
from quotaledger.usecases.registry import USE_CASES
from tests.server.serving import Server, serving
from tests.support import run_cli, run_process

T0 = "2026-03-01T10:00:00Z"
TOO_LONG = "é" * 2048 + "x"  # 4097 bytes in UTF-8, 2049 characters

# Each free-text field of a request, with the other arguments its call needs.
TEXT_FIELDS: dict[tuple[str, str], dict[str, Any]] = {
    ("observe", "source"): {"goal": "g", "uncached_input": 1, "cached_input": 0, "output": 0},
    ("reject", "detail"): {"goal": "g"},
    ("host_return", "cursor"): {"goal": "g", "attempt": "a1", "outcome": "interrupted"},
    ("host_return", "detail"): {
        "goal": "g",
        "attempt": "a1",
        "outcome": "failed",
        "failure": "fatal",
    },
    ("host_continue", "cursor"): {
        "goal": "g",
        "lane": "a",
        "bind": "ab" * 32,
        "deadline": "+1h",
        "session": "s",
        "profile": "p",
    },
    ("probe_run", "input_revision"): {"goal": "g", "command": ["true"]},
}
SERVED_TEXT = [key for key in TEXT_FIELDS if key[0] != "probe_run"]  # probe is local


def test_every_free_text_field_is_listed() -> None:
    found = {
        (name, field)
        for name, case in USE_CASES.items()
        for field in case.request_type().__struct_fields__
        if (rule := decoding.field_rule(case.request_type(), field)) is not None
        and rule.check in (fields.check_text, fields.check_probe_text)
    }
    assert found == set(TEXT_FIELDS)


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("text") / "j.jsonl"
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=T0)
    return path


@pytest.fixture(scope="module")
def server(journal: Path) -> Iterator[Server]:
    with serving(journal) as running:
        yield running


def _cli_args(method: str, kwargs: dict[str, Any], *options: str) -> list[str]:
    args = [*(method.split("_") if "_" in method else [method]), *options]
    command: list[str] = []
    for name, value in kwargs.items():
        if name == "command":
            command = ["--", *value]
        else:
            args += [decoding.CLI(name), str(value)]
    return [*args, *command]


@pytest.mark.parametrize(("method", "field"), TEXT_FIELDS, ids=[".".join(k) for k in TEXT_FIELDS])
@pytest.mark.parametrize("text", [TOO_LONG, "bad \udcff byte"], ids=["too long", "not UTF-8"])
def test_a_bad_free_text_is_invalid_text(journal: Path, method: str, field: str, text: str) -> None:
    before = journal.read_bytes()
    kwargs = {**TEXT_FIELDS[method, field], field: text}
    with Ledger.open(journal) as ledger, pytest.raises(InvalidInput) as by_api:
        getattr(ledger, method)(**kwargs)
    # probe run writes its answer on the process's own stdout: a real process.
    run = run_process if method == "probe_run" else run_cli
    cli = run(*_cli_args(method, kwargs, "--journal", str(journal), "--json"))
    assert cli.code == 2, cli
    assert by_api.value.code == cli.json["error"]["code"] == "invalid_text"
    assert cli.json["error"]["message"].startswith(decoding.CLI(field))
    assert by_api.value.message.startswith(field)
    if text == TOO_LONG:
        assert "4 KiB" in by_api.value.message and "4 KiB" in cli.json["error"]["message"]
    assert journal.read_bytes() == before


@pytest.mark.parametrize(("method", "field"), SERVED_TEXT, ids=[".".join(k) for k in SERVED_TEXT])
def test_the_server_gives_the_same_code(
    journal: Path, server: Server, method: str, field: str
) -> None:
    before = journal.read_bytes()
    answer = server.post(method, **{**TEXT_FIELDS[method, field], field: TOO_LONG})
    assert (answer.status, answer.exit_code) == (400, 2), answer.body
    assert answer.json["error"]["code"] == "invalid_text"
    assert "4 KiB" in answer.json["error"]["message"]
    assert journal.read_bytes() == before
