# ruff: noqa: E501  (the session's command lines read best unbroken)
"""The text people read (SPEC §8): one summary line, then a table where there is a
list, for every command family; never a key/value dump of the JSON.

A scripted session with explicit times runs every family's commands and its
transcript is compared with tests/cli/golden/text_output.txt. The values that differ
from run to run (journal id and the hashes it seeds, file-name stamps, a probe's
timings, sizes) are replaced by stable placeholders first. After an intended change of
wording: QUOTALEDGER_UPDATE_GOLDEN=1 pytest tests/cli/test_text_output.py, then read
the diff.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from tests.cli.transcript import placeholders
from tests.support import run_cli

GOLDEN = Path(__file__).parent / "golden" / "text_output.txt"
J = "j.jsonl"


def _at(second: int) -> str:
    return f"2026-11-29T14:{second // 60:02d}:{second % 60:02d}Z"


SESSION: list[str] = [
    "# capacity",
    f"configure --goal swe --max-active-cases 2 --quota-tpm 100000 --at {_at(0)}",
    f"observe --goal swe --run r1 --uncached-input 20000 --cached-input 0 --output 5000 --at {_at(1)}",
    f"admit --goal swe --run r1 --arm baseline --forecast-tpm 30000 --lease-s 10m --at {_at(2)}",
    f"admit --goal swe --run r2 --arm treatment --forecast-tpm 70000 --at {_at(3)}",
    f"admit --goal swe --run r3 --arm control --forecast-tpm 1000 --dry-run --at {_at(3)}",
    f"reject --goal swe --run r1 --retry-after-s 30 --at {_at(4)}",
    f"release --goal swe --run r1 --at {_at(5)}",
    f"release --goal swe --run r1 --at {_at(5)}",
    f"inspect --goal swe --at {_at(6)}",
    "# operators",
    f"goals --at {_at(6)}",
    "audit --goal swe --run r2",
    "whatif --goal swe --quota-tpm 200000",
    "log --goal swe --kind capacity.admitted",
    "inspect --goal swf",
    "# host",
    f"host phase --goal hosts --lane l1 --deadline +2h --session s1 --profile p --at {_at(10)}",
    f"host phase --goal hosts --lane l1 --deadline +2h --session s1 --profile p --at {_at(10)}",
    f"host start --goal hosts --lane l1 --attempt a1 --session s1 --profile p --pid 42 --at {_at(11)}",
    f"host exit --goal hosts --attempt a1 --exit-code 1 --at {_at(12)}",
    f"host return --goal hosts --attempt a1 --outcome failed --failure quota_exhausted --cursor t7 --at {_at(13)}",
    f"host start --goal hosts --lane l1 --attempt a2 --session s1 --profile p --at {_at(14)}",
    f"host status --goal hosts --at {_at(14)}",
    f"host continue --goal hosts --lane l1 --bind {{bind}} --deadline +1h --session s1 --profile p --cursor t7 --at {_at(15)}",
    f"host heartbeat --goal hosts --lane l1 --session s1 --at {_at(15)}",
    f"host replan --goal hosts --lane l1 --replan rp1 --open --at {_at(16)}",
    f"host replan --goal hosts --lane l1 --replan rp1 --settle --at {_at(17)}",
    f"host stop --goal hosts --at {_at(18)}",
    f"host stop --goal hosts --clear --at {_at(19)}",
    "# settlement",
    f"budget configure --goal settle --allowed-units 1000 --window-hours 24 --at {_at(20)}",
    f"turn open --goal settle --agent a1 --turn t1 --task k1 --at {_at(21)}",
    f"turn resume --goal settle --agent a1 --at {_at(21)}",
    f"turn writeback --goal settle --agent a1 --turn t1 --amount 250 --at {_at(22)}",
    f"turn open --goal settle --agent a1 --turn t2 --task k1 --at {_at(23)}",
    f"turn resume --goal settle --agent a1 --at {_at(23)}",
    f"turn spend --goal settle --agent a1 --turn t1 --effect {{effect}} --amount 250 --at {_at(24)}",
    f"turn spend --goal settle --agent a1 --turn t1 --effect {{effect}} --amount 250 --at {_at(24)}",
    f"turn resume --goal settle --agent a1 --at {_at(25)}",
    f"turn status --goal settle --at {_at(25)}",
    "# probe",
    # Its own journal: the probe's timings would change the main journal's size.
    f"probe run --journal probe.jsonl --goal probes --at {_at(26)} -- true",
    "# the journal",
    "verify",
    "digest",
    "verify --digest {digest}",
    "checkpoint",
    "export --to copy.jsonl",
    "import copy.jsonl --journal imported.jsonl",
    "repair --truncate-after 3 --yes --journal cut.jsonl",
    "log --journal cut.jsonl --kind journal",
]


def _transcript(tmp_path: Path) -> str:
    out: list[str] = []
    values: dict[str, str] = {}
    for line in SESSION:
        if line.startswith("#"):
            out += ["", line]
            continue
        args = shlex.split(line.format(**values))
        if "--journal" not in args:
            args = (
                [*args[:2], "--journal", J, *args[2:]] if "--" in args else [*args, "--journal", J]
            )
        if args[0] == "repair":
            # A journal corrupt after seq 3: a byte of record 4 flipped.
            lines = Path(J).read_bytes().splitlines(keepends=True)
            lines[4] = lines[4].replace(b'"goal":"swe"', b'"goal":"swf"', 1)
            Path("cut.jsonl").write_bytes(b"".join(lines))
        result = run_cli(*args)
        out.append(f"$ quotaledger {line.format(**values)}  [exit {result.code}]")
        out += result.stdout.rstrip("\n").splitlines()
        out += [f"! {err}" for err in result.stderr.rstrip("\n").splitlines()]
        if args[:2] == ["host", "return"]:
            values["bind"] = re.search(r"--bind ([0-9a-f]{64})", result.stdout).group(1)  # type: ignore[union-attr]
        if args[:2] == ["turn", "writeback"]:
            values["effect"] = re.search(r"--effect ([0-9a-f]{32})", result.stdout).group(1)  # type: ignore[union-attr]
        if args[0] == "digest":
            values["digest"] = result.stdout.strip()
    return placeholders("\n".join(out).lstrip("\n") + "\n")


def test_every_family_prints_a_summary_and_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("QUOTALEDGER_JOURNAL", raising=False)
    monkeypatch.delenv("QUOTALEDGER_JSON", raising=False)
    transcript = _transcript(tmp_path)
    if os.environ.get("QUOTALEDGER_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(transcript)
    assert transcript == GOLDEN.read_text()
    # Whatever the wording, no answer is the JSON spelled out key by key.
    dump = re.compile(r"^\s*(appended|idempotent|event|phase|head|seq|hash): ")
    assert not [line for line in transcript.splitlines() if dump.match(line)]
