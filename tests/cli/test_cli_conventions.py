"""SPEC §8's conventions for every command: durations, listed choices, -h, the bare
command, --version, one "Did you mean"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import quotaledger
from quotaledger.journal import InvalidInput
from quotaledger.journal.clock import parse_duration_s
from tests.support import run_cli, run_process

AT = "2026-11-29T14:00:00Z"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1d", 86400),
        ("1.5", 1.5),
        ("1.5m", 90),
        ("250ms", 0.25),
        (" 2h ", 7200),
        ("0", 0),
    ],
)
def test_durations_as_users_write_them(text: str, seconds: float) -> None:
    assert parse_duration_s(text, "lease_s") == seconds


@pytest.mark.parametrize("text", ["", " ", "-5", "+5", "5x", "1h30", "nan", "inf", "s", "1e3"])
def test_a_malformed_duration_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_duration_s(text, "lease_s")
    assert caught.value.code == "invalid_duration"


def _configured(journal: str) -> None:
    done = run_cli(
        "configure", "--journal", journal, "--goal", "g", "--max-active-cases", "4",
        "--quota-tpm", "100000", "--cooldown-base-s", "1m", "--cooldown-max-s", "2h",
        "--max-observation-age-s", "90s", "--at", AT, "--json",
    )  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr
    tokens = done.json["config"]["tokens"]
    assert (tokens["cooldown_base_s"], tokens["cooldown_max_s"]) == (60, 7200)
    assert tokens["max_observation_age_s"] == 90


def test_every_duration_option_takes_a_duration(journal_path: str) -> None:
    _configured(journal_path)
    admitted = run_cli(
        "admit", "--journal", journal_path, "--goal", "g", "--run", "r1", "--arm", "baseline",
        "--forecast-tpm", "0", "--lease-s", "30m", "--at", AT, "--json",
    )  # fmt: skip
    assert admitted.code in (0, 1), admitted.stdout + admitted.stderr
    request = admitted.json["receipt" if admitted.code == 0 else "figures"]
    assert admitted.code == 1 or request["lease_until"] == "2026-11-29T14:30:00.000000Z"
    rejected = run_cli(
        "reject", "--journal", journal_path, "--goal", "g", "--retry-after-s", "2m",
        "--lock-timeout-s", "1m", "--at", AT, "--json",
    )  # fmt: skip
    assert rejected.code == 0, rejected.stdout + rejected.stderr
    assert rejected.json["cooldown_s"] == 120
    # The environment variable goes through the same parser.
    by_env = run_cli(
        "inspect", "--journal", journal_path, "--json", env={"QUOTALEDGER_LOCK_TIMEOUT_S": "2s"}
    )
    assert by_env.code == 0, by_env.stdout + by_env.stderr


@pytest.mark.parametrize(
    ("args", "option", "code"),
    [
        (["admit", "--goal", "g", "--run", "r1", "--lease-s", "30x"], "--lease-s", None),
        (["admit", "--goal", "g", "--run", "r1", "--lease-s", "1.5"], "--lease-s", None),
        (["reject", "--goal", "g", "--retry-after-s", "soon"], "--retry-after-s", None),
        # A config field's one code, whatever way its value is bad (SPEC §8).
        (
            ["configure", "--goal", "g", "--cooldown-max-s", "-1"],
            "--cooldown-max-s",
            "invalid_config",
        ),
        (["inspect", "--lock-timeout-s", "forever"], "--lock-timeout-s", None),
    ],
)
def test_a_bad_duration_is_exit_2_naming_the_option(
    args: list[str], option: str, code: str | None, journal_path: str
) -> None:
    refused = run_cli(*args, "--journal", journal_path, "--json")
    assert refused.code == 2, refused.stdout + refused.stderr
    error = refused.json["error"]
    assert error["code"] == (code or "invalid_duration"), error
    assert option in error["message"]
    assert not Path(journal_path).exists()
    text = run_cli(*args, "--journal", journal_path)
    assert text.code == 2 and option in text.stderr and "Traceback" not in text.stderr


def test_duration_options_say_so_in_help() -> None:
    for path, option in [
        (["admit"], "--lease-s"),
        (["reject"], "--retry-after-s"),
        (["configure"], "--cooldown-base-s"),
        (["probe", "run"], "--timeout-s"),
        (["inspect"], "--lock-timeout-s"),
    ]:
        text = run_cli(*path, "--help").stdout.split("Options:", 1)[1]
        line = " ".join(text.split(option + " ", 1)[1].split())
        assert line.startswith("DURATION"), (path, option, line[:80])
        assert "90s" in text and "30m" in text, (path, text)


@pytest.mark.parametrize(
    ("path", "option", "choices"),
    [
        (["admit"], "--arm", "baseline|control|treatment|explore"),
        (["admit"], "--class", "solver|evaluator"),
        (["observe"], "--coverage", "measured|estimated|unmetered"),
        (["host", "return"], "--outcome", "completed|failed|interrupted"),
        (
            ["host", "return"],
            "--failure",
            "quota_exhausted|output_budget_exhausted|retryable|fatal",
        ),
    ],
)
def test_enumerated_options_list_their_choices(path: list[str], option: str, choices: str) -> None:
    text = run_cli(*path, "--help").stdout.split("Options:", 1)[1]
    after = " ".join(text.split(option + " ", 1)[1].split())
    assert after.startswith(f"[{choices}]"), after[:120]


def test_dash_h_is_help() -> None:
    for path in ([], ["admit"], ["host"], ["host", "status"]):
        short, long = run_cli(*path, "-h"), run_cli(*path, "--help")
        assert short.code == 0 and short.stdout == long.stdout and "Usage:" in short.stdout


def test_the_bare_command_prints_help_and_exits_0() -> None:
    bare = run_process()
    assert bare.code == 0, bare.stderr
    assert "Usage: quotaledger" in bare.stdout and "Commands" in bare.stdout
    assert bare.stderr == ""
    group = run_cli("host")
    assert group.code == 0 and "Usage: quotaledger host" in group.stdout


def test_version() -> None:
    done = run_process("--version")
    assert done.code == 0, done.stderr
    assert done.stdout == f"quotaledger {quotaledger.__version__}\n"


def test_an_unknown_command_suggests_once() -> None:
    typo = run_cli("admti")
    assert typo.code == 2
    assert typo.stderr.count("Did you mean") + typo.stderr.count("did you mean") == 1
    assert "admit" in typo.stderr
    as_json = run_cli("admti", "--json")
    body = json.loads(as_json.stdout)
    assert body["error"]["message"].lower().count("did you mean") == 1
