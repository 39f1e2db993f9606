"""SPEC §2.4: a self-verifying line (complete, a JSON object, its hash matching its
bytes) that is not a valid record of this format is corruption, never a torn tail,
mid-log or last: an older binary must never cut a newer journal. And a file whose
first line is not a genesis of this format is not a journal: every command refuses
it and leaves it byte-identical, with no `.torn.` file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from quotaledger.journal import NotAJournal
from quotaledger.journal.record import HASH_MEMBER, encode_line, genesis_line
from tests.cli.test_cli_walk import CHEAP_ARGS, COMMANDS, _minimal_args
from tests.support import REPO, run_cli

HEALTHY = REPO / "fixtures" / "healthy.jsonl"


def hashed(body: dict[str, Any]) -> bytes:
    """`body` (hash member excluded) as a line whose hash matches its bytes."""
    encoded = json.dumps(body, separators=(",", ":")).encode()
    digest = hashlib.sha256(encoded).hexdigest()
    return encoded[:-1] + HASH_MEMBER + digest.encode() + b'"}\n'


def next_record(lines: list[bytes]) -> dict[str, Any]:
    """The envelope (without hash) of a record that would chain after `lines`."""
    last = json.loads(lines[-1])
    return {
        "v": 1,
        "seq": last["seq"] + 1,
        "at": last["at"],
        "kind": "journal.repaired",
        "goal": None,
        "data": {
            "truncated_after_seq": 0,
            "quarantine": "x",
            "quarantined_bytes": 0,
            "quarantined_sha256": "0" * 64,
        },
        "prev": last["hash"],
    }


def newer_version(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "v": 2}


def extra_member(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "tenant": "t1"}


def missing_member(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "goal"}


def state(directory: Path) -> tuple[list[str], dict[str, bytes]]:
    names = sorted(p.name for p in directory.iterdir())
    return names, {name: (directory / name).read_bytes() for name in names}


@pytest.mark.parametrize("change", [newer_version, extra_member, missing_member])
@pytest.mark.parametrize("where", ["last", "mid-log"])
@pytest.mark.parametrize("command", [["observe"], ["verify"], ["inspect"], ["admit"]])
def test_a_self_verifying_line_that_is_not_a_record_is_corruption(
    change: Any, where: str, command: list[str], tmp_path: Path
) -> None:
    lines = HEALTHY.read_bytes().splitlines(keepends=True)
    cut = len(lines) if where == "last" else len(lines) - 2
    strange = hashed(change(next_record(lines[:cut])))
    journal = tmp_path / "j.jsonl"
    journal.write_bytes(b"".join([*lines[:cut], strange, *lines[cut:]]))
    before = state(tmp_path)
    args = _args(tuple(command), journal, journal)
    result = run_cli(*args, "--journal", str(journal), "--json")
    assert result.code == 3, (result.stdout, result.stderr)
    error = result.json["error"]
    assert error["code"] == "journal_corrupt", error
    assert error["seq"] == cut and error["offset"] == sum(map(len, lines[:cut])), error
    assert state(tmp_path) == before  # byte-identical, no .torn. file


def test_the_independent_verifier_agrees(tmp_path: Path) -> None:
    from tests.journal.independent_verifier import verify

    lines = HEALTHY.read_bytes().splitlines(keepends=True)
    data = b"".join(lines) + hashed(newer_version(next_record(lines)))
    result = verify(data, None)
    assert result.corrupt is not None and result.torn is None, result


def _another_format_genesis() -> bytes:
    data = b'{"journal_id":"' + b"ab" * 16 + b'","format":"runledger/1"}'
    line, _ = encode_line(0, "2026-11-29T09:00:00.000000Z", "journal.created", None, data, "0" * 64)
    return line


NOT_JOURNALS = {
    "readme": (REPO / "README.md").read_bytes(),
    "json-object": b'{"a":1}\n',
    "hello": b"hello",
    "binary": bytes(range(256)) * 4,
    "other-format-genesis": _another_format_genesis() + HEALTHY.read_bytes().split(b"\n", 1)[1],
}
WALKED = [path for path in COMMANDS if path != ("bench",)]  # bench writes scratch files only
GIVEN: dict[tuple[str, ...], dict[str, str]] = {
    ("repair",): {"yes": "", "truncate_after": "0"},
    ("host", "replan"): {"open_": ""},
    ("host", "exit"): {"exit_code": "0"},  # exactly one of --exit-code and --signal
    # a choice and an event hash, checked by the request type before the journal opens
    ("host", "return"): {"outcome": "completed"},
    ("host", "continue"): {"bind": "ab" * 32, "deadline": "+1h"},
    ("host", "phase"): {"deadline": "+1h"},  # a time, checked by the request type too
    # observe takes its counts or --usage (neither is a required option to click)
    ("observe",): {"uncached_input": "1", "cached_input": "0", "output": "0"},
    ("report",): {"goal": "g"},  # exactly one of --goal and --pool
}


def _args(path: tuple[str, ...], journal: Path, source: Path) -> list[str]:
    command = COMMANDS[path]
    given = GIVEN.get(path, {})
    args = _minimal_args(command, source, {k: v for k, v in given.items() if v})
    flags = [p.opts[0] for p in command.params if p.name in given and not given[p.name]]
    return [*path, *args, *flags, *NEVER_BOUND.get(path, CHEAP_ARGS.get(path, []))]


NEVER_BOUND = {("serve",): ["--listen", "127.0.0.1:0"]}
"""A valid address for serve, which opens the journal (and fails) before it binds."""


@pytest.mark.parametrize("kind", list(NOT_JOURNALS))
@pytest.mark.parametrize("path", WALKED, ids=[" ".join(p) for p in WALKED])
def test_every_command_refuses_a_file_that_is_not_a_journal(
    path: tuple[str, ...], kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where a relative --out or --to would land
    journal = tmp_path / "j.jsonl"
    journal.write_bytes(NOT_JOURNALS[kind])
    # A command that reads another file (import) reads the same kind of non-journal.
    source = tmp_path / "source.jsonl"
    source.write_bytes(NOT_JOURNALS[kind])
    before = state(tmp_path)
    result = run_cli(*_args(path, journal, source), "--journal", str(journal), "--json")
    assert result.code == 3, (path, result.stdout, result.stderr)
    assert result.json["error"]["code"] == "not_a_journal", result.stdout
    assert state(tmp_path) == before


@pytest.mark.parametrize("kind", list(NOT_JOURNALS))
def test_the_python_api_refuses_a_file_that_is_not_a_journal(kind: str, tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    journal.write_bytes(NOT_JOURNALS[kind])
    before = state(tmp_path)
    for write in (True, False):
        with pytest.raises(NotAJournal) as raised:
            Ledger.open(str(journal), write=write)
        assert raised.value.exit_code == 3 and raised.value.code == "not_a_journal"
    assert state(tmp_path) == before


def _genesis_prefix() -> bytes:
    line, _ = genesis_line("cd" * 16, "2026-11-29T09:00:00.000000Z")
    return line[: len(line) // 2]


CREATION_CRASHES = {
    "nul-bytes": b"\x00" * 512,
    "genesis-prefix": _genesis_prefix(),
    "genesis-without-newline": genesis_line("cd" * 16, "2026-11-29T09:00:00.000000Z")[0][:-1],
}


@pytest.mark.parametrize("kind", list(CREATION_CRASHES))
def test_what_a_crash_during_creation_leaves_is_an_empty_journal(kind: str, tmp_path: Path) -> None:
    content = CREATION_CRASHES[kind]
    journal = tmp_path / "j.jsonl"
    journal.write_bytes(content)
    read = run_cli("verify", "--journal", str(journal), "--json")
    assert read.code == 0 and read.json["records"] == 0, read.stdout
    assert read.json["torn_tail"]["offset"] == 0, read.stdout
    written = run_cli(
        "configure", "--journal", str(journal), "--json", "--goal", "g", "--quota-tpm", "1000"
    )
    assert written.code == 0 and written.json["appended"] is True, written.stdout
    torn = sorted(tmp_path.glob("j.jsonl.torn.0.*"))
    assert len(torn) == 1 and torn[0].read_bytes() == content
    assert run_cli("verify", "--journal", str(journal), "--json").json["records"] == 2
