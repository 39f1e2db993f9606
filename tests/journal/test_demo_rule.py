"""Issue 27, case 2: `demo` never moves, rotates or deletes a journal it did not write
(SPEC §7). It names each journal it creates in `<journal>.demo`, rotates only a journal
that marker names, and refuses any other (exit 2 `not_a_demo_journal`, untouched). And
the outputs case 1 left: `export --to` and a checkpoint's file never replace a journal
(`out_is_journal`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from quotaledger import Ledger
from tests.support import run_cli

T0 = "2026-11-29T14:00:00Z"


def _user_journal(path: Path) -> bytes:
    with Ledger.open(str(path)) as ledger:
        ledger.configure(goal="prod", quota_tpm=1000, at=T0)
    return path.read_bytes()


def _journal_id(path: Path) -> str:
    first = path.read_bytes().split(b"\n", 1)[0]
    return str(json.loads(first)["data"]["journal_id"])


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _demo(path: Path) -> tuple[int, dict[str, object]]:
    result = run_cli("demo", "--journal", str(path), "--json")
    return result.code, json.loads(result.stdout)


def test_demo_refuses_a_journal_it_did_not_write(tmp_path: Path) -> None:
    prod = tmp_path / "prod.jsonl"
    _user_journal(prod)
    before = _files(tmp_path)
    code, answer = _demo(prod)
    assert code == 2, answer
    assert answer["error"]["code"] == "not_a_demo_journal"  # type: ignore[index]
    assert _files(tmp_path) == before  # nothing moved, nothing written beside it


def test_demo_rotates_only_its_own_journals(tmp_path: Path) -> None:
    demo = tmp_path / "demo.jsonl"
    ids = []
    for _ in range(3):
        code, answer = _demo(demo)
        assert code == 0, answer
        ids.append(_journal_id(demo))
    assert len(set(ids)) == 3
    assert _journal_id(tmp_path / "demo.jsonl.previous") == ids[1]
    assert ids[2] in (tmp_path / "demo.jsonl.demo").read_text()


def test_demo_never_replaces_a_previous_it_did_not_write(tmp_path: Path) -> None:
    demo = tmp_path / "demo.jsonl"
    code, answer = _demo(demo)
    assert code == 0, answer
    # The user's journal happens to sit where the demo keeps its previous one.
    _user_journal(tmp_path / "demo.jsonl.previous")
    before = _files(tmp_path)
    code, answer = _demo(demo)
    assert code == 2, answer
    assert answer["error"]["code"] == "not_a_demo_journal"  # type: ignore[index]
    assert _files(tmp_path) == before


def test_a_marker_naming_another_journal_rotates_nothing(tmp_path: Path) -> None:
    demo = tmp_path / "demo.jsonl"
    code, answer = _demo(demo)
    assert code == 0, answer
    # The demo journal replaced by the user's own at the same path: the marker names
    # the demo's journal_id, not this one's.
    demo.unlink()
    _user_journal(demo)
    before = _files(tmp_path)
    code, answer = _demo(demo)
    assert code == 2, answer
    assert answer["error"]["code"] == "not_a_demo_journal"  # type: ignore[index]
    assert _files(tmp_path) == before


def test_a_marker_path_holding_a_journal_is_never_replaced(tmp_path: Path) -> None:
    marker = tmp_path / "demo.jsonl.demo"
    _user_journal(marker)
    before = _files(tmp_path)
    code, answer = _demo(tmp_path / "demo.jsonl")
    assert code == 2, answer
    assert answer["error"]["code"] == "not_a_demo_journal"  # type: ignore[index]
    assert _files(tmp_path) == before


def test_export_never_writes_onto_a_journal(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    _user_journal(journal)
    other = tmp_path / "other.jsonl"
    _user_journal(other)
    before = _files(tmp_path)
    for target in (journal, other):
        result = run_cli("export", "--journal", str(journal), "--to", str(target), "--json")
        assert result.code == 2, result.stdout
        assert result.json["error"]["code"] == "out_is_journal"
    assert _files(tmp_path) == before


def test_a_checkpoint_never_replaces_a_journal_at_its_path(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    _user_journal(journal)
    other = tmp_path / "j.jsonl.checkpoint"  # a journal that happens to have this name
    _user_journal(other)
    before = _files(tmp_path)
    result = run_cli("checkpoint", "--journal", str(journal), "--json")
    assert result.code == 2, result.stdout
    assert result.json["error"]["code"] == "out_is_journal"
    assert _files(tmp_path) == before
    # A writer's automatic refresh leaves it too: a cache is never worth a journal.
    with Ledger.open(str(journal), checkpoint_every=1) as ledger:
        ledger.observe(
            goal="prod", uncached_input=0, cached_input=0, output=0, source="meter", at=T0
        )
    assert other.read_bytes() == before["j.jsonl.checkpoint"]
    assert not [name for name in os.listdir(tmp_path) if ".tmp." in name]
