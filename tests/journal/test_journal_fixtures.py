"""The committed fixtures: verify results, recovery results, and no format drift."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.journal.independent_verifier import verify as independent_verify
from tests.journal.journal_helpers import FIXTURES, manifest, side_files
from tests.support import run_cli

MANIFEST = manifest()
NAMES = sorted(MANIFEST)


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_fixture_is_in_the_manifest() -> None:
    on_disk = sorted(p.name for p in FIXTURES.glob("*.jsonl"))
    assert on_disk == NAMES
    kinds = {name.removesuffix(".jsonl").split("_")[0] for name in NAMES}
    assert kinds == {"healthy", "torn", "corrupt"}


def test_todays_encoder_reproduces_the_committed_bytes() -> None:
    """The record format cannot drift silently: re-encoding gives identical bytes."""
    files, expected_manifest = _generator().build()
    assert sorted(files) == NAMES
    for name, data in files.items():
        assert (FIXTURES / name).read_bytes() == data, f"{name} no longer encodes identically"
    assert expected_manifest == MANIFEST


@pytest.mark.parametrize("name", NAMES)
def test_verify_gives_the_manifest_result(name: str, tmp_path: Path) -> None:
    expected = MANIFEST[name]["verify"]
    path = tmp_path / name
    shutil.copyfile(FIXTURES / name, path)
    before = path.read_bytes()
    result = run_cli("verify", "--journal", path, "--json")
    assert result.code == expected["exit"], result.stdout + result.stderr
    body = result.json
    if expected["exit"] == 0:
        assert body["ok"] is True
        assert body["head"]["seq"] == expected["head_seq"]
        assert body["head"]["journal_id"] == "5e1f3c2a9b8d4e7f8a6b5c4d3e2f1a0b"
        torn = body["torn_tail"]
        if expected["torn_tail"] is None:
            assert torn is None
        else:
            assert {"seq": torn["seq"], "offset": torn["offset"]} == expected["torn_tail"]
    else:
        error = body["error"]
        assert body["ok"] is False
        assert error["code"] == expected["error"]["code"]
        assert error["seq"] == expected["error"]["seq"]
        assert error["offset"] == expected["error"]["offset"]
        assert expected["error"]["reason"] in error["reason"]
    assert path.read_bytes() == before, "verify must never modify the journal"
    assert side_files(str(path), "torn") == []


@pytest.mark.parametrize("name", NAMES)
def test_the_independent_verifier_agrees(name: str) -> None:
    expected = MANIFEST[name]["verify"]
    result = independent_verify((FIXTURES / name).read_bytes())
    if expected["exit"] == 0:
        assert result.corrupt is None
        assert len(result.records) - 1 == expected["head_seq"]
        if expected["torn_tail"] is None:
            assert result.torn is None
        else:
            assert result.torn is not None
            assert result.torn.seq == expected["torn_tail"]["seq"]
            assert result.torn.offset == expected["torn_tail"]["offset"]
    else:
        assert result.corrupt is not None
        assert result.corrupt.seq == expected["error"]["seq"]
        assert result.corrupt.offset == expected["error"]["offset"]


@pytest.mark.parametrize("name", NAMES)
def test_a_writer_recovers_as_the_manifest_says(name: str, tmp_path: Path) -> None:
    """Opening for writing: torn tails are cut and kept; corruption is refused untouched."""
    expected = MANIFEST[name]["recover"]
    path = tmp_path / name
    shutil.copyfile(FIXTURES / name, path)
    original = path.read_bytes()
    result = run_cli("checkpoint", "--journal", path, "--json")
    assert result.code == expected["exit"], result.stdout + result.stderr
    if expected["exit"] == 3:
        error = result.json["error"]
        assert (error["code"], error["seq"], error["offset"]) == (
            expected["error"]["code"],
            expected["error"]["seq"],
            expected["error"]["offset"],
        )
        assert path.read_bytes() == original
        assert sorted(p.name for p in tmp_path.iterdir()) == [name]
        return
    assert result.json["seq"] == expected["records"] - 1
    assert path.read_bytes() == original[: expected["size"]]
    torn = side_files(str(path), "torn")
    if "torn_bytes" in expected:
        assert len(torn) == 1
        assert torn[0].read_bytes() == original[expected["size"] :]
        assert len(torn[0].read_bytes()) == expected["torn_bytes"]
        assert torn[0].name.startswith(f"{name}.torn.{expected['records']}.")
        assert "torn tail" in result.stderr
    else:
        assert torn == []
    # Recovery is idempotent: a second writer finds nothing more to do.
    again = run_cli("checkpoint", "--journal", path, "--json")
    assert again.code == 0
    assert path.read_bytes() == original[: expected["size"]]
    assert len(side_files(str(path), "torn")) == len(torn)
