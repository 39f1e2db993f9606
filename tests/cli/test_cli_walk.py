"""Every registered command (walked from the live typer/click tree, sub-apps included):
help with an example, one JSON object with --json, usage errors as JSON with exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import click
import pytest
import typer

from quotaledger.cli.common import IDENTIFIER_OPTIONS
from quotaledger.cli.main import app
from tests.support import REPO, run_cli

ROOT = typer.main.get_command(app)
JSON_LINES = {("log",)}  # SPEC §8: `log --json` prints JSON Lines, one event per line
# Commands without required options that would run for long: give them an argument
# that is refused (still one JSON error object) instead of benchmarking the machine.
CHEAP_ARGS: dict[tuple[str, ...], list[str]] = {
    ("bench",): ["--events", "1"],
    ("serve",): ["--listen", "nowhere"],  # refused before it opens or binds anything
}
# What makes the minimal arguments of a command valid input, where required options
# alone are not (so that the journal is what decides the answer).
VALID_ARGS: dict[tuple[str, ...], list[str]] = {
    ("repair",): ["--yes"],
    ("host", "replan"): ["--open"],
    ("host", "exit"): ["--exit-code", "0"],  # exactly one of --exit-code and --signal
    # a choice and an event hash, checked by the request type before the journal opens
    ("host", "return"): ["--outcome", "completed"],
    ("host", "continue"): ["--bind", "ab" * 32, "--deadline", "+1h"],
    ("host", "phase"): ["--deadline", "+1h"],  # a time, checked by the request type too
    # the three counters are required unless --usage gives them (checked by the command)
    ("observe",): ["--uncached-input", "0", "--cached-input", "0", "--output", "0"],
    ("report",): ["--goal", "g"],  # exactly one of --goal and --pool
}


def _walk(command: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    children = getattr(command, "commands", None)
    if children:
        found = []
        for name, child in sorted(children.items()):
            found.extend(_walk(child, (*path, name)))
        return found
    return [(path, command)]


COMMANDS = dict(_walk(ROOT, ()))
GROUPS = sorted(name for name, cmd in ROOT.commands.items() if getattr(cmd, "commands", None))
IDS = [" ".join(path) for path in COMMANDS]
IDS_BUT_BENCH = [name for name in IDS if name != "bench"]  # bench opens no journal


def _required(command: Any) -> list[str]:
    return [param.name for param in command.params if param.required]


def _one_json_object(stdout: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected exactly one JSON object, got {stdout!r}"
    body = json.loads(lines[0])
    assert isinstance(body, dict) and isinstance(body.get("ok"), bool), body
    return body


def test_the_walk_finds_the_journal_commands() -> None:
    names = {" ".join(path) for path in COMMANDS}
    assert {"verify", "digest", "repair", "checkpoint", "log", "export", "import"} <= names


@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_help_has_a_description_and_an_example(path: tuple[str, ...]) -> None:
    result = run_cli(*path, "--help")
    assert result.code == 0, result.stdout + result.stderr
    text = result.stdout
    assert "Example" in text, text
    example = text.split("Example", 1)[1].split("Options:")[0]
    assert f"quotaledger {' '.join(path)}" in " ".join(example.split()), example
    description = text.split("Example", 1)[0].split("\n", 1)[1].strip()
    assert description, f"{path} has no description"
    # SPEC §2.2: --at is "accepted by every command", as are §8's common options.
    for option in ("--journal", "--json", "--lock-timeout-s", "--at"):
        assert option in text, f"{path} lacks the common option {option}"


@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_json_output_is_one_object(path: tuple[str, ...], tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    shutil.copyfile(REPO / "fixtures" / "healthy.jsonl", journal)
    required = _required(COMMANDS[path])
    args = [*path, "--journal", str(journal), "--json", *CHEAP_ARGS.get(path, [])]
    result = run_cli(*args)
    assert "Traceback" not in result.stderr, result.stderr
    if required:
        assert result.code == 2, (path, result.stdout, result.stderr)
        body = _one_json_object(result.stdout)
        assert body["ok"] is False and body["error"]["code"] == "usage", body
        assert body["error"]["message"], body
        # QUOTALEDGER_JSON=1 instead of --json: the same.
        by_env = run_cli(*path, "--journal", str(journal), env={"QUOTALEDGER_JSON": "1"})
        assert by_env.code == 2 and _one_json_object(by_env.stdout)["ok"] is False
    elif path in JSON_LINES:
        assert result.code == 0, result.stdout
        for line in result.stdout.splitlines():
            assert isinstance(json.loads(line), dict)
    else:
        assert result.code in (0, 1, 2, 3, 4), result.code
        _one_json_object(result.stdout)


def _minimal_args(
    command: Any, existing_file: Path, given: dict[str, str] | None = None
) -> list[str]:
    """Values for a command's required parameters (and the `given` ones, by parameter
    name) that its parser accepts."""
    given = given or {}
    args: list[str] = []
    for param in command.params:
        if param.name in given:
            args += [param.opts[0], given[param.name]]
            continue
        if not param.required:
            continue
        if isinstance(param.type, click.Choice):
            value = str(param.type.choices[0])
        elif isinstance(param.type, click.types.IntParamType | click.types.FloatParamType):
            value = "1"
        elif isinstance(param.type, click.Path | click.File) or param.name == "file":
            value = str(existing_file)
        else:
            value = "x"
        if isinstance(param, click.Option):
            args += [param.opts[0]] if param.is_flag else [param.opts[0], value]
        else:
            args.append(value)
    return args


@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_every_command_refuses_a_malformed_at_before_touching_the_journal(
    path: tuple[str, ...], tmp_path: Path
) -> None:
    # A torn tail: a writer that opened the journal first would move it aside.
    journal = tmp_path / "j.jsonl"
    shutil.copyfile(REPO / "fixtures" / "torn_garbage.jsonl", journal)
    before = sorted(p.name for p in tmp_path.iterdir()), journal.read_bytes()
    args = [*path, *_minimal_args(COMMANDS[path], journal), *CHEAP_ARGS.get(path, [])]
    refused = run_cli(*args, "--journal", str(journal), "--json", "--at", "2026-02-30T12:00:00Z")
    assert refused.code == 2, (path, refused.stdout, refused.stderr)
    assert _one_json_object(refused.stdout)["error"]["code"] == "invalid_time", refused.stdout
    assert (sorted(p.name for p in tmp_path.iterdir()), journal.read_bytes()) == before


@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_an_empty_journal_option_is_refused_not_taken_for_the_default(
    path: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where ./quotaledger.jsonl (or the demo's) would appear
    source = tmp_path / "source.jsonl"
    shutil.copyfile(REPO / "fixtures" / "healthy.jsonl", source)
    args = [*path, *_minimal_args(COMMANDS[path], source), *CHEAP_ARGS.get(path, [])]
    refused = run_cli(*args, "--journal", "", "--json")
    assert refused.code == 2, (path, refused.stdout, refused.stderr)
    error = _one_json_object(refused.stdout)["error"]
    assert error["code"] == "invalid_option", error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source.jsonl"]


# SPEC §8: "a path or URL the user gave that cannot name a journal (empty, a missing
# parent directory, an unsupported scheme such as mysql:// or file://) is exit 2 for
# every command". Relative ones too: they must not become files under the cwd.
UNNAMEABLE = {
    "missing parent": ("{tmp}/missing/dir/j.jsonl", "invalid_journal_path"),
    "relative missing parent": ("missing/j.jsonl", "invalid_journal_path"),
    "parent is a file": ("{tmp}/source.jsonl/j.jsonl", "invalid_journal_path"),
    "mysql": ("mysql://user:secret@db/x", "invalid_journal_url"),
    "file url": ("file://{tmp}/j.jsonl", "invalid_journal_url"),
    "relative file url": ("file:j.jsonl", None),  # a legal file name: must work or be exit 2
}


@pytest.mark.parametrize("case", [c for c in UNNAMEABLE if c != "relative file url"])
@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_a_journal_that_cannot_be_named_is_exit_2_for_every_command(
    path: tuple[str, ...], case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where a relative path would wrongly create files
    source = tmp_path / "source.jsonl"
    shutil.copyfile(REPO / "fixtures" / "healthy.jsonl", source)
    target, code = UNNAMEABLE[case]
    target = target.format(tmp=tmp_path)
    args = [*path, *_minimal_args(COMMANDS[path], source), *CHEAP_ARGS.get(path, [])]
    for how in ("option", "env"):
        if how == "option":
            refused = run_cli(*args, "--journal", target, "--json")
        elif path == ("demo",):
            continue  # demo ignores QUOTALEDGER_JOURNAL (it moves an existing file aside)
        else:
            refused = run_cli(*args, "--json", env={"QUOTALEDGER_JOURNAL": target})
        assert refused.code == 2, (how, refused.stdout, refused.stderr)
        error = _one_json_object(refused.stdout)["error"]
        assert error["code"] == code, error
        assert "secret" not in error["message"], error
        assert sorted(p.name for p in tmp_path.iterdir()) == ["source.jsonl"]
        assert source.read_bytes() == (REPO / "fixtures" / "healthy.jsonl").read_bytes()


@pytest.mark.parametrize("path", [p for p in COMMANDS if p != ("bench",)], ids=IDS_BUT_BENCH)
def test_an_existing_journal_that_cannot_be_read_is_exit_3_for_every_command(
    path: tuple[str, ...], tmp_path: Path
) -> None:
    # A directory where the journal should be: it exists, and no journal can be read
    # from it (as root, permissions cannot make a file unreadable).
    journal = tmp_path / "j.jsonl"
    journal.mkdir()
    source = tmp_path / "source.jsonl"
    shutil.copyfile(REPO / "fixtures" / "healthy.jsonl", source)
    args = [*path, *_minimal_args(COMMANDS[path], source), *VALID_ARGS.get(path, [])]
    refused = run_cli(*args, "--journal", journal, "--json")
    assert refused.code == 3, (refused.stdout, refused.stderr)
    assert _one_json_object(refused.stdout)["error"]["code"] == "not_regular_file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.jsonl", "source.jsonl"]
    assert list(journal.iterdir()) == []


# SPEC §8's identifiers, as the options that carry them.
SPEC_IDENTIFIERS = {"goal", "run", "case", "lane", "attempt", "session", "profile", "agent"}
SPEC_IDENTIFIERS |= {"turn", "task", "replan"}
IDENTIFIER_PARAMS = {
    (path, param.name, param.opts[0])
    for path, command in COMMANDS.items()
    for param in command.params
    if isinstance(param, click.Option) and param.opts[0].removeprefix("--") in SPEC_IDENTIFIERS
}


def test_every_identifier_option_is_checked_by_the_wrapper() -> None:
    # Found by option, so a new option under any parameter name is held to the map.
    assert {option.removeprefix("--") for _, _, option in IDENTIFIER_PARAMS} == SPEC_IDENTIFIERS
    for path, name, option in IDENTIFIER_PARAMS:
        assert IDENTIFIER_OPTIONS.get(name) == option, (path, name, option)


@pytest.mark.parametrize(
    ("path", "name", "option"),
    sorted(IDENTIFIER_PARAMS),
    ids=[f"{' '.join(p)} {o}" for p, _, o in sorted(IDENTIFIER_PARAMS)],
)
def test_a_malformed_identifier_is_refused_before_the_journal_is_opened(
    path: tuple[str, ...], name: str, option: str, tmp_path: Path
) -> None:
    # A corrupt journal: a command that opened it first would answer exit 3.
    journal = tmp_path / "j.jsonl"
    shutil.copyfile(REPO / "fixtures" / "corrupt_flipped_byte.jsonl", journal)
    before = sorted(p.name for p in tmp_path.iterdir()), journal.read_bytes()
    args = _minimal_args(COMMANDS[path], journal, {name: "not an id"})
    refused = run_cli(*path, *args, "--journal", str(journal), "--json")
    assert refused.code == 2, (path, refused.stdout, refused.stderr)
    error = _one_json_object(refused.stdout)["error"]
    assert error["code"] == "invalid_identifier", error
    assert (sorted(p.name for p in tmp_path.iterdir()), journal.read_bytes()) == before


@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_a_bad_option_is_a_usage_error_without_traceback(path: tuple[str, ...]) -> None:
    as_json = run_cli(*path, "--no-such-option", "--json")
    assert as_json.code == 2, as_json.stdout + as_json.stderr
    body = _one_json_object(as_json.stdout)
    assert body["ok"] is False and body["error"]["code"] == "usage"
    assert "no-such-option" in body["error"]["message"]
    human = run_cli(*path, "--no-such-option")
    assert human.code == 2
    assert "No such option" in human.stderr and "Traceback" not in human.stderr
    assert human.stdout == ""


@pytest.mark.parametrize("group", GROUPS)
def test_groups_have_help(group: str) -> None:
    result = run_cli(group, "--help")
    assert result.code == 0 and "Commands" in result.stdout, result.stdout
    unknown = run_cli(group, "no-such-command", "--json")
    assert unknown.code == 2
    assert _one_json_object(unknown.stdout)["error"]["code"] == "usage"


def test_unknown_command_and_bad_values_are_usage_errors(tmp_path: Path) -> None:
    unknown = run_cli("no-such-command", "--json")
    assert unknown.code == 2 and _one_json_object(unknown.stdout)["ok"] is False
    bad_int = run_cli(
        "repair", "--truncate-after", "seven", "--yes", "--journal", tmp_path / "j", "--json"
    )
    assert bad_int.code == 2
    # --truncate-after -1 is invalid_option: its one code, whatever way it is bad
    assert _one_json_object(bad_int.stdout)["error"]["code"] == "invalid_option"
    assert not (tmp_path / "j").exists()
