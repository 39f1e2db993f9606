"""`quotaledger validity` (SPEC §13.2): one row per run of a goal, and which results
quota touched. Every verdict as an exact example, on a journal built with explicit
times: the verdicts' precedence, a 429 counting only while its run is active, a
lease's end (renewed by observations) ending an admission, the range, every face."""

from __future__ import annotations

import json
from typing import Any

import pytest

from quotaledger import InvalidInput, Ledger
from quotaledger.journal.clock import format_us, parse_at
from tests.server.serving import serving
from tests.support import run_cli

T0 = "2026-11-29T14:00:00Z"


def at(seconds: float) -> str:
    """T0 plus `seconds` (explicit times keep the rows exact)."""
    return format_us(parse_at(T0) + int(seconds * 1_000_000))


def failed_on_quota(ledger: Any, lane: str, attempt: str, t: float) -> str:
    """A lane's attempt that failed `quota_exhausted`: the hash of its return."""
    ledger.host_start(
        goal="g", lane=lane, attempt=attempt, session="s", profile="p", pid=1, at=at(t)
    )
    ledger.host_exit(goal="g", attempt=attempt, exit_code=1, at=at(t))
    returned = ledger.host_return(
        goal="g", attempt=attempt, outcome="failed", failure="quota_exhausted", cursor="c",
        at=at(t),
    )  # fmt: skip
    return str(returned["hash"])


def history(journal: str) -> None:
    """Seven runs, one of each verdict and the edges between them."""
    with Ledger.open(journal) as ledger:
        ledger.configure(goal="g", max_active_cases=5, at=at(0))
        # The lanes first: `host start` waits for a free case slot (capacity_ready).
        # r-quota's lane: its last attempt failed on quota.
        ledger.host_phase(goal="g", lane="r-quota", deadline="+1h", at=at(0.5))
        failed_on_quota(ledger, "r-quota", "q1", 0.5)
        # r-cont's lane: a quota failure continued on its session, then completed.
        ledger.host_phase(goal="g", lane="r-cont", deadline="+1h", at=at(0.5))
        bound = failed_on_quota(ledger, "r-cont", "c1", 0.5)
        ledger.host_continue(
            goal="g", lane="r-cont", bind=bound, deadline="+1h", session="s", profile="p",
            cursor="c", at=at(0.6),
        )  # fmt: skip
        ledger.host_start(
            goal="g", lane="r-cont", attempt="c2", session="s", profile="p", pid=2, at=at(0.6)
        )
        ledger.host_exit(goal="g", attempt="c2", exit_code=0, at=at(0.6))
        ledger.host_return(goal="g", attempt="c2", outcome="completed", cursor="d", at=at(0.6))
        for run in ("r-clean", "r-throttled", "r-quota", "r-cont"):
            ledger.admit(goal="g", run=run, arm="baseline", case=f"{run}@1", at=at(1))
        ledger.admit(goal="g", run="r-lease", arm="treatment", lease_s=5, at=at(1))
        refused = ledger.admit(goal="g", run="r-never", arm="baseline", at=at(1.5))
        assert refused["admitted"] is False  # every slot is taken
        ledger.observe(
            goal="g", run="r-clean", uncached_input=100, cached_input=20, cache_write_input=3,
            output=10, at=at(2),
        )  # fmt: skip
        ledger.observe(
            goal="g", run="r-clean", uncached_input=1, cached_input=0, output=1, at=at(2)
        )
        # An observation renews r-lease's lease: it ends at 2 + 5 = 7 s, not at 6 s.
        ledger.observe(
            goal="g", run="r-lease", uncached_input=5, cached_input=0, output=0, at=at(2)
        )
        # 429s at 10 s: r-throttled's makes it throttled; r-cont's and r-quota's do not
        # change their verdicts (quota_failed and continued come first); r-lease's lease
        # ended at 7 s, so its 429 names a run no longer active and counts for none.
        for run in ("r-throttled", "r-cont", "r-quota", "r-lease"):
            ledger.reject(goal="g", run=run, retry_after_s=1, at=at(10))
        ledger.reject(goal="g", retry_after_s=1, at=at(10))  # names no run: counts for none
        ledger.observe(goal="g", run="r-obs", uncached_input=7, cached_input=0, output=0, at=at(12))
        ledger.release(goal="g", run="r-clean", at=at(13))
        ledger.release(goal="g", run="r-throttled", at=at(13))
        # A 429 after its release does not touch r-clean's result.
        ledger.reject(goal="g", run="r-clean", retry_after_s=1, at=at(14))


