"""verify --digest proves growth; export/import round-trips byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.journal.journal_helpers import FIXTURES, engine_journal, line_offsets
from tests.support import run_cli


def _healthy(tmp_path: Path) -> Path:
    path = tmp_path / "j.jsonl"
    shutil.copyfile(FIXTURES / "healthy.jsonl", path)
    return path


def test_a_digest_proves_the_journal_only_grew(tmp_path: Path) -> None:
    path = _healthy(tmp_path)
    digest = run_cli("digest", "--journal", path, "--json")
    assert digest.code == 0
    anchor = digest.json["digest"]
    seq, hash_hex = anchor.split(":")
    assert (int(seq), hash_hex) == (digest.json["seq"], digest.json["hash"])

    engine_journal(str(path), 3)  # the journal grows
    grown = run_cli("verify", "--journal", path, "--json", "--digest", anchor)
    assert grown.code == 0, grown.stdout
    assert grown.json["digest"] == {"seq": int(seq), "hash": hash_hex, "contained": True}
    assert grown.json["head"]["seq"] == int(seq) + 3
    # Any record of the chain is an anchor.
    record = json.loads(run_cli("log", "--journal", path, "--json").stdout.splitlines()[1])
    older = run_cli("verify", "--journal", path, "--json", "--digest", f"1:{record['hash']}")
    assert older.code == 0 and older.json["digest"]["seq"] == 1


def test_a_rewritten_or_shrunk_history_fails_the_digest(tmp_path: Path) -> None:
    path = _healthy(tmp_path)
    anchor = run_cli("digest", "--journal", path, "--json").json["digest"]
    seq = int(anchor.split(":")[0])
    wrong = f"{seq}:{'0' * 64}"
    mismatch = run_cli("verify", "--journal", path, "--json", "--digest", wrong)
    assert mismatch.code == 3
    assert mismatch.json["error"]["code"] == "digest_mismatch"
    assert mismatch.json["error"]["seq"] == seq

    data = path.read_bytes()
    path.write_bytes(data[: line_offsets(data)[3]])  # records 0..2 remain
    shrunk = run_cli("verify", "--journal", path, "--json", "--digest", anchor)
    assert shrunk.code == 3
    assert shrunk.json["error"]["code"] == "digest_not_found"

    # Same length, different history: another journal grown to the same seq.
    other = tmp_path / "other.jsonl"
    engine_journal(str(other), seq)
    rewritten = run_cli("verify", "--journal", other, "--json", "--digest", anchor)
    assert rewritten.code == 3 and rewritten.json["error"]["code"] == "digest_mismatch"


@pytest.mark.parametrize(
    "text", ["5", "x:" + "a" * 64, "5:" + "A" * 64, "5:abc", "-1:" + "a" * 64, ""]
)
def test_invalid_digest_text_is_a_usage_error(text: str, tmp_path: Path) -> None:
    path = _healthy(tmp_path)
    result = run_cli("verify", "--journal", path, "--json", "--digest", text)
    assert result.code == 2, result.stdout
    assert result.json["error"]["code"] == "invalid_digest"


def test_export_import_round_trip_is_byte_identical(tmp_path: Path) -> None:
    source = _healthy(tmp_path)
    engine_journal(str(source), 2)
    exported = tmp_path / "exported.jsonl"
    result = run_cli("export", "--journal", source, "--to", exported, "--json")
    assert result.code == 0, result.stdout
    assert exported.read_bytes() == source.read_bytes()
    assert result.json["records"] == 8 and result.json["bytes"] == len(source.read_bytes())

    imported = tmp_path / "imported.jsonl"
    loaded = run_cli("import", exported, "--journal", imported, "--json")
    assert loaded.code == 0, loaded.stdout
    assert loaded.json["records"] == 8
    assert imported.read_bytes() == source.read_bytes()
    last = json.loads(source.read_bytes().splitlines()[-1])
    assert loaded.json["event"] == {k: last[k] for k in ("seq", "hash", "kind", "at")}
    assert loaded.json["head"]["seq"] == last["seq"] == 7
    assert oct(imported.stat().st_mode & 0o777) == oct(0o600)

    again = run_cli("export", "--journal", source, "--to", exported, "--json")
    assert again.code == 2 and again.json["error"]["code"] == "out_is_journal"  # SPEC §7
    notes = tmp_path / "notes.txt"
    notes.write_text("not a journal\n")
    onto = run_cli("export", "--journal", source, "--to", notes, "--json")
    assert onto.code == 2 and onto.json["error"]["code"] == "export_target_exists"
    assert notes.read_text() == "not a journal\n"
    refill = run_cli("import", exported, "--journal", imported, "--json")
    assert refill.code == 2 and refill.json["error"]["code"] == "journal_not_empty"
    assert imported.read_bytes() == source.read_bytes()


def test_export_of_a_torn_journal_is_its_verified_prefix(tmp_path: Path) -> None:
    source = tmp_path / "torn.jsonl"
    shutil.copyfile(FIXTURES / "torn_unterminated.jsonl", source)
    before = source.read_bytes()
    exported = tmp_path / "exported.jsonl"
    assert run_cli("export", "--journal", source, "--to", exported, "--json").code == 0
    assert exported.read_bytes() == (FIXTURES / "healthy.jsonl").read_bytes()
    assert source.read_bytes() == before
    # import refuses a torn source rather than silently dropping its tail
    refused = run_cli("import", source, "--journal", tmp_path / "imported.jsonl", "--json")
    assert refused.code == 2 and refused.json["error"]["code"] == "source_torn_tail"
    corrupt = run_cli(
        "import",
        FIXTURES / "corrupt_flipped_byte.jsonl",
        "--journal",
        tmp_path / "c.jsonl",
        "--json",
    )
    assert corrupt.code == 3 and corrupt.json["error"]["code"] == "journal_corrupt"


def test_an_import_past_the_checkpoint_threshold_leaves_a_checkpoint(tmp_path: Path) -> None:
    """The next command on an imported journal reads a checkpoint, not every record."""
    from quotaledger import Ledger

    source = _healthy(tmp_path)
    engine_journal(str(source), 2)  # 8 records
    target = tmp_path / "imported.jsonl"
    with Ledger.open(str(target), checkpoint_every=5) as ledger:
        loaded = ledger.import_(file=str(source))
        checkpoint = ledger.journal.store.load_checkpoint()
    assert checkpoint is not None
    assert (checkpoint.seq, checkpoint.hash) == (loaded["head"]["seq"], loaded["head"]["hash"])
    assert run_cli("verify", "--journal", target, "--json").code == 0  # and it matches
