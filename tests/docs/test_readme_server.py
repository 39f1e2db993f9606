"""The README's server session runs as printed (on a free port instead of 8765):
`quotaledger serve` in the background, curl calls, the CLI as a client, a clean stop."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.serving import free_port
from tests.support import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def session() -> str:
    section = README.split("## Server: many runners, any language", 1)[1].split("\n## ", 1)[0]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_server_session_runs_as_printed(tmp_path: Path) -> None:
    script = session().replace("8765", str(free_port()))
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("QUOTALEDGER_JOURNAL", None)
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert '{"ok":true}' in out  # healthz
    assert '"admitted":true' in out  # r1
    assert "quotaledger-exit-code: 1" in out.lower()  # r2 refused: one case slot
    assert "r1" in out and '"kind":"capacity.refused"' in out
    assert "Traceback" not in proc.stderr
