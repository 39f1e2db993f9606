"""Text output says what is not there in words: a goal without a cooldown says
"no cooldown", and a provider report without a reset time says how much is left
without "until -" (issue 29: read at a glance). A cooldown and a reset that are
there are still printed with their times."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import run_cli

AT = "2026-11-29T14:00:{:02d}Z"


def _session(tmp_path: Path, headers: dict[str, str]) -> str:
    journal = str(tmp_path / "j.jsonl")
    headers_file = tmp_path / "headers.json"
    headers_file.write_text(json.dumps(headers))
    steps = [
        ["configure", "--goal", "g", "--max-active-cases", "2", "--quota-tpm", "100000"],
        ["observe", "--goal", "g", "--run", "w", "--uncached-input", "1000",
         "--cached-input", "0", "--output", "100", "--provider-headers", str(headers_file)],
        ["admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--forecast-tpm", "95000"],
    ]  # fmt: skip
    for second, step in enumerate(steps):
        run_cli(*step, "--journal", journal, "--at", AT.format(second))
    texts = [
        run_cli("inspect", "--goal", "g", "--journal", journal, "--at", AT.format(5)).stdout,
        run_cli("audit", "--goal", "g", "--run", "r1", "--journal", journal).stdout,
        run_cli(
            "admit", "--goal", "g", "--run", "r2", "--forecast-tpm", "95000", "--dry-run",
            "--journal", journal, "--at", AT.format(6),
        ).stdout,
    ]  # fmt: skip
    return "\n".join(texts)


def test_nothing_that_is_absent_is_printed_as_a_dash_time(tmp_path: Path) -> None:
    limits = {"x-ratelimit-limit-tokens": "100000", "x-ratelimit-remaining-tokens": "60000"}
    text = _session(tmp_path, limits)
    assert "REFUSED" in text  # the refusal's text is among them
    assert "until -" not in text
    assert "no cooldown" in text
    assert "provider tpm: 60000 of 100000 left\n" in text


def test_a_reset_that_is_known_is_printed_with_its_time(tmp_path: Path) -> None:
    limits = {
        "x-ratelimit-limit-tokens": "100000",
        "x-ratelimit-remaining-tokens": "60000",
        "x-ratelimit-reset-tokens": "30s",
    }
    text = _session(tmp_path, limits)
    assert "provider tpm: 60000 of 100000 left until 2026-11-29T14:00:31" in text
