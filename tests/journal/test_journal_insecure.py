"""Issue 27, case 3 (SPEC §2.3): in a shared (1777) directory another user creates the
journal's file, or its checkpoint, and root runs the writer. A journal file others may
write, or (the writer being root) one another user owns, is refused (`journal_insecure`,
exit 3) before anything is written: its owner could truncate or forge it at will. A
checkpoint failing the same check is ignored with a warning, and new files are created
without group or other write.

A real second user, made with useradd when missing; the tests run as root."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from quotaledger import Ledger
from tests.checkpoint_files import file_bytes, stored
from tests.support import run_cli

OTHER = "quotaledger-other"
T0 = "2026-11-29T14:00:00Z"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a second user needs root")


@pytest.fixture(scope="module")
def other_uid() -> int:
    try:
        return pwd.getpwnam(OTHER).pw_uid
    except KeyError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        pytest.skip("no useradd to make a second user")
    subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(OTHER).pw_uid


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A sticky world-writable directory like /tmp, reachable by the other user."""
    directory = Path(tempfile.mkdtemp(prefix="quotaledger-shared-", dir="/tmp"))
    directory.chmod(0o1777)
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


CREATE = 'set -e; umask 077; set -C; cat > "$1"; chmod "$2" "$1"'
"""Create a new file (noclobber) holding stdin, then set its mode."""


def _as_other(uid: int, path: Path, content: bytes, mode: int) -> None:
    """The other user creates `path` holding `content`, then sets `mode`."""
    subprocess.run(
        ["/bin/sh", "-c", CREATE, "sh", str(path), oct(mode)[2:]],
        input=content,
        check=True,
        user=uid,
        cwd="/",
        capture_output=True,
    )
    assert path.stat().st_uid == uid


def _listing(directory: Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        p.name: (p.read_bytes(), p.stat().st_mode, p.stat().st_uid)
        for p in sorted(directory.iterdir())
    }


@pytest.mark.parametrize(
    ("content", "mode"),
    [(b"", 0o666), (b"\0" * 64, 0o666), (b"", 0o644), (b"\0" * 64, 0o600)],
    ids=["empty-0666", "nul-0666", "empty-0644", "nul-0600"],
)
def test_root_never_adopts_a_journal_file_another_user_made(
    other_uid: int, shared_dir: Path, content: bytes, mode: int
) -> None:
    journal = shared_dir / "j.jsonl"
    _as_other(other_uid, journal, content, mode)
    before = _listing(shared_dir)
    refused = run_cli(
        "configure", "--goal", "g", "--max-active-cases", "1", "--journal", str(journal), "--json"
    )
    assert refused.code == 3, refused.stdout
    assert refused.json["error"]["code"] == "journal_insecure"
    assert _listing(shared_dir) == before  # no genesis, no .torn file, nothing moved


def test_a_journal_others_may_write_is_refused_to_every_writer(shared_dir: Path) -> None:
    journal = shared_dir / "j.jsonl"
    with Ledger.open(str(journal)) as ledger:
        ledger.configure(goal="g", max_active_cases=1, at=T0)
    journal.chmod(0o646)
    before = _listing(shared_dir)
    admit = ["admit", "--goal", "g", "--run", "r1", "--case", "c", "--arm", "baseline"]
    refused = run_cli(*admit, "--journal", str(journal), "--json")
    assert refused.code == 3, refused.stdout
    assert refused.json["error"]["code"] == "journal_insecure"
    assert _listing(shared_dir) == before


def _forged_checkpoint(journal: Path) -> bytes:
    """A checkpoint claiming the journal's head with the state of before r1's admission:
    a writer trusting it would admit into the one slot r1 holds."""
    with Ledger.open(str(journal), checkpoint_every=1) as ledger:
        ledger.configure(goal="g", max_active_cases=1, at=T0)
    early = stored(str(journal))
    with Ledger.open(str(journal), checkpoint_every=1) as ledger:
        admitted = ledger.admit(goal="g", run="r1", case="c1", arm="baseline")
        assert admitted["admitted"]
    head = stored(str(journal))
    os.unlink(f"{journal}.checkpoint")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(f"{journal}.checkpoint.delta")
    return file_bytes(head, early)


@pytest.mark.parametrize("who", ["other-user-0644", "root-0666"])
def test_a_checkpoint_others_may_write_is_ignored(
    other_uid: int, shared_dir: Path, who: str
) -> None:
    journal = shared_dir / "j.jsonl"
    forged = _forged_checkpoint(journal)
    checkpoint = Path(f"{journal}.checkpoint")
    if who == "other-user-0644":
        _as_other(other_uid, checkpoint, forged, 0o644)
    else:
        checkpoint.write_bytes(forged)
        checkpoint.chmod(0o666)
    admit = ["admit", "--goal", "g", "--run", "r2", "--case", "c2", "--arm", "baseline"]
    answer = run_cli(*admit, "--journal", str(journal), "--json")
    assert answer.code == 1, answer.stdout  # the slot r1 holds is full
    assert answer.json["admitted"] is False
    assert "ignoring checkpoint" in answer.stderr


def test_new_files_are_created_without_group_or_other_write(shared_dir: Path) -> None:
    journal = shared_dir / "j.jsonl"
    old_umask = os.umask(0)
    try:
        with Ledger.open(str(journal), checkpoint_every=1) as ledger:
            ledger.configure(goal="g", max_active_cases=1, at=T0)
        with open(journal, "ab") as f:
            f.write(b'{"v":1,"seq":2,')  # a torn tail for the next writer to move aside
        with Ledger.open(str(journal)) as ledger:
            ledger.observe(
                goal="g", uncached_input=0, cached_input=0, output=0, source="meter", at=T0
            )
            ledger.observe(
                goal="g", uncached_input=0, cached_input=0, output=0, source="meter", at=T0
            )
        lines = journal.read_bytes().splitlines(keepends=True)
        lines[-2] = lines[-2].replace(b'"meter"', b'"metre"')  # mid-log corruption
        journal.write_bytes(b"".join(lines))
        repaired = run_cli("repair", "--truncate-after", "1", "--yes", "--journal", str(journal))
        assert repaired.code == 0, repaired.stderr
    finally:
        os.umask(old_umask)
    made = sorted(shared_dir.iterdir())
    assert {p.name.split(".")[2] for p in made if p.name.count(".") >= 3} >= {
        "torn",
        "quarantine",
    }
    for path in made:
        assert stat.S_IMODE(path.stat().st_mode) & 0o022 == 0, (path.name, oct(path.stat().st_mode))
