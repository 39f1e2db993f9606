"""A real client nobody here wrote (SPEC §10, §11): TypeScript types generated from
the server's /openapi.json by openapi-typescript, strict `tsc` over a driver that
calls it with openapi-fetch under Node: configure, observe, admit until refused,
release, inspect, and the audit of the refusal. A document the generator reads wrongly
fails to compile; a server that answers otherwise fails the checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server.serving import serving

HERE = Path(__file__).resolve().parent / "typescript"
NODE = shutil.which("node")
INSTALLED = (HERE / "node_modules" / "openapi-fetch").is_dir()

pytestmark = pytest.mark.skipif(
    (NODE is None or not INSTALLED) and os.environ.get("CI") != "true",
    reason="needs Node and `npm ci` in tests/server/typescript (CI installs both)",
)


def _node(*args: str, cwd: Path) -> str:
    assert NODE is not None, "Node is needed (CI installs it)"
    proc = subprocess.run(
        [NODE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_a_generated_typescript_client_drives_the_server(tmp_path: Path) -> None:
    assert INSTALLED, "run `npm ci` in tests/server/typescript"
    work = tmp_path / "client"
    work.mkdir()
    for name in ("driver.ts", "tsconfig.json", "package.json"):
        shutil.copy(HERE / name, work / name)
    (work / "node_modules").symlink_to(HERE / "node_modules")
    with serving(tmp_path / "j.jsonl") as server:
        (work / "openapi.json").write_bytes(server.call("GET", "/openapi.json").body)
        bin_dir = work / "node_modules" / ".bin"
        _node(str(bin_dir / "openapi-typescript"), "openapi.json", "-o", "schema.d.ts", cwd=work)
        _node(str(bin_dir / "tsc"), "-p", ".", cwd=work)  # strict: the types must fit
        results = json.loads(_node("out/driver.js", server.url, cwd=work))
    assert results["configure"] is True
    assert results["retry"] == {"seq": results["observe"], "idempotent": True}
    assert results["admitted"] == [True, True, False]
    assert results["exit_code"] == "1"
    assert results["release"] is True
    assert results["active"] == 1
    assert results["reproduced"] is True
    assert results["price_seq"] > 0
    assert (results["cached_price"], results["spend_usd"]) == (2.5, 0.0)
    assert (results["bad_status"], results["bad_code"]) == (400, "invalid_identifier")
    assert results["pool_seq"] > 0
    assert results["pool_headroom"] == 600
    assert results["pool_reasons"] == ["pool_share_protected"]
    assert results["pool_borrowed"] == 100
    assert results["pool_cap_reasons"][-1] == "pool_spend_cap_reached"
    assert (results["pool_cap_spent"], results["pool_spend_cap"]) == (0, 0)
