"""None of the server's imports load for a command that does not serve (SPEC §11)."""

import subprocess
import sys
from pathlib import Path

import pytest

SERVER_ONLY = ("granian", "prometheus_client", "quotaledger.server", "asyncio")


@pytest.mark.parametrize("command", [["admit", "--arm", "baseline"], ["inspect"], ["--help"]])
def test_other_commands_import_nothing_of_the_server(tmp_path: Path, command: list[str]) -> None:
    journal = str(tmp_path / "j.jsonl")
    args = [*command, "--journal", journal, "--goal", "g", "--run", "r"]
    if command == ["inspect"]:
        args = ["inspect", "--journal", journal]
    if command == ["--help"]:
        args = ["--help"]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "quotaledger", *args, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "msgspec" in loaded
    assert not {name for name in loaded if name.split(".")[0] in SERVER_ONLY}
    assert not {name for name in loaded if name.startswith("quotaledger.server")}
