# ruff: noqa: E501  (the session's command lines read best unbroken)
"""Every public JSON answer stays byte-identical (SPEC §8: the keys, their order and
their values are the interface): a scripted session runs every command with
`--json` (answers, refusals, replays and errors) and its transcript is compared with
tests/cli/golden/json_answers.txt, after the run-to-run values become placeholders.
After an intended change of an answer: QUOTALEDGER_UPDATE_GOLDEN=1 pytest
tests/cli/test_json_answers.py, then read the diff.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from tests.cli.transcript import placeholders
from tests.support import run_cli

GOLDEN = Path(__file__).parent / "golden" / "json_answers.txt"
J = "j.jsonl"


def _at(second: int) -> str:
    return f"2026-11-29T14:{second // 60:02d}:{second % 60:02d}Z"


SESSION: list[str] = [
    "# capacity",
    f"configure --goal swe --max-active-cases 2 --reserved-test-cases 1 --quota-tpm 100000 --evaluator-reserve-tpm 5000 --cold-start-reserve-tpm 1000 --at {_at(0)}",
    f"configure --goal swe --quota-tpm 120000 --quota-rpm 600 --at {_at(0)}",
    f"configure --goal swe --at {_at(0)}",
    f"configure --goal 'bad goal' --quota-tpm 1 --at {_at(0)}",
    f"configure --goal swe --max-active-cases -1 --at {_at(0)}",
    f"observe --goal swe --run r1 --uncached-input 20000 --cached-input 0 --output 5000 --requests 3 --at {_at(1)}",
    f"observe --goal swe --uncached-input 1 --cached-input 0 --at {_at(1)}",
    f"observe --goal swe --uncached-input -1 --cached-input 0 --output 0 --at {_at(1)}",
    f"observe --goal swe --uncached-input 1 --cached-input 0 --output 0 --at {_at(0)}",
    f"observe --goal swe --usage body.json --provider-headers headers.txt --at {_at(1)}",
    f"admit --goal swe --run r1 --case c1 --arm baseline --forecast-tpm 30000 --lease-s 10m --at {_at(2)}",
    f"admit --goal swe --run r1 --case c1 --arm baseline --forecast-tpm 30000 --lease-s 10m --at {_at(2)}",
    f"admit --goal swe --run r2 --case c2 --arm treatment --forecast-tpm 90000 --at {_at(3)}",
    f"admit --goal swe --run r3 --case c3 --arm control --forecast-tpm 1000 --dry-run --at {_at(3)}",
    f"admit --goal swe --run r4 --case c4 --arm control --forecast-tpm 1000 --forecast-rpm 700 --at {_at(3)}",
    f"admit --goal nope --run r1 --at {_at(3)}",
    f"reject --goal swe --run r1 --retry-after-s 30 --detail 'HTTP 429' --at {_at(4)}",
    f"reject --goal swe --provider-headers headers.txt --at {_at(4)}",
    f"release --goal swe --run r1 --at {_at(5)}",
    f"release --goal swe --run r1 --at {_at(5)}",
    f"inspect --goal swe --at {_at(6)}",
    "inspect --goal swe --seq 3",
    "inspect --goal swe --seq 99999",
    "inspect --goal swf",
    "inspect",
    "# operators",
    f"goals --at {_at(6)}",
    "audit --goal swe --run r2",
    "audit --goal swe --seq 5",
    "audit --goal swe --run nobody",
    "whatif --goal swe --quota-tpm 200000",
    "whatif --goal swe --max-active-cases 4 --forecast-tpm 10",
    "log --goal swe --kind capacity.admitted",
    "log --goal swe --kind nonsense",
    f"metrics --goal swe --at {_at(6)} --out metrics.prom",
    "report --goal swe --out report.html",
    "# host",
    f"host phase --goal hosts --lane l1 --deadline +2h --session s1 --profile p --at {_at(10)}",
    f"host phase --goal hosts --lane l1 --deadline +2h --session s1 --profile p --at {_at(10)}",
    f"host start --goal hosts --lane l1 --attempt a1 --session s1 --profile p --pid 42 --at {_at(11)}",
    f"host start --goal hosts --lane l1 --attempt a1b --session s2 --profile p --at {_at(11)}",
    f"host exit --goal hosts --attempt a1 --exit-code 1 --at {_at(12)}",
    f"host return --goal hosts --attempt a1 --outcome failed --failure quota_exhausted --cursor t7 --at {_at(13)}",
    f"host start --goal hosts --lane l1 --attempt a2 --session s1 --profile p --at {_at(14)}",
    f"host status --goal hosts --at {_at(14)}",
    f"host continue --goal hosts --lane l1 --bind {{bind}} --deadline +1h --session s1 --profile p --cursor t7 --at {_at(15)}",
    f"host continue --goal hosts --lane l1 --bind {{bind}} --deadline +1h --session s1 --profile p --cursor t7 --at {_at(15)}",
    f"host continue --goal hosts --lane l1 --bind {'0' * 64} --deadline +1h --session s1 --profile p --cursor t7 --at {_at(15)}",
    f"host heartbeat --goal hosts --lane l1 --session s1 --at {_at(15)}",
    f"host heartbeat --goal hosts --lane l1 --session wrong --at {_at(15)}",
    f"host replan --goal hosts --lane l1 --replan rp1 --open --at {_at(16)}",
    f"host replan --goal hosts --lane l1 --replan rp1 --settle --at {_at(17)}",
    f"host stop --goal hosts --at {_at(18)}",
    f"host stop --goal hosts --clear --at {_at(19)}",
    f"host phase --goal hosts --lane l2 --deadline +0s --session s1 --profile p --at {_at(19)}",
    "# settlement",
    f"budget configure --goal settle --allowed-units 1000 --window-hours 24 --at {_at(20)}",
    f"turn open --goal settle --agent a1 --turn t1 --task k1 --at {_at(21)}",
    f"turn open --goal settle --agent a1 --turn t1 --task k1 --at {_at(21)}",
    f"turn resume --goal settle --agent a1 --at {_at(21)}",
    f"turn writeback --goal settle --agent a1 --turn t1 --amount 250 --at {_at(22)}",
    f"turn writeback --goal settle --agent a1 --turn t9 --amount 250 --at {_at(22)}",
    f"turn open --goal settle --agent a1 --turn t2 --task k1 --at {_at(23)}",
    f"turn resume --goal settle --agent a1 --at {_at(23)}",
    f"turn spend --goal settle --agent a1 --turn t1 --effect {{effect}} --amount 250 --at {_at(24)}",
    f"turn spend --goal settle --agent a1 --turn t1 --effect {{effect}} --amount 250 --at {_at(24)}",
    f"turn spend --goal settle --agent a1 --turn t1 --effect {{effect}} --amount 251 --at {_at(24)}",
    f"turn resume --goal settle --agent a1 --at {_at(25)}",
    f"turn status --goal settle --at {_at(25)}",
    "# the journal",
    "verify",
    "digest",
    "verify --digest {digest}",
    "verify --digest 1:" + "0" * 64,
    "checkpoint",
    "export --to copy.jsonl",
    "export --to copy.jsonl",
    "import copy.jsonl --journal imported.jsonl",
    "repair --truncate-after 3 --yes --journal cut.jsonl",
    "log --journal cut.jsonl --kind journal",
    "verify --journal missing.jsonl",
    "inspect --journal notes.txt",
    "verify --journal cut2.jsonl",
]


def _transcript() -> str:
    Path("body.json").write_text(
        '{"usage": {"prompt_tokens": 1200, "completion_tokens": 300, '
        '"prompt_tokens_details": {"cached_tokens": 200}}}\n'
    )
    Path("headers.txt").write_text(
        "x-ratelimit-limit-tokens: 120000\nx-ratelimit-remaining-tokens: 76000\n"
        "x-ratelimit-reset-tokens: 6m0s\nretry-after: 12\n"
    )
    Path("notes.txt").write_text("not a journal\n")
    out: list[str] = []
    values: dict[str, str] = {}
    for line in SESSION:
        if line.startswith("#"):
            out += ["", line]
            continue
        args = shlex.split(line.format(**values))
        if "--journal" not in args:
            args = [*args, "--journal", J]
        args.append("--json")
        if args[0] == "repair":
            # A journal corrupt after seq 3: a byte of record 4 flipped.
            lines = Path(J).read_bytes().splitlines(keepends=True)
            lines[4] = lines[4].replace(b'"goal":"swe"', b'"goal":"swf"', 1)
            Path("cut.jsonl").write_bytes(b"".join(lines))
            Path("cut2.jsonl").write_bytes(b"".join(lines))
        result = run_cli(*args)
        out.append(f"$ quotaledger {line.format(**values)}  [exit {result.code}]")
        out += result.stdout.rstrip("\n").splitlines()
        out += [f"! {err}" for err in result.stderr.rstrip("\n").splitlines()]
        if args[:2] == ["host", "return"]:
            values["bind"] = re.search(r'"hash":"([0-9a-f]{64})"', result.stdout).group(1)  # type: ignore[union-attr]
        if args[:2] == ["turn", "writeback"] and "effect" not in values:
            values["effect"] = re.search(r'"effect":"([0-9a-f]{32})"', result.stdout).group(1)  # type: ignore[union-attr]
        if args[0] == "digest":
            values["digest"] = re.search(r'"digest":"([^"]+)"', result.stdout).group(1)  # type: ignore[union-attr]
    return placeholders("\n".join(out).lstrip("\n") + "\n")


def test_every_answer_is_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("QUOTALEDGER_JOURNAL", raising=False)
    monkeypatch.delenv("QUOTALEDGER_JSON", raising=False)
    transcript = _transcript()
    if os.environ.get("QUOTALEDGER_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(transcript)
    assert transcript == GOLDEN.read_text()
