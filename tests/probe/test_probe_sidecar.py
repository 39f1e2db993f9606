"""The optional sidecar (seed 003's second counterexample).

A sidecar that cannot be written never changes the command's result: the exit code,
the JSON on stdout and the journaled observation stay intact, the sidecar is recorded
`unavailable`, and a digest exists only after a complete write, fsync and close. A
path that already exists (a dangling symlink too) is refused before CMD starts.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quotaledger.api import Ledger
from quotaledger.services import probe_io
from tests.probe.held_probe import ROUNDS_FORCED, needs_strace, run_held
from tests.support import run_cli

SHORT_CMD = ["sh", "-c", "echo cmd-out; sleep 0.4; exit 7"]

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process groups")


def run_shell(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=60, env=os.environ.copy()
    )


@needs_strace
def test_real_file_size_limit_keeps_exit_code_stdout_and_observation(journal_path, tmp_path):
    """Under `ulimit -f 1` (1 KiB) the sidecar write fails with EFBIG; nothing else does.

    The journal is subject to the same limit, so this one starts fresh and stays
    under 1 KiB (genesis + this event). The premise, a sidecar over the limit, is
    forced: CMD is held until the probe has sampled ROUNDS_FORCED rounds."""
    limited_path = tmp_path / "limited.json"
    args = ["--journal", journal_path, "--json", "--goal", "g", "--sidecar", str(limited_path)]
    limited = run_held([*args, "--interval-ms", "10"], tmp_path)
    assert limited.returncode == 7, (limited.stdout, limited.stderr)
    lines = [line for line in limited.stdout.splitlines() if line.strip()]
    assert len(lines) == 1
    body = json.loads(lines[0])
    assert body["ok"] is True and body["appended"] is True
    obs = body["observation"]
    assert obs["memory"]["samples"] >= ROUNDS_FORCED  # the premise held
    assert obs["exit_code"] == 7
    assert obs["sidecar"]["status"] == "unavailable"
    assert "EFBIG" in obs["sidecar"]["error"]
    assert set(obs["sidecar"]) == {"status", "error"}  # no path, no digest
    assert "cmd-out" in limited.stderr
    assert not limited_path.exists()  # the partial file we created is removed
    events = _probe_events(journal_path)
    assert events[-1]["data"] == obs
    assert events[-1]["seq"] == body["event"]["seq"]
    assert run_cli("verify", "--journal", journal_path, "--json").code == 0


def test_a_written_sidecar_carries_its_digest(journal_path, tmp_path):
    sidecar = tmp_path / "samples.json"
    with Ledger.open(journal_path) as ledger:
        result = ledger.probe_run(
            goal="g", command=["sleep", "0.2"], sidecar=str(sidecar), interval_ms=10
        )
    blob = sidecar.read_bytes()
    assert result["observation"]["sidecar"] == {
        "path": str(sidecar),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "bytes": len(blob),
    }
    document = json.loads(blob)
    memory = result["observation"]["memory"]
    assert document["samples_total"] == memory["samples"] == len(document["samples"])
    assert document["atomic"] is False and document["method"] == "sequential_pss_sum"
    assert max(row[1] for row in document["samples"]) == memory["peak_estimate_bytes"]


@pytest.mark.parametrize("kind", ["existing file", "dangling symlink", "symlink to a file"])
def test_an_existing_sidecar_path_is_refused_before_the_command_runs(journal_path, tmp_path, kind):
    sidecar, target, marker = tmp_path / "sidecar.json", tmp_path / "target", tmp_path / "marker"
    if kind == "existing file":
        sidecar.write_text("keep me")
    elif kind == "dangling symlink":
        sidecar.symlink_to(target)
    else:
        target.write_text("keep me")
        sidecar.symlink_to(target)
    result = run_cli(
        "probe", "run", "--journal", journal_path, "--json", "--goal", "g",
        "--sidecar", str(sidecar), "--", "touch", str(marker),
    )  # fmt: skip
    assert result.code == 2
    assert result.json["error"]["code"] == "sidecar_exists"
    assert not marker.exists()  # CMD never ran
    if kind == "dangling symlink":
        assert sidecar.is_symlink() and not target.exists()
    else:
        assert (target if kind != "existing file" else sidecar).read_text() == "keep me"
    assert _probe_events(journal_path) == []


def test_a_sidecar_that_cannot_be_created_is_unavailable_and_the_command_runs(
    journal_path, tmp_path
):
    marker = tmp_path / "marker"
    with Ledger.open(journal_path) as ledger:
        result = ledger.probe_run(
            goal="g",
            command=["sh", "-c", f"touch {marker}; exit 3"],
            sidecar=str(tmp_path / "no-such-dir" / "samples.json"),
        )
    assert marker.exists() and result["exit_code"] == 3
    assert result["observation"]["sidecar"]["status"] == "unavailable"
    assert result["observation"]["sidecar"]["error"].startswith("open: ENOENT")


def test_a_sidecar_path_replaced_during_the_run_gets_no_digest(journal_path, tmp_path):
    """The path no longer names the file the probe created: unavailable, theirs kept."""
    sidecar = tmp_path / "samples.json"
    replace = f"rm {sidecar}; echo theirs > {sidecar}; exit 4"
    with Ledger.open(journal_path) as ledger:
        result = ledger.probe_run(
            goal="g", command=["sh", "-c", replace], sidecar=str(sidecar), interval_ms=10
        )
    assert result["exit_code"] == 4
    assert result["observation"]["sidecar"]["status"] == "unavailable"
    assert sidecar.read_text() == "theirs\n"


@pytest.mark.parametrize("fault", ["short write then ENOSPC", "fsync EIO", "close EIO"])
def test_injected_sidecar_faults_leave_the_result_intact(
    journal_path, tmp_path, monkeypatch, fault
):
    """Fault injection on the sidecar's descriptor only (the journal writes normally)."""
    sidecar = tmp_path / "samples.json"
    opened: list[int] = []
    real_create, real_write = probe_io.SidecarFile.create, os.write
    real_fsync, real_close = os.fsync, os.close

    def create(path: str) -> probe_io.SidecarFile:
        made = real_create(path)
        assert made.fd is not None
        opened.append(made.fd)
        return made

    def write(fd: int, data: bytes) -> int:
        if fd in opened and fault.startswith("short"):
            if os.fstat(fd).st_size == 0:
                return real_write(fd, bytes(data[:10]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        if fd in opened and fault == "fsync EIO":
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    def close(fd: int) -> None:
        real_close(fd)
        if fd in opened:
            opened.remove(fd)  # the number may be reused by an unrelated descriptor
            if fault == "close EIO":
                raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(probe_io.SidecarFile, "create", staticmethod(create))
    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "close", close)
    with Ledger.open(journal_path) as ledger:
        result = ledger.probe_run(
            goal="g", command=["sh", "-c", "exit 7"], sidecar=str(sidecar), interval_ms=10
        )
    monkeypatch.undo()
    assert result["exit_code"] == 7 and result["appended"] is True
    recorded = result["observation"]["sidecar"]
    assert recorded["status"] == "unavailable"
    assert ("ENOSPC" if fault.startswith("short") else "EIO") in recorded["error"]
    assert "sha256" not in recorded
    assert not sidecar.exists()
    assert _probe_events(journal_path)[-1]["data"] == result["observation"]


def test_journal_failure_after_the_run_still_reports_what_ran(journal_path, monkeypatch):
    """If the append fails (exit 4), the error carries the command's exit code."""
    from quotaledger.journal import StorageFailure

    with Ledger.open(journal_path) as ledger:

        def broken() -> None:
            raise StorageFailure("disk gone")

        monkeypatch.setattr(ledger.journal, "transaction", broken)
        with pytest.raises(StorageFailure) as raised:
            ledger.probe_run(goal="g", command=["sh", "-c", "exit 5"])
    assert raised.value.context["exit_code"] == 5
    assert raised.value.context["observation"]["exit_code"] == 5


def _probe_events(journal: str) -> list[dict]:
    if not Path(journal).exists():
        return []
    result = run_cli("log", "--journal", journal, "--kind", "probe", "--json")
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
