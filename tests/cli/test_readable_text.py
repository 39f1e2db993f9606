"""Text output an operator reads at a glance (issue 29, items 2, 3 and 6):

- a dimension's line gives its load and names each non-zero part it is the largest
  of, the provider's count included (`load 50000 (usage 1100, reserved 0)` read as
  wrong arithmetic);
- a gate that is not configured prints no line (a cases-only goal's tokens line was
  all "-");
- durations are rounded for people (`cooldown 43.587038s`);
- `whatif` states the assumptions that differ from a plain replay, all of them with
  --verbose (and --json always keeps every one);
- every refusal says REFUSED and its reasons (`host heartbeat` with the wrong session
  printed the phase alone);
- a refusal with no token shortfall (a cooldown) prints none (was "-30,000 TPM").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from quotaledger import Ledger
from tests.support import run_cli

T0 = "2026-11-29T14:00:00Z"


def at(seconds: int) -> str:
    return f"2026-11-29T14:{seconds // 60:02d}:{seconds % 60:02d}Z"


def _cli(journal: str, *args: str) -> str:
    result = run_cli(*args, "--journal", journal)
    assert result.code in (0, 1), result.stderr
    return result.stdout


def test_a_dimension_line_names_the_provider_load(journal_path: str) -> None:
    headers = {"x-ratelimit-limit-tokens": "100000", "x-ratelimit-remaining-tokens": "50000",
               "x-ratelimit-reset-tokens": "30s"}  # fmt: skip
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, quota_rpm=50, at=at(0))
        ledger.observe(goal="g", uncached_input=1000, cached_input=0, output=100, requests=2,
                       provider_headers=headers, at=at(1))  # fmt: skip
    inspect = _cli(journal_path, "inspect", "--goal", "g", "--at", at(2))
    assert "tpm: load 50000 (max of usage 1100, provider used 50000) vs target 90000" in inspect
    assert "rpm: load 2 (usage 2) vs target 45; headroom 43 RPM" in inspect
    refused = _cli(journal_path, "admit", "--goal", "g", "--run", "r", "--forecast-tpm", "45000",
                   "--forecast-rpm", "1", "--at", at(2))  # fmt: skip
    assert refused.startswith("REFUSED r: token_headroom_exhausted")
    assert (
        "tpm (binding): load 50000 (max of usage 1100, provider used 50000) + forecast 45000"
        in (refused)
    )


def test_a_gate_not_configured_prints_no_line(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", max_active_cases=2, at=at(0))
    inspect = _cli(journal_path, "inspect", "--goal", "g", "--at", at(1))
    assert "tokens" not in inspect and "tpm" not in inspect.replace("config:", "")
    assert " - " not in inspect and "solver -" not in inspect


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.02, "0.02s"),
        (30, "30s"),
        (43.587038, "43.6s"),
        (59.97, "1m00s"),
        (125, "2m05s"),
        (5400, "1h30m"),
        (86400 * 2 + 3 * 3600, "2d03h"),
    ],
)
def test_durations_are_rounded_for_people(seconds: float, text: str) -> None:
    from quotaledger.render.readable import duration_text

    assert duration_text(seconds) == text


def test_a_cooldown_prints_rounded(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=at(0))
    text = _cli(journal_path, "reject", "--goal", "g", "--retry-after-s", "43.587038",
                "--at", at(1))  # fmt: skip
    assert "cooldown 43.6s until" in text and "43.587038" not in text


def test_whatif_states_only_what_differs_unless_verbose(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=10_000, at=at(0))
        ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(1))
        ledger.admit(goal="g", run="r", forecast_tpm=9_500, at=at(2))
    args = ("whatif", "--goal", "g", "--quota-tpm", "20000")
    plain = _cli(journal_path, *args).split("assumptions:")[1].strip().splitlines()
    assert len(plain) == 2 and "quota_tpm=20000" in plain[0] and "--verbose" in plain[1]
    verbose = _cli(journal_path, *args, "--verbose").split("assumptions:")[1].strip()
    answer = run_cli(*args, "--journal", journal_path, "--json").json
    assert [line.strip() for line in verbose.splitlines()] == [
        f"- {a}" for a in answer["assumptions"]
    ]
    assert len(answer["assumptions"]) > 5
    ranged = _cli(journal_path, *args, "--since", at(1)).split("assumptions:")[1]
    assert "range: from 2026-11-29T14:00:01" in ranged


def test_a_refused_heartbeat_says_refused_and_why(journal_path: str) -> None:
    _cli(journal_path, "host", "phase", "--goal", "g", "--lane", "l1", "--deadline", "+1h",
         "--session", "s1", "--profile", "p")  # fmt: skip
    result = run_cli("host", "heartbeat", "--goal", "g", "--lane", "l1", "--session", "wrong",
                     "--journal", journal_path)  # fmt: skip
    assert result.code == 1
    assert result.stdout.startswith("REFUSED host heartbeat: session_mismatch")


def test_a_cooldown_refusal_prints_no_negative_shortfall(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=at(0))
        ledger.observe(goal="g", uncached_input=1000, cached_input=0, output=0, at=at(1))
        ledger.reject(goal="g", retry_after_s=30, at=at(2))
        seq = ledger.admit(goal="g", run="r", forecast_tpm=10, at=at(3))["event"]["seq"]
    text = _cli(journal_path, "audit", "--seq", str(seq))
    assert "binding constraint: capacity_cooldown_active" in text
    assert "shortfall" not in text


def test_an_option_before_the_command_gets_a_hint(journal_path: str) -> None:
    text = run_cli("--journal", journal_path, "inspect")
    assert text.code == 2
    assert "No such option '--journal'" in text.stderr
    assert "options go after the command: quotaledger inspect --journal ..." in text.stderr
    answer = run_cli("--json", "host", "status", "--goal", "g")
    assert answer.code == 2
    message = answer.json["error"]["message"]
    assert "quotaledger host status --json ..." in message and "--version" not in message


@pytest.mark.parametrize(
    ("headers", "said", "unsaid"),
    [
        (
            "x-ratelimit-limit-tokens: 9\nx-ratelimit-remaining-tokens: 1\n"
            "x-ratelimit-reset-tokens: 99999999999h\n",
            "'99999999999h' is not a reset",
            "''",
        ),
        ('{"retry-after": null}', "null is not a header value", "None"),
    ],
)
def test_a_bad_header_is_named_as_it_was_given(
    journal_path: str, tmp_path: Path, headers: str, said: str, unsaid: str
) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=at(0))
    path = tmp_path / "headers.txt"
    path.write_text(headers)
    result = run_cli("reject", "--goal", "g", "--provider-headers", str(path), "--journal",
                     journal_path, "--at", at(1))  # fmt: skip
    assert result.code == 2 and said in result.stderr and unsaid not in result.stderr


def test_an_oversized_usage_file_speaks_of_usage(journal_path: str, tmp_path: Path) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=at(0))
    path = tmp_path / "usage.json"
    path.write_text(" " * (1 << 20) + "{}")
    result = run_cli("observe", "--goal", "g", "--usage", str(path), "--journal", journal_path)
    assert result.code == 2 and "--usage: more than 1 MiB" in result.stderr
    assert "header" not in result.stderr


def test_an_audit_gives_each_dimensions_figures_in_its_unit(journal_path: str) -> None:
    """A refusal bound by itpm: its audit printed tpm's figures alone ("usage 0 TPM
    (...); reserved 0; load 0; target 90,000"); it gives each configured dimension's
    line as `admit` and `inspect` do, the binding one marked, zero parts unnamed."""
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, quota_itpm=1000, quota_rpm=10, at=at(0))
        ledger.observe(goal="g", uncached_input=10, cached_input=0, output=0, requests=1,
                       at=at(1))  # fmt: skip
        refused = ledger.admit(goal="g", run="r", forecast_tpm=500, forecast_itpm=2000,
                               forecast_rpm=1, at=at(2))  # fmt: skip
    assert refused["reasons"] == ["itpm_forecast_exceeds_target", "itpm_headroom_exhausted"]
    text = _cli(journal_path, "audit", "--seq", str(refused["event"]["seq"]))
    assert "binding constraint: itpm_forecast_exceeds_target   shortfall 1,110 ITPM" in text
    lines = text.splitlines()
    assert "tpm: load 10 (usage 10) + forecast 500 vs target 90,000; headroom 89,990 TPM" in lines
    assert (
        "itpm (binding): load 10 (usage 10) + forecast 2,000 vs target 900; headroom 890 ITPM"
        in lines
    )
    assert "rpm: load 1 (usage 1) + forecast 1 vs target 9; headroom 8 RPM" in lines
    assert "usage 10 TPM (uncached 10)" in lines
    assert "reserved 0" not in text and "cached 0" not in text


def test_an_audit_of_a_cases_only_refusal_prints_no_token_figures(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", max_active_cases=1, at=at(0))
        ledger.admit(goal="g", run="r1", arm="baseline", at=at(1))
        refused = ledger.admit(goal="g", run="r2", arm="baseline", at=at(2))
    assert refused["ok"] is False
    text = _cli(journal_path, "audit", "--seq", str(refused["event"]["seq"]))
    assert f"binding constraint: {refused['reasons'][0]}" in text
    assert "active cases 1 (target 1, max 1)" in text
    assert "TPM" not in text and "target -;" not in text and "observe before" not in text


def test_a_configured_duration_is_printed_for_people(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=at(0))
    text = _cli(journal_path, "configure", "--goal", "g", "--cooldown-base-s", "1h30m",
                "--max-observation-age-s", "90", "--at", at(1))  # fmt: skip
    changed = text.split("changed: ", 1)[1]
    assert "cooldown_base_s 15s -> 1h30m" in changed
    assert "max_observation_age_s 1m00s -> 1m30s" in changed
