"""Issue 28: every bad input gets one clear one-line error with a SPEC code, exit 2
(or the exit SPEC §8 gives its condition), and the journal's bytes unchanged.

Each test is one numbered case of the issue, written to fail on the code before it."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import CliResult, run_cli

AT = "2026-11-29T14:00:00Z"
ONE_LINE = re.compile(r"quotaledger: error: [^\n]+ \[([a-z_0-9]+)\]\n")


def _configured(journal: str, goal: str = "g") -> None:
    done = run_cli(
        "configure", "--journal", journal, "--goal", goal, "--max-active-cases", "4",
        "--quota-tpm", "100000", "--at", AT,
    )  # fmt: skip
    assert done.code == 0, done.stderr


def _one_line_error(done: CliResult, code: str, exit_code: int = 2) -> None:
    """Exactly one line on stderr, `quotaledger: error: MESSAGE [code]`, nothing on stdout."""
    match = ONE_LINE.fullmatch(done.stderr)
    assert match is not None, f"not one error line: {done.stderr!r}"
    assert match.group(1) == code, done.stderr
    assert done.code == exit_code, done.stderr
    assert done.stdout == ""


def _unchanged(journal: str, before: bytes) -> None:
    assert Path(journal).read_bytes() == before


def _with_stdin(text: str, *args: str) -> CliResult:
    old = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        return run_cli(*args)
    finally:
        sys.stdin = old


# -- 1. deep JSON and numbers of thousands of digits ------------------------------------


DEEP = "[" * 1000 + "]" * 1000
DEEP_OBJECT = '{"a":' * 1000 + "1" + "}" * 1000


@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT, '{"usage": ' + DEEP + "}"])
def test_deep_usage_is_invalid_usage(journal_path: str, tmp_path: Path, body: str) -> None:
    _configured(journal_path)
    before = Path(journal_path).read_bytes()
    usage = tmp_path / "usage.json"
    usage.write_text(body)
    done = run_cli("observe", "--journal", journal_path, "--goal", "g", "--usage", str(usage))
    _one_line_error(done, "invalid_usage")
    done = _with_stdin(body, "observe", "--journal", journal_path, "--goal", "g", "--usage", "-")
    _one_line_error(done, "invalid_usage")
    _unchanged(journal_path, before)


@pytest.mark.parametrize(
    "headers",
    [
        DEEP,
        DEEP_OBJECT,
        json.dumps({"x-ratelimit-limit-tokens": "9" * 5000}),
        '{"x-ratelimit-limit-tokens": ' + "9" * 5000 + "}",
        "x-ratelimit-reset-tokens: " + "9" * 5000 + "s",
        "retry-after: " + "9" * 5000,
        "retry-after-ms: " + "9" * 5000 + ".5",
        json.dumps({"retry-after": "1" + "0" * 5000}),
    ],
)
@pytest.mark.parametrize("command", ["observe", "reject"])
def test_provider_headers_of_any_depth_or_digits(
    journal_path: str, tmp_path: Path, headers: str, command: str
) -> None:
    _configured(journal_path)
    before = Path(journal_path).read_bytes()
    path = tmp_path / "headers.txt"
    path.write_text(headers)
    counts = ["--uncached-input", "1", "--cached-input", "0", "--output", "1"]
    extra = counts if command == "observe" else []
    done = run_cli(
        command, "--journal", journal_path, "--goal", "g", *extra, "--provider-headers", str(path)
    )
    _one_line_error(done, "invalid_provider_headers")
    _unchanged(journal_path, before)


# -- 2. seqs and counts past 2^63 ----------------------------------------------------------


@pytest.mark.parametrize("option", ["--last", "--limit"])
def test_log_takes_a_count_of_any_size(journal_path: str, option: str) -> None:
    _configured(journal_path)
    done = run_cli("log", "--journal", journal_path, "--json", option, str(10**20))
    assert done.code == 0, done.stderr
    assert [json.loads(line)["seq"] for line in done.stdout.splitlines()] == [0, 1]


@pytest.mark.parametrize("command", [("inspect",), ("audit",)])
def test_a_huge_seq_is_past_the_head(journal_path: str, command: tuple[str, ...]) -> None:
    _configured(journal_path)
    for seq in ("99999", str(10**20)):
        done = run_cli(*command, "--journal", journal_path, "--seq", seq)
        _one_line_error(done, "seq_out_of_range")


COUNTS = ("--cached-input", "0", "--output", "0")

# -- 3. the option parser's errors: one line, one code per option ---------------------------


@pytest.mark.parametrize(
    ("args", "env", "code"),
    [
        (("admit", "--goal", "g"), {}, "usage"),  # a missing required option
        (("inspect", "--bogus"), {}, "usage"),  # an unknown option
        (("inspect", "extra"), {}, "usage"),  # an unexpected argument
        (("inspect",), {"QUOTALEDGER_JSON": "2"}, "invalid_option"),
        (("inspect",), {"QUOTALEDGER_LOCK_TIMEOUT_S": "soon"}, "invalid_duration"),
        (
            ("admit", "--goal", "g", "--run", "r", "--forecast-tpm", "nan"),
            {},
            "invalid_token_count",
        ),
        (
            ("admit", "--goal", "g", "--run", "r", "--forecast-tpm", "1.5"),
            {},
            "invalid_token_count",
        ),
        (("admit", "--goal", "g", "--run", "r", "--forecast-tpm", "-1"), {}, "invalid_token_count"),
        (("observe", "--goal", "g", "--uncached-input", "nan", *COUNTS), {}, "invalid_token_count"),
        (("observe", "--goal", "g", "--uncached-input", "1.5", *COUNTS), {}, "invalid_token_count"),
        (("observe", "--goal", "g", "--uncached-input", "-1", *COUNTS), {}, "invalid_token_count"),
        (("configure", "--goal", "g", "--max-active-cases", "-1"), {}, "invalid_config"),
        (("configure", "--goal", "g", "--max-active-cases", "abc"), {}, "invalid_config"),
        (("configure", "--goal", "g", "--cached-input-weight", "nan"), {}, "invalid_config"),
        (("configure", "--goal", "g", "--cached-input-weight", "x"), {}, "invalid_config"),
        (("log", "--last", "x"), {}, "invalid_option"),
        (("log", "--last", "-1"), {}, "invalid_option"),
    ],
)
def test_parser_errors_are_one_line_with_the_options_code(
    journal_path: str, args: tuple[str, ...], env: dict[str, str], code: str
) -> None:
    _configured(journal_path)
    before = Path(journal_path).read_bytes()
    done = run_cli(*args, "--journal", journal_path, env=env)
    _one_line_error(done, code)
    if "QUOTALEDGER_JSON" in env:
        return  # an explicit --json wins over the environment (SPEC §8)
    as_json = run_cli(*args, "--journal", journal_path, "--json", env=env)
    assert as_json.code == 2
    assert as_json.json["error"]["code"] == code
    _unchanged(journal_path, before)


# -- 4. a typo never creates a goal; a configure that changes nothing appends nothing ------


@pytest.mark.parametrize(
    "args",
    [
        ("reject", "--goal", "swe-bnch"),
        ("admit", "--goal", "swe-bnch", "--run", "r1"),
        ("admit", "--goal", "swe-bnch", "--run", "r1", "--dry-run"),
        ("release", "--goal", "swe-bnch", "--run", "r1"),
        ("observe", "--goal", "swe-bnch", "--uncached-input", "1", "--cached-input", "0",
         "--output", "0"),
    ],
)  # fmt: skip
def test_capacity_writers_refuse_an_unknown_goal(journal_path: str, args: tuple[str, ...]) -> None:
    _configured(journal_path, "swe-bench")
    before = Path(journal_path).read_bytes()
    done = run_cli(*args, "--journal", journal_path)
    _one_line_error(done, "unknown_goal")
    assert "swe-bench" in done.stderr  # the closest known goal
    _unchanged(journal_path, before)


def test_configure_that_changes_nothing_appends_nothing(journal_path: str) -> None:
    _configured(journal_path)
    before = Path(journal_path).read_bytes()
    for args in (
        ("--goal", "g", "--max-active-cases", "4", "--quota-tpm", "100000"),
        ("--goal", "g", "--remove-limit", "rpm"),
        ("--goal", "typo", "--remove-limit", "rpm"),
        ("--goal", "typo", "--remove-gate", "cases"),
    ):
        done = run_cli("configure", "--journal", journal_path, "--json", *args)
        assert done.code == 0, done.stderr
        assert done.json["appended"] is False
        assert done.json["changes"] == {}
        assert "event" not in done.json
    _unchanged(journal_path, before)
    typo = run_cli("inspect", "--journal", journal_path, "--goal", "typo")
    _one_line_error(typo, "unknown_goal")


# -- 5. host exit takes exactly one; a reader asked about a missing lane refuses -----------


def test_host_exit_needs_exit_code_or_signal(journal_path: str) -> None:
    _configured(journal_path)
    before = Path(journal_path).read_bytes()
    done = run_cli("host", "exit", "--journal", journal_path, "--goal", "g", "--attempt", "a1")
    _one_line_error(done, "invalid_option")
    _unchanged(journal_path, before)


def test_host_status_of_a_missing_lane_refuses(journal_path: str) -> None:
    _configured(journal_path)
    done = run_cli("host", "status", "--journal", journal_path, "--goal", "g", "--lane", "zz")
    _one_line_error(done, "unknown_lane")


# -- 6. one reader of standard input ------------------------------------------------------


def test_two_options_reading_stdin_is_exit_2(journal_path: str) -> None:
    _configured(journal_path)
    before = Path(journal_path).read_bytes()
    args = ("observe", "--journal", journal_path, "--goal", "g", "--usage", "-")
    done = _with_stdin(
        '{"prompt_tokens": 5, "completion_tokens": 3}', *args, "--provider-headers", "-"
    )
    _one_line_error(done, "usage")
    _unchanged(journal_path, before)


# -- 7. a read-only filesystem ------------------------------------------------------------


def _read_only(tmp_path: Path, journal: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`quotaledger ARGS` in a mount namespace where the journal's directory is a
    read-only bind mount of itself (a real EROFS, no root needed beyond a user ns)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare")
    directory = str(Path(journal).parent)
    quoted = " ".join(f"'{a}'" for a in args)
    script = (
        f"mount --bind '{directory}' '{directory}' && "
        f"mount -o remount,bind,ro '{directory}' && "
        f"exec '{sys.executable}' -m quotaledger {quoted}"
    )
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=60
    )


def test_a_read_only_filesystem(journal_path: str, tmp_path: Path) -> None:
    _configured(journal_path)
    admit = ("admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--forecast-tpm", "10")
    observe = ("observe", "--goal", "g", "--uncached-input", "1", "--cached-input", "0",
               "--output", "0", "--at", AT)  # fmt: skip
    assert run_cli(*observe, "--journal", journal_path).code == 0
    admitted = run_cli(*admit, "--journal", journal_path, "--at", AT)
    assert admitted.code == 0, admitted.stdout + admitted.stderr
    before = Path(journal_path).read_bytes()
    reader = _read_only(tmp_path, journal_path, "inspect", "--journal", journal_path, "--json")
    assert reader.returncode == 0, reader.stderr
    replay = _read_only(tmp_path, journal_path, *admit, "--journal", journal_path, "--json")
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["idempotent"] is True
    writer = _read_only(
        tmp_path, journal_path, "release", "--goal", "g", "--run", "r1", "--journal", journal_path
    )
    assert writer.returncode == 4, writer.stderr
    assert ONE_LINE.fullmatch(writer.stderr), writer.stderr
    assert writer.stderr.endswith("[journal_read_only]\n")
    _unchanged(journal_path, before)


# -- 8. one code per condition ----------------------------------------------------------------


def test_a_bad_clock_skew_is_refused_without_at(journal_path: str) -> None:
    _configured(journal_path)
    before = Path(journal_path).read_bytes()
    done = run_cli(
        "observe", "--journal", journal_path, "--goal", "g", "--uncached-input", "1",
        "--cached-input", "0", "--output", "0", env={"QUOTALEDGER_MAX_CLOCK_SKEW_S": "abc"},
    )  # fmt: skip
    assert done.code == 2, done.stderr
    assert ONE_LINE.fullmatch(done.stderr), done.stderr
    _unchanged(journal_path, before)


def test_audit_of_a_seq_past_the_head(journal_path: str) -> None:
    _configured(journal_path)
    done = run_cli("audit", "--journal", journal_path, "--seq", "99999")
    _one_line_error(done, "seq_out_of_range")


@pytest.mark.parametrize(
    "args", [("checkpoint",), ("repair", "--truncate-after", "3", "--yes"), ("verify",)]
)
def test_a_missing_journal_is_journal_not_found(tmp_path: Path, args: tuple[str, ...]) -> None:
    missing = str(tmp_path / "none.jsonl")
    done = run_cli(*args, "--journal", missing)
    _one_line_error(done, "journal_not_found", exit_code=3)
    assert not Path(missing).exists()


def test_audit_of_a_budget_configured_event_is_not_a_decision(journal_path: str) -> None:
    done = run_cli(
        "budget", "configure", "--journal", journal_path, "--goal", "b", "--window-hours", "5",
        "--allowed-units", "100", "--at", AT, "--json",
    )  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr
    audit = run_cli("audit", "--journal", journal_path, "--seq", "1")
    _one_line_error(audit, "not_a_decision")


def test_enospc_during_checkpoint_is_no_space(journal_path: str) -> None:
    """The checkpoint's temp file is fsynced (the journal is fdatasynced): ENOSPC from
    that fsync, injected by strace, is the disk-full condition's one code."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    _configured(journal_path)
    before = Path(journal_path).read_bytes()
    done = subprocess.run(
        ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync",
         "-e", "inject=fsync:error=ENOSPC", sys.executable, "-m", "quotaledger",
         "checkpoint", "--journal", journal_path],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr
    assert ONE_LINE.fullmatch(done.stderr) and done.stderr.endswith("[no_space]\n"), done.stderr
    assert not Path(journal_path + ".checkpoint").exists()
    _unchanged(journal_path, before)
