"""Issue 41: journal paths at the edges, each one clear coded error. A name too long
for the files beside a journal (its checkpoint, its `.unsynced` marker, temporary
files) is refused up front (exit 2), never reported later as an unsynced tail (an
ENAMETOOLONG read as a marker); a path with a newline keeps every error one line;
`verify` of an empty file says `empty_journal`, as `digest` does."""

from __future__ import annotations

import re
from pathlib import Path

from quotaledger.journal.limits import JOURNAL_NAME_BYTES_MAX
from tests.support import run_cli

ONE_LINE = re.compile(r"^quotaledger: error: [^\n]+ \[([a-z_0-9]+)\]\n$")


def test_a_journal_name_too_long_for_its_companions_is_exit_2(tmp_path: Path) -> None:
    for size in (JOURNAL_NAME_BYTES_MAX + 1, 247, 255):
        journal = tmp_path / ("j" * (size - 6) + ".jsonl")
        for args in (["configure", "--goal", "g", "--quota-tpm", "1000"], ["inspect"]):
            done = run_cli(*args, "--journal", journal, "--json")
            assert done.code == 2, (size, done.stdout)
            assert done.json["error"]["code"] == "invalid_journal_path"
        assert list(tmp_path.iterdir()) == []
    longest = tmp_path / ("j" * (JOURNAL_NAME_BYTES_MAX - 6) + ".jsonl")
    done = run_cli("configure", "--goal", "g", "--quota-tpm", "1000", "--journal", longest)
    assert done.code == 0, done.stderr
    assert run_cli("checkpoint", "--journal", longest).code == 0


def test_an_error_naming_a_path_with_a_newline_is_one_line(tmp_path: Path) -> None:
    odd = tmp_path / "a\nb"
    odd.mkdir()
    missing = odd / "missing.jsonl"
    out = ["--out", odd / "no" / "m.prom"]
    for args in (["inspect", "--journal", missing], ["verify", "--journal", missing],
                 ["metrics", "--journal", tmp_path / "x.jsonl", *out]):  # fmt: skip
        done = run_cli(*args)
        assert done.code in (2, 3), done.stderr
        assert ONE_LINE.match(done.stderr), repr(done.stderr)


def test_verify_of_an_empty_file_is_empty_journal_as_digest_says(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    digest = run_cli("digest", "--journal", empty, "--json")
    verify = run_cli("verify", "--journal", empty, "--json")
    assert digest.code == 2 and digest.json["error"]["code"] == "empty_journal"
    assert (verify.code, verify.json["error"]["code"]) == (2, "empty_journal"), verify.stdout
