"""One duration grammar wherever a duration is taken (SPEC §2.2 as revised; issue 29,
item 5): seconds, or units `ms`, `s`, `m`, `h`, `d`, fractional and compound (`90s`,
`1.5h`, `1h30m`, `6m0s`, `2d`), relative deadlines `+1h30m`; every bad one gets the
same error. `--deadline +1.5h` was accepted while compound `1h30m` was refused
everywhere, though the provider-header parser read `6m0s`."""

from __future__ import annotations

import pytest

from quotaledger import Ledger
from quotaledger.journal.clock import US_PER_S, parse_at, parse_duration_s, parse_duration_us
from quotaledger.journal.errors import InvalidInput
from quotaledger.usecases.decode import CLI
from tests.support import run_cli

AT = "2026-11-29T14:00:00Z"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1h30m", 5400),
        ("6m0s", 360),
        ("1d12h", 129600),
        ("1m30.5s", 90.5),
        ("2h0m0s", 7200),
        ("1.5h", 5400),
        ("90", 90),
        ("2d", 172800),
        ("1s500ms", 1.5),
    ],
)
def test_compound_durations(text: str, seconds: float) -> None:
    assert parse_duration_s(text, "lease_s") == seconds
    assert parse_duration_us(text, "lease_s") == round(seconds * US_PER_S)


BAD = ["", "1h30", "h", "1.h", ".5h", "1hh", "-1h", "+1h", "1h 30m", "1e3s", "nan", "1x"]


@pytest.mark.parametrize("text", BAD)
def test_every_bad_duration_gets_the_same_error(text: str) -> None:
    messages = set()
    for parse in (parse_duration_s, parse_duration_us):
        with pytest.raises(InvalidInput) as caught:
            parse(text, "lease_s")
        assert caught.value.code == "invalid_duration"
        messages.add(caught.value.message)
        messages.add(caught.value.worded(CLI))
    assert messages == {
        f"{name} {text!r} is not a duration (seconds, or e.g. 90s, 1.5h, 1h30m, 2d)"
        for name in ("lease_s", "--lease-s")
    }


def test_the_cli_takes_compounds_in_every_duration_option(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, cooldown_max_s=7200, at=AT)
        ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=AT)
    common = ("--journal", journal_path, "--json", "--lock-timeout-s", "1m30s")
    admitted = run_cli("admit", *common, "--goal", "g", "--run", "r", "--forecast-tpm", "1",
                       "--lease-s", "1h30m", "--at", AT)  # fmt: skip
    assert admitted.code == 0, admitted.stdout + admitted.stderr
    lease = parse_at(admitted.json["receipt"]["lease_until"]) - parse_at(AT)
    assert lease == 5400 * US_PER_S
    rejected = run_cli("reject", *common, "--goal", "g", "--retry-after-s", "1m0.5s", "--at", AT)
    assert rejected.code == 0 and rejected.json["cooldown_s"] == 60.5
    phase = run_cli("host", "phase", *common, "--goal", "g", "--lane", "l1",
                    "--deadline", "+1h30m", "--at", AT)  # fmt: skip
    assert phase.code == 0, phase.stdout + phase.stderr
    assert parse_at(phase.json["phase"]["deadline"]) - parse_at(AT) == 5400 * US_PER_S
    bad = run_cli("host", "phase", *common, "--goal", "g", "--lane", "l2",
                  "--deadline", "+1h30", "--at", AT)  # fmt: skip
    assert bad.code == 2 and bad.json["error"]["code"] == "invalid_duration"
    assert bad.json["error"]["message"].startswith("--deadline '1h30' is not a duration")
