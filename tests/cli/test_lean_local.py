"""A runner's per-event command on a local journal (SPEC §9's start-up figure):
`observe`, `admit`, `reject` and `release` read their command line with the generated
grammar and run their use case without typer or click, and print, byte for byte, what
the full CLI prints, text and --json, errors and exit codes included.

Both paths run the same generated inputs (the golden session, and for every option of
these commands a value it refuses, a required option left out, the environment's
variables) on two copies of one journal, side by side.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quotaledger.entry
import quotaledger.lean.local
from quotaledger.startup import PER_EVENT_COMMANDS
from tests.cli.test_json_answers import SESSION
from tests.cli.test_lean_client import NOT_LOADED, _dotted, _malformed
from tests.cli.test_remote_client import _files
from tests.support import run_cli, run_importtime

AT = ["--at", "2026-11-29T14:00:09Z"]
"""A time for every write: both journals stay identical."""
TYPER = ("typer", "click")


class Paths:
    """The two sides: the lean path and the full CLI, each in its own directory on
    its own copy of the journal (the same name, so printed paths agree)."""

    def __init__(self, root: Path) -> None:
        self.dirs = {lean: root / ("lean" if lean else "full") for lean in (True, False)}
        for where in self.dirs.values():
            where.mkdir()
            _files(where)

    def copy_journal(self) -> None:
        shutil.copyfile(self.dirs[True] / "j.jsonl", self.dirs[False] / "j.jsonl")


def _run(
    args: list[str],
    *,
    lean: bool,
    where: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str] | None = None,
    used: list[bool] | None = None,
) -> tuple[int, str, str]:
    real = quotaledger.lean.local.call

    def call(argv: list[str]) -> int | None:
        code = real(argv)
        if used is not None:
            used.append(code is not None)
        return code

    with monkeypatch.context() as patch:
        patch.chdir(where)
        if lean:
            patch.setattr(quotaledger.lean.local, "call", call)
        else:
            patch.setattr(quotaledger.entry, "lean_call", lambda args: None)
        result = run_cli(*args, env=env)
    return result.code, result.stdout, result.stderr


def _both(
    paths: Paths,
    args: list[str],
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str] | None = None,
    used: list[bool] | None = None,
) -> tuple[Any, Any]:
    return tuple(  # type: ignore[return-value]
        _run(
            args,
            lean=lean,
            where=paths.dirs[lean],
            monkeypatch=monkeypatch,
            env=env,
            used=used if lean else None,
        )
        for lean in (True, False)
    )


@pytest.fixture
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    for name in ("QUOTALEDGER_JOURNAL", "QUOTALEDGER_JSON", "QUOTALEDGER_LOCK_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)
    return Paths(tmp_path)


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_the_session_prints_what_the_full_cli_prints(
    paths: Paths, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    """The golden session's capacity part: every line on both paths, the journals
    kept identical (every per-event line names its time), the outputs compared."""
    used: list[bool] = []
    journal = str(paths.dirs[True] / "j.jsonl")
    seed = ["configure", "--goal", "seed", "--quota-tpm", "1", "--at", "2026-11-29T14:00:00Z"]
    assert run_cli(*seed, "--journal", journal).code == 0
    paths.copy_journal()
    for line in SESSION:
        if line.startswith("# operators"):
            break
        if line.startswith("#") or "--at" not in line:  # a time of its own: the clock's
            continue
        args = [*shlex.split(line), "--journal", "j.jsonl", *(["--json"] if as_json else [])]
        lean, full = _both(paths, args, monkeypatch, used=used)
        assert lean == full, line
    assert (paths.dirs[True] / "j.jsonl").read_bytes() == (
        paths.dirs[False] / "j.jsonl"
    ).read_bytes()
    assert sum(used) >= 12  # the lean path ran the session's per-event lines


def _inputs() -> Iterator[tuple[str, list[str], dict[str, str] | None]]:
    """Generated: each per-event command's malformed values and missing options,
    text and --json, and the environment's variables and the common options."""
    for words in PER_EVENT_COMMANDS:
        for what, args in _malformed(words):
            timed = args if "--at" in args else [*args, *AT]
            for shown in (["--json"], []):
                yield f"{what} {shown}", [*timed, *shown], None
    good = ["admit", "--goal", "x", "--run", "r9", "--forecast-tpm", "5", "--dry-run", *AT]
    for value in ("1", "no", "2", "", "TRUE"):
        yield f"QUOTALEDGER_JSON={value!r}", good, {"QUOTALEDGER_JSON": value}
    for value in ("5", "1.5", "0", "-1", "nan", "2m", "x", ""):
        yield f"--lock-timeout-s {value!r}", [*good, "--lock-timeout-s", value], None
        yield f"LOCK_TIMEOUT_S={value!r}", good, {"QUOTALEDGER_LOCK_TIMEOUT_S": value}
    for journal in ("", "nowhere/j.jsonl", "mysql://x", "j.jsonl"):
        yield f"--journal {journal!r}", [*good, "--journal", journal], None
        yield f"QUOTALEDGER_JOURNAL={journal!r}", good, {"QUOTALEDGER_JOURNAL": journal}
    yield "--json --no-json", [*good, "--json", "--no-json"], None
    yield "--json=1", [*good, "--json=1"], None
    yield "--goal=x", [good[0], "--goal=x", *good[3:]], None
    yield "repeated --run", [*good, "--run", "r10"], None
    yield "--help", ["observe", "--help"], None
    yield "-h", ["admit", "-h"], None
    yield "positional", [*good, "extra"], None
    yield "unknown option", [*good, "--frobnicate"], None
    observe = ["observe", "--goal", "x", *AT]
    yield "--usage -", [*observe, "--usage", "-"], None
    yield "two stdin readers", [*observe, "--usage", "-", "--provider-headers", "-"], None
    yield "--usage missing", [*observe, "--usage", "missing.json"], None
    yield (
        "--usage body",
        [*observe, "--usage", "body.json", "--provider-headers", "headers.txt"],
        None,
    )


