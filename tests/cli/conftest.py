"""Fixtures of the CLI's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_remote_client import _start


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A `quotaledger serve` on a fresh journal: its URL."""
    proc, url = _start(tmp_path / "served.jsonl")
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
