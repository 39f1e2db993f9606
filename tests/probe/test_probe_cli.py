"""`quotaledger probe run` end to end, as real processes (SPEC §6, seed 003).

Every test here runs real commands in real process groups; the common options go
before `--`, everything after it is CMD's.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import pytest

from tests.probe.probe_spec import OBSERVATION_KEYS
from tests.support import run_cli, run_process

PY = sys.executable

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups + /proc")


def probe(journal: str, *options: str, cmd: list[str], as_json: bool = True):
    common = ["--journal", journal, *(["--json"] if as_json else [])]
    return run_process("probe", "run", *common, *options, "--", *cmd)


def probe_events(journal: str) -> list[dict]:
    if not Path(journal).exists():
        return []
    result = run_cli("log", "--journal", journal, "--kind", "probe", "--json")
    assert result.code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_exit_codes_0_7_and_timeout_are_the_commands_and_each_is_journaled(journal_path):
    """0 -> 0, 7 -> 7, a timeout -> 124; one probe.observed per run, timeout included."""
    ok = probe(journal_path, "--goal", "g", "--interval-ms", "10", cmd=["true"])
    seven = probe(journal_path, "--goal", "g", cmd=[PY, "-c", "import sys; sys.exit(7)"])
    started = time.monotonic()
    late = probe(
        journal_path, "--goal", "g", "--interval-ms", "10", "--timeout-s", "0.3",
        cmd=["sleep", "30"],
    )  # fmt: skip
    assert time.monotonic() - started < 10
    assert [ok.code, seven.code, late.code] == [0, 7, 124]
    for result, code in ((ok, 0), (seven, 7), (late, 124)):
        body = result.json  # exactly one JSON object on stdout, whatever the exit code
        assert body["ok"] is True and body["appended"] is True
        assert body["event"]["kind"] == "probe.observed"
        assert body["observation"]["exit_code"] == code
        assert set(body["observation"]) == OBSERVATION_KEYS
    events = probe_events(journal_path)
    assert [e["data"]["exit_code"] for e in events] == [0, 7, 124]
    assert [e["data"]["timed_out"] for e in events] == [False, False, True]
    assert [e["seq"] for e in events] == [r.json["event"]["seq"] for r in (ok, seven, late)]
    assert events[2]["data"]["duration_s"] >= 0.3


def test_timeout_terminates_the_whole_group(journal_path, tmp_path):
    """SIGTERM goes to the group, not just the leader: a background child dies too."""
    pidfile = tmp_path / "child.pid"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    result = probe(journal_path, "--goal", "g", "--timeout-s", "0.5", cmd=["sh", "-c", script])
    assert result.code == 124
    child = int(pidfile.read_text())
    assert not _alive(child)


def test_members_left_behind_by_the_leader_are_terminated(journal_path, tmp_path):
    """The leader exits 0 leaving a sleeper: it is terminated (and counted), exit stays 0."""
    pidfile = tmp_path / "child.pid"
    script = f"sleep 30 > /dev/null 2>&1 & echo $! > {pidfile}; exit 0"
    result = probe(journal_path, "--goal", "g", cmd=["sh", "-c", script])
    assert result.code == 0, result.stderr
    assert result.json["stragglers_terminated"] == 1
    assert not _alive(int(pidfile.read_text()))


def test_killed_by_a_signal_is_128_plus_the_signal(journal_path):
    result = probe(journal_path, "--goal", "g", cmd=["sh", "-c", "kill -9 $$"])
    assert result.code == 137
    assert result.json["signal"] == 9
    assert probe_events(journal_path)[-1]["data"]["exit_code"] == 137


def test_json_mode_sends_cmd_stdout_to_stderr(journal_path):
    result = probe(journal_path, "--goal", "g", cmd=["sh", "-c", "echo cmd-said-hello; exit 3"])
    assert result.code == 3
    assert "cmd-said-hello" in result.stderr
    assert result.json["exit_code"] == 3  # stdout is one JSON object and nothing else


def test_text_mode_passes_cmd_output_through(journal_path):
    result = probe(
        journal_path, "--goal", "g", cmd=["sh", "-c", "echo cmd-said-hello"], as_json=False
    )
    assert result.code == 0
    assert result.stdout == "cmd-said-hello\n"  # the probe's summary goes to stderr
    assert "sequential PSS sum" in result.stderr


def test_candidate_changed_by_the_command(journal_path, tmp_path):
    kept, edited = tmp_path / "kept.py", tmp_path / "edited.py"
    kept.write_text("a = 1\n")
    edited.write_text("b = 1\n")
    cands = ["--candidate", str(kept), "--candidate", str(edited)]
    result = probe(
        journal_path, "--goal", "g", *cands, "--input-revision", "r42",
        cmd=["sh", "-c", f"echo 'b = 2' > {edited}"],
    )  # fmt: skip
    assert result.code == 0, result.stderr
    obs = result.json["observation"]
    assert obs["attribution"] == "candidate_changed"
    assert obs["input_revision"] == "r42"
    # The recorded hashes are what the run started from.
    assert obs["candidates"] == {
        str(kept): hashlib.sha256(b"a = 1\n").hexdigest(),
        str(edited): hashlib.sha256(b"b = 1\n").hexdigest(),
    }
    assert result.json["candidates_changed"] == [str(edited)]
    same = probe(journal_path, "--goal", "g", *cands, cmd=["true"])
    assert same.json["observation"]["attribution"] == "bound"


def test_refusals_before_the_command_runs(journal_path, tmp_path):
    """Bad input is exit 2, nothing journaled, and CMD's side effect never happens."""
    marker = tmp_path / "marker"
    touch = ["touch", str(marker)]
    cases = [
        ["--goal", "g", "--candidate", str(tmp_path / "missing.py")],
        ["--goal", "bad goal"],
        ["--goal", "g", "--interval-ms", "1"],
        ["--goal", "g", "--timeout-s", "0"],
        ["--goal", "g", "--reference-bytes", "-1"],
    ]
    for options in cases:
        result = run_cli(
            "probe", "run", "--journal", journal_path, "--json", *options, "--", *touch
        )
        assert result.code == 2, (options, result.stdout)
        assert result.json["ok"] is False and "error" in result.json
    missing = run_cli("probe", "run", "--journal", journal_path, "--json", "--goal", "g", "--")
    assert missing.code == 2
    absent = run_cli(
        "probe", "run", "--journal", journal_path, "--json", "--goal", "g", "--", "no-such-cmd-x"
    )
    assert absent.code == 2 and absent.json["error"]["code"] == "command_not_found"
    assert not marker.exists()
    assert probe_events(journal_path) == []