NO_TOKENS = {"uncached_input": 0, "cached_input": 0, "cache_write_input": 0, "output": 0}


def row(run: str, verdict: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "run": run,
        "case": None,
        "arm": "baseline",
        "queued_at": None,
        "admitted_at": at(1),
        "released_at": None,
        "waited_s": 0,
        "tokens": NO_TOKENS,
        "rejections": 0,
        "host": None,
        "verdict": verdict,
    }
    return {**base, **fields}


EXPECTED_RUNS = [
    row(
        "r-clean",
        "clean",
        case="r-clean@1",
        released_at=at(13),
        tokens={"uncached_input": 101, "cached_input": 20, "cache_write_input": 3, "output": 11},
    ),
    row("r-throttled", "throttled", case="r-throttled@1", released_at=at(13), rejections=1),
    row(
        "r-quota",
        "quota_failed",
        case="r-quota@1",
        rejections=1,
        host={
            "lane": "r-quota",
            "attempts": 1,
            "last_outcome": "failed",
            "last_failure": "quota_exhausted",
            "quota_failures": 1,
            "continued": 0,
        },
    ),
    row(
        "r-cont",
        "continued",
        case="r-cont@1",
        rejections=1,
        host={
            "lane": "r-cont",
            "attempts": 2,
            "last_outcome": "completed",
            "last_failure": None,
            "quota_failures": 1,
            "continued": 1,
        },
    ),
    row(
        "r-lease",
        "clean",
        arm="treatment",
        released_at=at(7),
        tokens={**NO_TOKENS, "uncached_input": 5},
    ),
    row("r-never", "never_admitted", admitted_at=None, waited_s=None),
    row(
        "r-obs",
        "never_admitted",
        arm=None,
        admitted_at=None,
        waited_s=None,
        tokens={**NO_TOKENS, "uncached_input": 7},
    ),
]
EXPECTED_COUNTS = {
    "never_admitted": 2,
    "quota_failed": 1,
    "continued": 1,
    "throttled": 1,
    "clean": 2,
}


@pytest.fixture
def journal(journal_path: str) -> str:
    history(journal_path)
    return journal_path


def test_every_verdict_by_its_precedence(journal: str) -> None:
    with Ledger.open(journal, write=False) as ledger:
        answer = ledger.validity(goal="g")
    assert answer == {"ok": True, "goal": "g", "counts": EXPECTED_COUNTS, "runs": EXPECTED_RUNS}


def test_the_range_keeps_runs_by_their_first_event(journal: str) -> None:
    with Ledger.open(journal, write=False) as ledger:
        late = ledger.validity(goal="g", since=at(11))
        early = ledger.validity(goal="g", until=at(1))
        between = ledger.validity(goal="g", since=at(1.5), until=at(11))
    assert late["runs"] == EXPECTED_RUNS[-1:]
    assert late["counts"] == {**dict.fromkeys(EXPECTED_COUNTS, 0), "never_admitted": 1}
    assert early["runs"] == EXPECTED_RUNS[:5]
    assert [r["run"] for r in between["runs"]] == ["r-never"]


def test_the_cli_prints_the_json_object_and_a_table(journal: str) -> None:
    as_json = run_cli("validity", "--goal", "g", "--journal", journal, "--json")
    assert as_json.code == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {
        "ok": True,
        "goal": "g",
        "counts": EXPECTED_COUNTS,
        "runs": EXPECTED_RUNS,
    }
    text = run_cli("validity", "--goal", "g", "--journal", journal)
    assert text.code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == (
        "goal g: 7 runs (never_admitted 2, quota_failed 1, continued 1, throttled 1, clean 2)"
    )
    assert lines[1].split() == [
        "RUN", "CASE", "ARM", "QUEUED", "ADMITTED", "RELEASED", "WAITED_S", "INPUT", "OUTPUT",
        "429S", "HOST", "VERDICT",
    ]  # fmt: skip
    by_run = {line.split()[0]: line for line in lines[2:]}
    assert list(by_run) == [r["run"] for r in EXPECTED_RUNS]
    assert by_run["r-clean"].split()[-5:] == ["124", "11", "0", "-", "clean"]
    assert "2 att, completed, 1 cont" in by_run["r-cont"]
    assert "1 att, failed:quota_exhausted, 0 cont" in by_run["r-quota"]
    assert by_run["r-quota"].split()[5] == "active"


