"""What an output option (`metrics --out`, `report --out`) may replace (issue 41): a
regular file only. A symlink is followed (the link stays, its target is written); a
character device, a FIFO or a Unix socket is written through, never renamed over; a
block device, a directory and a journal are refused. The device node here is made with
`mknod` in a temporary directory: never a real /dev path."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support import REPO, run_cli

HEALTHY = REPO / "fixtures" / "healthy.jsonl"
AT = "2026-11-29T10:00:00Z"


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "j.jsonl"
    shutil.copyfile(HEALTHY, path)
    configure = ["configure", "--goal", "g", "--quota-tpm", "1000", "--at", AT]
    assert run_cli(*configure, "--journal", path).code == 0
    return path


def _outputs(out: Path, journal: Path) -> list[list[str]]:
    return [
        ["metrics", "--journal", str(journal), "--out", str(out)],
        ["report", "--journal", str(journal), "--goal", "g", "--out", str(out)],
    ]


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")


@needs_root
def test_a_character_device_is_written_through_and_stays_a_device(
    journal: Path, tmp_path: Path
) -> None:
    null = tmp_path / "null"
    subprocess.run(["mknod", "-m", "666", str(null), "c", "1", "3"], check=True)
    for args in _outputs(null, journal):
        done = run_cli(*args)
        assert done.code == 0, done.stderr
        found = os.lstat(null)
        assert stat.S_ISCHR(found.st_mode), args
        assert os.major(found.st_rdev) == 1 and os.minor(found.st_rdev) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.jsonl", "null"]


@needs_root
def test_a_block_device_is_refused_untouched(journal: Path, tmp_path: Path) -> None:
    # Written through, a block device's first bytes (a disk's partition table) would go.
    loop = tmp_path / "loop"
    subprocess.run(["mknod", "-m", "600", str(loop), "b", "7", "200"], check=True)
    for args in _outputs(loop, journal):
        refused = run_cli(*args, "--json")
        assert refused.code == 2, refused.stdout
        assert refused.json["error"]["code"] == "invalid_option"
        assert "block device" in refused.json["error"]["message"]
        assert stat.S_ISBLK(os.lstat(loop).st_mode)


def test_a_symlink_to_the_processes_stdout_is_followed_never_replaced(
    journal: Path, tmp_path: Path
) -> None:
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    proc = subprocess.run(
        [sys.executable, "-m", "quotaledger", "metrics", "--journal", str(journal),
         "--out", str(link)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "quotaledger_journal_head_seq" in proc.stdout  # written through the pipe
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"


def test_a_symlink_to_a_regular_file_replaces_the_target_and_keeps_the_link(
    journal: Path, tmp_path: Path
) -> None:
    target = tmp_path / "real.prom"
    target.write_text("old\n")
    link = tmp_path / "metrics.prom"
    link.symlink_to(target.name)
    done = run_cli("metrics", "--journal", journal, "--out", link)
    assert done.code == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == "real.prom"
    assert "quotaledger_journal_head_seq" in target.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.jsonl", "metrics.prom", "real.prom"]


def test_a_symlink_to_a_journal_is_refused(journal: Path, tmp_path: Path) -> None:
    link = tmp_path / "innocent.prom"
    link.symlink_to(journal)
    before = journal.read_bytes()
    for args in _outputs(link, journal):
        refused = run_cli(*args, "--json")
        assert refused.code == 2 and refused.json["error"]["code"] == "out_is_journal", args
    assert journal.read_bytes() == before and link.is_symlink()


def test_a_fifo_is_written_through(journal: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as reader:
            got.append(reader.read())

    reader = threading.Thread(target=read)
    reader.start()
    done = run_cli("metrics", "--journal", journal, "--out", fifo)
    reader.join(timeout=60)
    assert done.code == 0, done.stderr
    assert b"quotaledger_journal_head_seq" in got[0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_unix_socket_is_written_through(journal: Path, tmp_path: Path) -> None:
    import socket

    where = tmp_path / "s.sock"
    got: list[bytes] = []
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(where))
        listener.listen(1)

        def accept() -> None:
            connection, _ = listener.accept()
            with connection:
                chunks = []
                while chunk := connection.recv(65536):
                    chunks.append(chunk)
                got.append(b"".join(chunks))

        acceptor = threading.Thread(target=accept)
        acceptor.start()
        done = run_cli("metrics", "--journal", journal, "--out", where)
        acceptor.join(timeout=60)
    assert done.code == 0, done.stderr
    assert b"quotaledger_journal_head_seq" in got[0]
    assert stat.S_ISSOCK(os.lstat(where).st_mode)
