"""Files commands write besides the journal (SPEC §7, §8): `metrics --out FILE` is
atomic, `export --to -` writes to stdout, `report --out ""` and `import` of a missing
file are clear input errors (exit 2)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, run_cli, run_process

HEALTHY = REPO / "fixtures" / "healthy.jsonl"


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "j.jsonl"
    shutil.copyfile(HEALTHY, path)
    configure = ["configure", "--goal", "g", "--quota-tpm", "1000", "--at", "2026-11-29T10:00:00Z"]
    assert run_cli(*configure, "--journal", path).code == 0
    return path


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- metrics --out ---------------------------------------------------------------------


def test_metrics_out_writes_the_exposition_the_command_prints(journal: Path) -> None:
    out = journal.parent / "quotaledger.prom"
    printed = run_cli("metrics", "--journal", journal)
    assert printed.code == 0, printed.stderr
    written = run_cli("metrics", "--journal", journal, "--out", out, "--json")
    assert written.code == 0, written.stdout
    body = written.json
    assert body["out"] == str(out) and body["bytes"] == out.stat().st_size
    assert out.read_text() == printed.stdout
    assert stat.S_IMODE(out.stat().st_mode) == 0o644  # the collector runs as another user
    human = run_cli("metrics", "--journal", journal, "--out", out)
    assert human.code == 0 and human.stdout.startswith(f"wrote {out} (")


def test_metrics_out_replaces_the_file_never_rewrites_it(journal: Path) -> None:
    # A scrape that opened the file before the rewrite keeps reading the whole old
    # file; one that opens it after reads the whole new one. `> FILE` (the old help's
    # advice) truncates the very file the collector may be reading.
    out = journal.parent / "quotaledger.prom"
    out.write_text("# an earlier exposition\nquotaledger_journal_head_seq 1\n")
    old_inode = out.stat().st_ino
    with open(out, "rb") as scrape:
        assert run_cli("metrics", "--journal", journal, "--out", out).code == 0
        assert scrape.read() == b"# an earlier exposition\nquotaledger_journal_head_seq 1\n"
    assert out.stat().st_ino != old_inode
    assert "quotaledger_journal_head_seq" in out.read_text()
    assert _names(journal.parent) == ["j.jsonl", "quotaledger.prom"]  # no temp file left


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_metrics_out_writes_a_temp_file_beside_fsyncs_then_renames(
    journal: Path, tmp_path: Path
) -> None:
    out = tmp_path / "quotaledger.prom"
    out.write_text("old\n")
    log = tmp_path / "strace.log"
    traced = "trace=openat,fsync,rename,renameat,renameat2"
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-o", str(log), "-e", traced, sys.executable, "-m",
         "quotaledger", "metrics", "--journal", str(journal), "--out", str(out)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    calls = [
        line for line in log.read_text().splitlines() if str(tmp_path) in line or "fsync" in line
    ]
    # The target itself is never opened for writing: only renamed onto.
    assert not [c for c in calls if f'"{out}"' in c and "openat" in c and "O_WRONLY" in c], calls
    opened = next(i for i, c in enumerate(calls) if "openat" in c and ".quotaledger.prom.tmp." in c)
    renamed = next(i for i, c in enumerate(calls) if "rename" in c and f'"{out}"' in c)
    assert "O_CREAT" in calls[opened] and "O_EXCL" in calls[opened]
    assert any("fsync" in c for c in calls[opened:renamed]), calls
    assert any("fsync" in c for c in calls[renamed + 1 :]), "the directory is fsynced after"


@pytest.mark.parametrize(
    ("out", "words"),
    [("", "--out is empty"), ("{tmp}/missing/x.prom", "does not exist"), ("{tmp}", "directory")],
)
def test_metrics_out_that_names_no_file_is_exit_2(
    out: str, words: str, journal: Path, tmp_path: Path
) -> None:
    refused = run_cli("metrics", "--journal", journal, "--json", "--out", out.format(tmp=tmp_path))
    assert refused.code == 2, refused.stdout
    error = refused.json["error"]
    assert error["code"] == "invalid_option" and words in error["message"], error
    assert _names(tmp_path) == ["j.jsonl"]


# -- report --out ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("out", "words"),
    [("", "--out is empty"), ("{tmp}/missing/r.html", "does not exist"), ("{tmp}", "directory")],
)
def test_report_out_that_names_no_file_is_exit_2(
    out: str, words: str, journal: Path, tmp_path: Path
) -> None:
    args = ["report", "--goal", "g", "--out", out.format(tmp=tmp_path)]
    refused = run_cli(*args, "--journal", journal, "--json")
    assert refused.code == 2, refused.stdout
    error = refused.json["error"]
    assert error["code"] == "invalid_option" and words in error["message"], error
    assert ".report-" not in error["message"] and ".tmp." not in error["message"]
    assert _names(tmp_path) == ["j.jsonl"]
    human = run_cli(*args, "--journal", journal)
    assert human.code == 2 and "Traceback" not in human.stderr and words in human.stderr


# -- export --to - -----------------------------------------------------------------------


def test_export_to_dash_writes_the_journal_to_stdout(journal: Path, tmp_path: Path) -> None:
    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [sys.executable, "-m", "quotaledger", "export", "--to", "-", "--journal", str(journal),
             *extra],
            capture_output=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == journal.read_bytes()  # byte for byte, nothing else on stdout
        assert _names(tmp_path) == ["j.jsonl"], "no file named -"
        summary = proc.stderr.decode()
        assert ('"records":' in summary) if extra else ("to stdout" in summary), summary


def test_export_to_dash_in_process_and_to_an_empty_path(journal: Path, tmp_path: Path) -> None:
    result = run_cli("export", "--to", "-", "--journal", journal)
    assert result.code == 0 and result.stdout == journal.read_text()
    refused = run_cli("export", "--to", "", "--journal", journal, "--json")
    assert refused.code == 2 and refused.json["error"]["code"] == "invalid_option"
    missing = run_cli("export", "--to", tmp_path / "no" / "x.jsonl", "--journal", journal, "--json")
    assert missing.code == 2 and "does not exist" in missing.json["error"]["message"]
    assert _names(tmp_path) == ["j.jsonl"]


# -- import of a missing file -------------------------------------------------------------


@pytest.mark.parametrize("target", ["new.jsonl", "existing.jsonl"])
def test_import_of_a_missing_file_is_exit_2_without_the_writers_advice(
    target: str, tmp_path: Path
) -> None:
    journal = tmp_path / target
    if target == "existing.jsonl":
        shutil.copyfile(REPO / "fixtures" / "torn_garbage.jsonl", journal)  # recovery would cut
    before = _names(tmp_path), journal.read_bytes() if journal.exists() else None
    missing = str(tmp_path / "nonexistent.jsonl")
    refused = run_cli("import", missing, "--journal", journal, "--json")
    assert refused.code == 2, refused.stdout
    error = refused.json["error"]
    assert error["code"] == "import_source_not_found" and missing in error["message"]
    assert "creates it" not in error["message"]
    assert (_names(tmp_path), journal.read_bytes() if journal.exists() else None) == before
    human = run_process("import", missing, "--journal", journal)
    assert (
        human.code == 2
        and "creates it" not in human.stderr
        and os.path.basename(missing) in human.stderr
    )
