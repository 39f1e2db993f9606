"""Issue 28's careless-user sweep, scripted: calls a new or careless user makes (things
that do not exist, files of the wrong kind, garbage on stdin, crossed ranges, bad
environment values) on a journal that holds a little of everything. Each is exit 2,
3 or 4 with exactly one line on stderr naming its code (SPEC §8), and neither the
journal's bytes nor its directory change. The option values of every wrong kind are
tests/cli/test_bad_input_generated.py's."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from tests.cli.test_bad_input_generated import DOCUMENTED, ONE_LINE
from tests.support import run_cli

T = "2026-12-05T08:{:02d}:00Z"
ZEROS = "0" * 64
SETUP = [
    ["configure", "--goal", "g", "--quota-tpm", "100000", "--max-active-cases", "3",
     "--at", T.format(0)],
    ["observe", "--goal", "g", "--run", "r1", "--uncached-input", "5", "--cached-input", "0",
     "--output", "1", "--at", T.format(1)],
    ["admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--forecast-tpm", "100",
     "--at", T.format(2)],
    ["host", "phase", "--goal", "g", "--lane", "a", "--deadline", "+1h", "--session", "s",
     "--profile", "p", "--at", T.format(3)],
    ["budget", "configure", "--goal", "t", "--allowed-units", "10", "--window-hours", "1",
     "--at", T.format(5)],
    ["turn", "open", "--goal", "t", "--agent", "ag", "--turn", "t1", "--task", "k",
     "--at", T.format(6)],
]  # fmt: skip

# (arguments, stdin, environment, exit code, error code); $D is the journal's directory.
CALLS: dict[str, tuple[str, str, dict[str, str], int, str]] = {
    "heartbeat, unknown lane": ("host heartbeat --goal g --lane zz --session s", "", {}, 2,
                                "unknown_lane"),
    "heartbeat, unknown goal": ("host heartbeat --goal gg --lane a --session s", "", {}, 2,
                                "unknown_goal"),
    "status, unknown agent": ("turn status --goal t --agent zz", "", {}, 2, "unknown_agent"),
    "log, unknown run": ("log --run nope", "", {}, 2, "unknown_run"),
    "audit, unknown run": ("audit --goal g --run nope", "", {}, 2, "unknown_run"),
    "audit, unknown hash": (f"audit --hash {ZEROS}", "", {}, 2, "decision_not_found"),
    "audit, seq past the head": ("audit --seq 99999", "", {}, 2, "seq_out_of_range"),
    "inspect, seq past the head": ("inspect --goal g --seq 99999", "", {}, 2,
                                   "seq_out_of_range"),
    "repair, seq past the head": ("repair --truncate-after 99 --yes", "", {}, 2,
                                  "seq_out_of_range"),
    "repair without --yes": ("repair --truncate-after 2", "", {}, 2, "confirmation_required"),
    "import garbage": ("import $D/garbage.jsonl", "", {}, 3, "not_a_journal"),
    "import a directory": ("import $D", "", {}, 3, "not_regular_file"),
    "import a missing file": ("import $D/missing.jsonl", "", {}, 2, "import_source_not_found"),
    "import into a journal": ("import $D/empty", "", {}, 2, "journal_not_empty"),
    "export onto the journal": ("export --to $D/j.jsonl", "", {}, 2, "out_is_journal"),
    "export to a directory": ("export --to $D", "", {}, 2, "invalid_option"),
    "report to a directory": ("report --goal g --out $D", "", {}, 2, "invalid_option"),
    "metrics, missing directory": ("metrics --out $D/no/m.prom", "", {}, 2, "invalid_option"),
    "verify, bad digest": ("verify --digest 3:abc", "", {}, 2, "invalid_digest"),
    "verify, digest past the head": (f"verify --digest 999:{ZEROS}", "", {}, 3,
                                     "digest_not_found"),
    # A FILE|- option's one code, however its input is bad (SPEC §8): unreadable, not
    # UTF-8, over 1 MiB, not JSON, not a usage report.
    "usage, a directory": ("observe --goal g --usage $D", "", {}, 2, "invalid_usage"),
    "usage, a missing file": ("observe --goal g --usage $D/none.json", "", {}, 2,
                              "invalid_usage"),
    "usage, over 1 MiB": ("observe --goal g --usage -", " " * (1 << 20) + "{}", {}, 2,
                          "invalid_usage"),
    "usage, empty stdin": ("observe --goal g --usage -", "", {}, 2, "invalid_usage"),
    "usage, binary stdin": ("observe --goal g --usage -", "\udcff\udcfe", {}, 2,
                            "invalid_usage"),
    "usage, a list": ("observe --goal g --usage -", "[]", {}, 2, "invalid_usage"),
    "usage, cached above prompt": (
        "observe --goal g --usage -",
        '{"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": '
        '{"cached_tokens": 9}}', {}, 2, "invalid_usage"),
    "headers, not a header": (
        "observe --goal g --uncached-input 1 --cached-input 0 --output 0 --provider-headers -",
        "not a header line", {}, 2, "invalid_provider_headers"),
    "headers, binary stdin": ("reject --goal g --provider-headers -", "\udcff: 1", {}, 2,
                              "invalid_provider_headers"),
    "headers, a missing file": ("reject --goal g --provider-headers $D/none.txt", "", {}, 2,
                                "invalid_provider_headers"),
    "headers, garbage Retry-After": ("reject --goal g --provider-headers -", "retry-after: soon",
                                     {}, 2, "invalid_provider_headers"),
    "log, crossed range": ("log --since 2026-12-05T10:00:00Z --until 2026-12-05T09:00:00Z", "",
                           {}, 2, "invalid_option"),
    "whatif, crossed range": ("whatif --goal g --quota-tpm 5 --since 2026-12-05T10:00:00Z "
                              "--until 2026-12-05T09:00:00Z", "", {}, 2, "invalid_option"),
    "inspect, a word for a time": ("inspect --goal g --at yesterday", "", {}, 2, "invalid_time"),
    "observe before the goal's last event": (
        f"observe --goal g --uncached-input 1 --cached-input 0 --output 0 --at {T.format(0)}",
        "", {}, 2, "time_regression"),
    "bad lock timeout in the environment": ("inspect --goal g", "",
                                            {"QUOTALEDGER_LOCK_TIMEOUT_S": "abc"}, 2,
                                            "invalid_duration"),
    "bad clock skew in the environment": ("inspect --goal g", "",
                                          {"QUOTALEDGER_MAX_CLOCK_SKEW_S": "-5"}, 2,
                                          "invalid_duration"),
    "configure nothing": ("configure --goal g", "", {}, 2, "invalid_config"),
    "demo onto a journal": ("demo --journal $D/j.jsonl", "", {}, 2, "not_a_demo_journal"),
}  # fmt: skip


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sweep") / "j.jsonl"
    for args in SETUP:
        done = run_cli(*args, "--journal", path)
        assert done.code == 0, (args, done)
    (path.parent / "garbage.jsonl").write_bytes(b"\xff\xfe garbage\n")
    (path.parent / "empty").write_bytes(b"")
    return path


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_careless_call_is_one_line_with_its_code(journal: Path, name: str, as_json: bool) -> None:
    line, stdin, env, exit_code, code = CALLS[name]
    args = line.replace("$D", str(journal.parent)).split()
    if "--journal" not in args:
        args += ["--journal", str(journal)]
    before = (journal.read_bytes(), sorted(os.listdir(journal.parent)))
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8", "surrogateescape")))
    try:
        done = run_cli(*args, *(["--json"] if as_json else []), env=env)
    finally:
        sys.stdin = old
    assert done.code == exit_code, (name, done)
    if as_json:
        assert done.stderr == "" and done.json["error"]["code"] == code, (name, done)
    else:
        match = ONE_LINE.fullmatch(done.stderr)
        assert match is not None and match.group(1) == code, (name, done.stderr)
        assert done.stdout == "", (name, done.stdout)
    assert exit_code != 2 or code in DOCUMENTED
    assert (journal.read_bytes(), sorted(os.listdir(journal.parent))) == before, name