def test_journal_lock_is_not_held_while_the_command_runs(journal_path):
    """CMD appends to the same journal with a 1 s lock timeout; the outer event is later."""
    inner = [
        PY, "-m", "quotaledger", "probe", "run", "--journal", journal_path, "--json",
        "--lock-timeout-s", "1", "--goal", "inner", "--", "true",
    ]  # fmt: skip
    result = probe(journal_path, "--goal", "outer", "--lock-timeout-s", "1", cmd=inner)
    assert result.code == 0, result.stderr
    events = probe_events(journal_path)
    assert [e["goal"] for e in events] == ["inner", "outer"]
    assert events[0]["at"] <= events[1]["at"]  # outer time sampled at append, after CMD


def test_latest_probe_per_goal_via_the_api(journal_path):
    from quotaledger.api import Ledger

    for goal, code in (("a", 0), ("b", 1), ("a", 5)):
        cmd = ["sh", "-c", f"exit {code}"]
        assert probe(journal_path, "--goal", goal, cmd=cmd).code == code
    with Ledger.open(journal_path, write=False) as ledger:
        a, b, none = (
            ledger.latest_probe(goal="a"),
            ledger.latest_probe(goal="b"),
            ledger.latest_probe(goal="c"),
        )
        state = ledger.journal.state.probes
    assert a["count"] == 2 and a["latest"]["observation"]["exit_code"] == 5
    assert b["count"] == 1 and b["latest"]["observation"]["exit_code"] == 1
    assert none == {"ok": True, "goal": "c", "count": 0, "latest": None}
    assert state.latest["a"].seq == a["latest"]["seq"]


def test_observation_survives_a_checkpoint_round_trip(journal_path):
    from quotaledger.api import Ledger
    from quotaledger.projections.ledger import PROJECTOR

    assert probe(journal_path, "--goal", "g", "--reference-bytes", "5", cmd=["true"]).code == 0
    with Ledger.open(journal_path, write=False) as ledger:
        state = ledger.journal.state
    assert PROJECTOR.load(PROJECTOR.dump(state)) == state


def _alive(pid: int) -> bool:
    """True while pid names a running (non-zombie) process."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "Z":
            return False
        time.sleep(0.05)  # reparenting and reaping take a moment
    return True


def test_help_has_an_example():
    result = run_cli("probe", "run", "--help")
    assert result.code == 0 and "Example:" in result.stdout


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    monkeypatch.delenv("QUOTALEDGER_JSON", raising=False)


def test_a_pools_name_is_no_goal_to_probe(journal_path, tmp_path):
    """Pools and goals share one space of names (SPEC §12.1): `probe run --goal P` of a
    pool is `name_taken` (exit 2), before the command runs, nothing journaled."""
    made = run_cli("pool", "configure", "--journal", journal_path, "--pool", "org",
                   "--quota-tpm", "1000", "--json")  # fmt: skip
    assert made.code == 0, made.stderr
    marker = tmp_path / "marker"
    before = Path(journal_path).read_bytes()
    result = run_cli(
        "probe", "run", "--journal", journal_path, "--json", "--goal", "org",
        "--", "touch", str(marker),
    )  # fmt: skip
    assert result.code == 2, result.stdout
    assert result.json["error"]["code"] == "name_taken"
    assert "pool" in result.json["error"]["message"]
    assert not marker.exists()
    assert Path(journal_path).read_bytes() == before