def test_a_goal_with_no_runs_has_every_count_zero(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", max_active_cases=1, at=at(0))
        answer = ledger.validity(goal="g")
    assert answer == {
        "ok": True,
        "goal": "g",
        "counts": dict.fromkeys(EXPECTED_COUNTS, 0),
        "runs": [],
    }
    text = run_cli("validity", "--goal", "g", "--journal", journal_path)
    assert text.stdout.strip() == (
        "goal g: 0 runs (never_admitted 0, quota_failed 0, continued 0, throttled 0, clean 0)"
    )


def test_bad_input_is_one_coded_error(journal: str) -> None:
    unknown = run_cli("validity", "--goal", "gg", "--journal", journal, "--json")
    assert unknown.code == 2 and unknown.json["error"]["code"] == "unknown_goal"
    backwards = run_cli(
        "validity", "--goal", "g", "--since", at(5), "--until", at(1), "--journal", journal,
        "--json",
    )  # fmt: skip
    assert backwards.code == 2 and backwards.json["error"]["code"] == "invalid_option"
    with Ledger.open(journal, write=False) as ledger, pytest.raises(InvalidInput) as raised:
        ledger.validity(goal="g", since="yesterday")
    assert raised.value.code == "invalid_time"


@pytest.mark.slow
def test_the_server_answers_the_same_body(journal: str) -> None:
    with serving(journal) as server:
        answer = server.get("validity", "goal=g")
        assert answer.status == 200, answer.body
        assert json.loads(answer.body) == {
            "ok": True,
            "goal": "g",
            "counts": EXPECTED_COUNTS,
            "runs": EXPECTED_RUNS,
        }
        with Ledger.open(server.url) as remote:
            assert remote.validity(goal="g", since=at(1.5))["counts"]["never_admitted"] == 2
        printed = run_cli("validity", "--goal", "g", "--journal", server.url)
        assert printed.code == 0, printed.stderr
        assert printed.stdout.splitlines()[0].startswith("goal g: 7 runs")


def test_the_report_shows_the_counts_and_the_table(journal: str, tmp_path: Any) -> None:
    out = tmp_path / "report.html"
    written = run_cli("report", "--goal", "g", "--out", str(out), "--journal", journal)
    assert written.code == 0, written.stderr
    page = out.read_text()
    assert "<h2>Validity of results (7 runs)</h2>" in page
    for verdict, n in EXPECTED_COUNTS.items():
        assert f"<div><b>{n}</b><span>{verdict}</span></div>" in page
    table = page.split('<table class="validity">', 1)[1].split("</table>", 1)[0]
    rows = table.split("<tr>")[2:]
    assert [r.split("<td>", 2)[1].split("</td>")[0] for r in rows] == [
        r["run"] for r in EXPECTED_RUNS
    ]
    assert "lane r-cont: 2 attempts, last completed, 1 quota failures, 1 continued" in table


def test_a_report_from_a_checkpoint_reads_each_run_whole(journal: str, tmp_path: Any) -> None:
    """A report whose pass starts at a checkpoint still sees each run's first event."""
    assert run_cli("checkpoint", "--journal", journal).code == 0
    with Ledger.open(journal) as ledger:
        ledger.observe(
            goal="g", run="r-clean", uncached_input=1, cached_input=0, output=0, at=at(30)
        )
        ledger.admit(goal="g", run="r-late", arm="baseline", at=at(31))
    out = tmp_path / "report.html"
    since = ["--since", at(20)]
    assert (
        run_cli("report", "--goal", "g", "--out", str(out), *since, "--journal", journal).code == 0
    )
    table = out.read_text().split('<table class="validity">', 1)[1]
    assert "r-late" in table and "r-clean" not in table  # r-clean began before the range