@pytest.mark.parametrize("words", PER_EVENT_COMMANDS)
def test_generated_inputs_fail_and_answer_as_through_the_full_cli(
    paths: Paths, monkeypatch: pytest.MonkeyPatch, words: str
) -> None:
    journal = str(paths.dirs[True] / "j.jsonl")
    configure = ["configure", "--goal", "x", "--quota-tpm", "100000", "--max-active-cases", "2"]
    assert run_cli(*configure, "--at", "2026-11-29T14:00:00Z", "--journal", journal).code == 0
    paths.copy_journal()
    used: list[bool] = []
    for what, args, env in _inputs():
        if args[0] != words:
            continue
        named = args if "--journal" in args or env else [*args, "--journal", "j.jsonl"]
        lean, full = _both(paths, named, monkeypatch, env, used)
        assert lean == full, (what, args, env)
    assert any(used)


def test_a_per_event_call_loads_neither_typer_nor_click(tmp_path: Path) -> None:
    """What the bench measures (SPEC §9): `observe` and `admit --dry-run` as whole
    processes, and `reject` and `release`, load no typer and no click."""
    journal = str(tmp_path / "j.jsonl")
    run_cli("configure", "--goal", "g", "--quota-tpm", "100000", "--journal", journal)
    admit = ["admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--forecast-tpm", "1"]
    counts = ["--uncached-input", "10", "--cached-input", "0", "--output", "5"]
    calls = [
        ["observe", "--goal", "g", *counts, "--json"],
        [*admit, "--dry-run", "--json"],
        admit,
        ["reject", "--goal", "g", "--run", "r1", "--retry-after-s", "1"],
        ["release", "--goal", "g", "--run", "r1"],
        ["release", "--goal", "g", "--run", "r1", "--at", "yesterday"],  # an error
    ]
    for args in calls:
        done, loaded = run_importtime([*args, "--journal", journal], tmp_path)
        assert done.returncode == (2 if "yesterday" in args else 0), done.stderr[-2000:]
        assert "quotaledger.lean.local" in loaded  # the check sees the lean path
        heavy = {n for n in loaded if n in TYPER or n.startswith(_dotted(TYPER))}
        assert heavy == set(), args
    assert set(NOT_LOADED) >= set(TYPER)
