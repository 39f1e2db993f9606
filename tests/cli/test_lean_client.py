"""The lean CLI client (SPEC §9, §11): `quotaledger COMMAND ... --journal http://...`
runs without typer, click, the engine or the projections, and prints, byte for byte,
what the full CLI prints through the same server, text and --json, errors and exit
codes included. Every served command is exercised (the golden session, and malformed
values generated for every option of the generated grammar), against real servers.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quotaledger.entry
import quotaledger.lean.remote_call
from quotaledger.cli.client_grammar import generated
from quotaledger.cli.common import IDENTIFIER_OPTIONS
from quotaledger.lean.grammar import COMMANDS
from tests.cli.test_json_answers import SESSION
from tests.cli.test_remote_client import _files, _start
from tests.cli.transcript import placeholders
from tests.support import run_cli, run_importtime

GRAMMAR = Path(quotaledger.lean.remote_call.__file__).with_name("grammar.py")
REGENERATE = "python -m quotaledger.cli.client_grammar > commands/lean/grammar.py"
NOT_LOADED = ("typer", "click", "msgspec", "h11", "quotaledger.projections", "quotaledger.cli")
ENGINE = ("journal", "store", "filestore", "fold", "chain", "record", "pgstore", "checkpoint")


def test_the_grammar_is_the_one_generated_from_the_typer_app() -> None:
    assert GRAMMAR.read_text() == generated(), f"regenerate it: {REGENERATE}"


def test_every_served_command_is_in_the_grammar_or_left_to_the_full_cli() -> None:
    from quotaledger.usecases.registry import SERVED

    served = {case.command for case in SERVED.values() if case.command}
    assert set(COMMANDS) == served


def test_a_client_call_loads_neither_typer_nor_the_engine_nor_the_projections(
    server: str, tmp_path: Path
) -> None:
    calls = [
        ["configure", "--goal", "g", "--quota-tpm", "100000", "--max-active-cases", "2"],
        [
            "observe",
            "--goal",
            "g",
            "--uncached-input",
            "10",
            "--cached-input",
            "0",
            "--output",
            "5",
        ],
        ["admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--forecast-tpm", "10"],
        ["inspect", "--goal", "g"],
        ["release", "--goal", "g", "--run", "r1", "--json"],
        ["inspect", "--goal", "nobody"],  # an error, printed by the client
        ["host", "replan", "--goal", "h", "--lane", "l1", "--replan", "rp1", "--open"],
        ["host", "replan", "--goal", "h", "--lane", "l1", "--replan", "rp1", "--settle"],
        ["log", "--goal", "g"],
        ["log", "--kind", "capacity", "--last", "2", "--json"],
    ]
    for args in calls:
        done, loaded = run_importtime([*args, "--journal", server], tmp_path)
        assert done.returncode == (2 if "nobody" in args else 0), done.stderr[-2000:]
        assert "quotaledger.lean.remote_call" in loaded  # the check sees the lean path
        heavy = {n for n in loaded if n in NOT_LOADED or n.startswith(_dotted(NOT_LOADED))}
        engine = {n for n in loaded if n.removeprefix("quotaledger.journal.") in ENGINE}
        assert heavy | engine == set(), args


def _dotted(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name + "." for name in names)


def _transcript(url: str, *, as_json: bool, lean: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    """The served part of the golden session through `url`, by the lean client or by
    the full CLI (its remote path). The lean client runs every line but those of
    those click refuses (an unknown option: exit 2)."""
    real_call = quotaledger.lean.remote_call.call
    leaned: list[bool] = []

    def call(args: list[str], target: str) -> int | None:
        code = real_call(args, target) if lean else None
        leaned.append(code is not None)
        return code

    monkeypatch.setattr(quotaledger.lean.remote_call, "call", call)
    out: list[str] = []
    values: dict[str, str] = {}
    for line in SESSION:
        if line.startswith("# the journal"):
            break
        if line.startswith("#") or line.split()[0] == "report":
            continue
        args = [*shlex.split(line.format(**values)), "--journal", url]
        result = run_cli(*args, *(["--json"] if as_json else []))
        words = " ".join(args[:2]) if args[0] in ("host", "turn", "budget") else args[0]
        if lean:
            assert leaned[-1] or result.code == 2, (words, line)
        out.append(f"$ {line.format(**values)}  [exit {result.code}]")
        out += result.stdout.rstrip("\n").splitlines()
        out += [f"! {err}" for err in result.stderr.rstrip("\n").splitlines()]
        found = re.search(r'"hash":"([0-9a-f]{64})"|--bind ([0-9a-f]{64})', result.stdout)
        if args[:2] == ["host", "return"]:
            values["bind"] = (found.group(1) or found.group(2)) if found else "0" * 64
        effect = re.search(r'"effect":"([0-9a-f]{32})"|--effect ([0-9a-f]{32})', result.stdout)
        if args[:2] == ["turn", "writeback"] and "effect" not in values and effect:
            values["effect"] = effect.group(1) or effect.group(2)
    assert sum(leaned) > len(leaned) // 2 if lean else not any(leaned)
    return placeholders("\n".join(out).replace(url, "<url>") + "\n")


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_the_session_prints_what_the_full_cli_prints_through_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("QUOTALEDGER_JOURNAL", raising=False)
    monkeypatch.delenv("QUOTALEDGER_JSON", raising=False)
    _files(tmp_path)
    transcripts = []
    for lean in (True, False):
        proc, url = _start(tmp_path / f"served-{lean}.jsonl")
        try:
            transcripts.append(
                _transcript(url, as_json=as_json, lean=lean, monkeypatch=monkeypatch)
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = [re.sub(r"served-(True|False)", "served", t) for t in transcripts]
    assert text[0] == text[1]


def _malformed(words: str) -> Iterator[tuple[str, list[str]]]:
    """For each option of a served command: a value the option refuses (a number that
    is none, an identifier that is none, a time that is none), and the command without
    a required option (with one of each field's choices: `host replan --open`)."""
    _name, _writes, flags, options = COMMANDS[words]
    flag_of = {index: flag for flag, (index, on) in flags.items() if on}
    required = {
        flag_of[i]: "0" if kind in ("int", "float", "duration", "duration_s") else "x"
        for i, (_p, kind, _m, needed, *_rest) in enumerate(options)
        if needed
    }
    chosen: dict[str, str] = {}  # a field a choice makes: its first choice's flag
    for index, (_p, kind, _m, _n, _d, field, _r) in enumerate(options):
        if kind == "choice":
            chosen.setdefault(field, flag_of[index])
    base = [*words.split(), *(w for flag, v in required.items() for w in (flag, v))]
    base += chosen.values()
    for index, (param, kind, _multiple, needed, _default, field, role) in enumerate(options):
        flag = flag_of[index]
        if role not in ("request", "text"):
            continue
        if kind in ("int", "float", "duration", "duration_s"):
            yield f"{flag} x", [*_without(base, flag), flag, "x"]
            yield f"{flag} -1", [*_without(base, flag), flag, "-1"]
        elif field in IDENTIFIER_OPTIONS or param in IDENTIFIER_OPTIONS:
            yield f"{flag} 'a b'", [*_without(base, flag), flag, "a b"]
        elif param in ("at", "since", "until"):
            yield f"{flag} yesterday", [*_without(base, flag), flag, "yesterday"]
        if needed:
            yield f"no {flag}", _without(base, flag)


def _without(args: list[str], flag: str) -> list[str]:
    if flag not in args:
        return list(args)
    at = args.index(flag)
    return args[:at] + args[at + 2 :]


def _run(args: list[str], *, lean: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patch:
        if not lean:
            patch.setattr(quotaledger.entry, "lean_call", lambda args: None)
        return run_cli(*args)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two servers, one for the lean client and one for the full CLI, kept in step."""
    started = [_start(tmp_path / f"served-{n}.jsonl") for n in (1, 2)]
    try:
        yield started[0][1], started[1][1]
    finally:
        for proc, _url in started:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_malformed_values_fail_as_through_the_full_cli(
    servers: tuple[str, str], words: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in servers:
        assert (
            run_cli("configure", "--goal", "x", "--quota-tpm", "1000", "--journal", url).code == 0
        )
    for what, args in _malformed(words):
        for as_json in (["--json"], []):
            lean, full = (
                _run(
                    [*args, "--journal", url, *as_json],
                    lean=url == servers[0],
                    monkeypatch=monkeypatch,
                )
                for url in servers
            )
            shown = [
                (r.code, r.stdout.replace(url, "<url>"), r.stderr.replace(url, "<url>"))
                for r, url in ((lean, servers[0]), (full, servers[1]))
            ]
            assert placeholders(repr(shown[0])) == placeholders(repr(shown[1])), (
                words,
                what,
                as_json,
            )


@pytest.mark.parametrize("json_env", ["1", "no", "2", ""])
def test_the_environment_names_the_server_and_json_as_for_the_full_cli(
    servers: tuple[str, str], json_env: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    shown = []
    for url in servers:
        env = {"QUOTALEDGER_JOURNAL": url, "QUOTALEDGER_JSON": json_env}
        with monkeypatch.context() as patch:
            if url == servers[1]:
                patch.setattr(quotaledger.entry, "lean_call", lambda args: None)
            results = [
                run_cli(*args, env=env)
                for args in (
                    [
                        "configure",
                        "--goal",
                        "g",
                        "--quota-tpm",
                        "1000",
                        "--at",
                        "2026-11-29T14:00:00Z",
                    ],
                    ["inspect", "--goal", "g", "--at", "2026-11-29T14:00:01Z"],
                    ["goals", "--no-json", "--at", "2026-11-29T14:00:01Z"],
                )
            ]
        shown.append([(r.code, r.stdout.replace(url, "<url>"), r.stderr) for r in results])
    assert placeholders(repr(shown[0])) == placeholders(repr(shown[1]))


def _follower(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    """`quotaledger log --follow ARGS` as a process of its own, its imports listed."""
    return subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "quotaledger", "log", "--follow", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )


def _lines(proc: subprocess.Popen[str], count: int) -> list[str]:
    """The follower's next `count` lines: read as they come (the test's barrier)."""
    assert proc.stdout is not None
    return [proc.stdout.readline() for _ in range(count)]


def _ended(proc: subprocess.Popen[str]) -> tuple[int, str, set[str]]:
    """Exit code, what was left on stdout, and the modules the follower loaded."""
    rest, err = proc.communicate(timeout=60)
    names = {line.rsplit("|", 1)[-1].strip() for line in err.splitlines() if "|" in line}
    return proc.returncode, rest, names


def _lean(names: set[str]) -> None:
    assert "quotaledger.lean.remote_call" in names
    heavy = {n for n in names if n in NOT_LOADED or n.startswith(_dotted(NOT_LOADED))}
    engine = {n for n in names if n.removeprefix("quotaledger.journal.") in ENGINE}
    assert heavy | engine == set()


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_log_follow_prints_as_the_local_follower_and_ends_on_sigint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    """A lean `log --follow` through the server prints, line for line, what the local
    command following the very same journal file prints, the events appended while it
    follows included, and exits 0 on Ctrl-C (SIGINT) as the local one does."""
    monkeypatch.delenv("QUOTALEDGER_JOURNAL", raising=False)
    monkeypatch.delenv("QUOTALEDGER_JSON", raising=False)
    journal = tmp_path / "served.jsonl"
    proc, url = _start(journal)
    try:
        assert (
            run_cli("configure", "--goal", "g", "--quota-tpm", "1000", "--journal", url).code == 0
        )
        shown = ["--json"] if as_json else []
        header = 0 if as_json else 1
        followers = [
            _follower([*shown, "--journal", target], tmp_path) for target in (url, str(journal))
        ]
        first = [_lines(f, header + 2) for f in followers]  # journal.created, configured
        observed = ["observe", "--goal", "g", "--uncached-input", "7", "--cached-input", "0"]
        assert run_cli(*observed, "--output", "1", "--journal", url).code == 0
        then = [_lines(f, 1) for f in followers]
        for follower in followers:
            follower.send_signal(signal.SIGINT)
        ended = [_ended(f) for f in followers]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert first[0] == first[1]
    assert then[0] == then[1]
    assert "capacity.observed" in then[0][0]
    assert [(code, rest) for code, rest, _names in ended] == [(0, ""), (0, "")]
    _lean(ended[0][2])


def test_log_follow_ends_cleanly_when_the_server_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower through a server that stops (SIGTERM) has printed what came and exits
    0: the server ends its followers' streams as it shuts down (a follower waits for
    nothing to commit), rather than cancelling them once its drain time is out."""
    monkeypatch.delenv("QUOTALEDGER_JOURNAL", raising=False)
    monkeypatch.delenv("QUOTALEDGER_JSON", raising=False)
    proc, url = _start(tmp_path / "served.jsonl")
    try:
        assert (
            run_cli("configure", "--goal", "g", "--quota-tpm", "1000", "--journal", url).code == 0
        )
        follower = _follower(["--json", "--journal", url], tmp_path)
        created, _configured = _lines(follower, 2)
        proc.terminate()
        code, rest, names = _ended(follower)
        _out, server_err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert '"kind":"journal.created"' in created
    assert (code, rest) == (0, "")
    assert proc.returncode == 0
    assert b"graceful shutdown exceeded" not in server_err  # uvicorn's word for a cancel
    _lean(names)


@pytest.mark.parametrize("value", ["5", "2m", "0.5", "-1", "nan", "x", ""])
def test_a_lock_timeout_is_checked_as_by_the_full_cli(
    servers: tuple[str, str], value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--lock-timeout-s and QUOTALEDGER_LOCK_TIMEOUT_S (a runner's environment may set
    it for every call): refused or accepted as the full CLI does, and a call given a
    good one stays lean (the server waits for its own lock: the value is only checked)."""
    monkeypatch.chdir(tmp_path)
    shown = []
    for url in servers:
        with monkeypatch.context() as patch:
            if url == servers[1]:
                patch.setattr(quotaledger.entry, "lean_call", lambda args: None)
            configure = ["configure", "--goal", "g", "--quota-tpm", "1000", "--journal", url]
            results = [
                run_cli(*configure, "--lock-timeout-s", value, "--at", "2026-11-29T14:00:00Z"),
                run_cli(
                    "inspect", "--goal", "g", "--journal", url, "--at", "2026-11-29T14:00:01Z",
                    env={"QUOTALEDGER_LOCK_TIMEOUT_S": value},
                ),
            ]  # fmt: skip
        shown.append([(r.code, r.stdout.replace(url, "<url>"), r.stderr) for r in results])
    assert placeholders(repr(shown[0])) == placeholders(repr(shown[1]))
    if value in ("5", "2m"):
        args = ["inspect", "--goal", "g", "--lock-timeout-s", value, "--journal", servers[0]]
        done, loaded = run_importtime(args, tmp_path, env={"QUOTALEDGER_LOCK_TIMEOUT_S": value})
        assert done.returncode == 0, done.stderr[-2000:]
        _lean(loaded)
