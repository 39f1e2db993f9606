"""SPEC §2.4: on mid-log corruption, readers report it and can still show the
verified prefix (`inspect --seq N` before the corrupt record)."""

from __future__ import annotations

from pathlib import Path

from tests.support import run_cli


def test_inspect_shows_the_verified_prefix_and_reports_the_rest(journal_path: str) -> None:
    def cli(*args: str):
        return run_cli(*args, "--journal", journal_path, "--json")

    assert cli("configure", "--goal", "g", "--max-active-cases", "2").code == 0  # seq 1
    assert cli("admit", "--goal", "g", "--run", "r1", "--arm", "control").code == 0  # seq 2
    assert cli("admit", "--goal", "g", "--run", "r2", "--arm", "control").code == 0  # seq 3
    assert cli("release", "--goal", "g", "--run", "r1").code == 0  # seq 4
    lines = Path(journal_path).read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b'"run":"r2"', b'"run":"r9"', 1)  # seq 3 no longer verifies
    Path(journal_path).write_bytes(b"\n".join(lines))
    before = Path(journal_path).read_bytes()

    prefix = cli("inspect", "--goal", "g", "--seq", "2")
    assert prefix.code == 0, prefix.stdout
    runs = prefix.json["goals"]["g"]["active_runs"]
    assert [r["run"] for r in runs] == ["r1"]
    for args in (["--seq", "3"], ["--seq", "4"], []):
        result = cli("inspect", "--goal", "g", *args)
        assert result.code == 3, (args, result.stdout)
        assert result.json["error"]["code"] == "journal_corrupt"
        assert result.json["error"]["seq"] == 3
    assert Path(journal_path).read_bytes() == before
