"""The clients of `quotaledger serve` (SPEC §11): `--journal http://...` and
`Ledger.open(url)` answer, print and fail exactly as the local command and the
in-process API do, against a real server on 127.0.0.1.

The golden session's served commands (tests/cli/test_json_answers.py) run once on a
local journal and once through a server on another: the transcripts, JSON and text,
exit codes included, are the same after the run-to-run values become placeholders.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import quotaledger
from quotaledger import Ledger
from quotaledger.journal import codes
from tests.cli.test_json_answers import SESSION
from tests.cli.transcript import placeholders
from tests.support import run_cli

NOT_SERVED = ("report", "metrics")
"""Session commands that write a file of their own (`--out`): compared elsewhere."""


def _serve_command() -> list[str]:
    """`quotaledger serve` of this checkout, or of QUOTALEDGER_TEST_SERVE (an
    executable) while the server lands apart; skipped when neither exists."""
    given = os.environ.get("QUOTALEDGER_TEST_SERVE")
    if given:
        return [given, "serve"]
    if importlib.util.find_spec("quotaledger.server") is not None:
        return [sys.executable, "-m", "quotaledger", "serve"]
    pytest.skip("no `quotaledger serve` here (QUOTALEDGER_TEST_SERVE names one)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(journal: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [*_serve_command(), "--journal", str(journal), "--listen", f"127.0.0.1:{port}", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read() if proc.stderr else b"") from None
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("the server did not listen within 60 s")


def _session(journal: str, *, as_json: bool) -> str:
    out: list[str] = []
    values: dict[str, str] = {}
    for line in SESSION:
        if line.startswith("# the journal"):
            break
        if line.startswith("#") or line.split()[0] in NOT_SERVED:
            continue
        args = [*shlex.split(line.format(**values)), "--journal", journal]
        result = run_cli(*args, *(["--json"] if as_json else []))
        out.append(f"$ {line.format(**values)}  [exit {result.code}]")
        out += result.stdout.rstrip("\n").splitlines()
        out += [f"! {err}" for err in result.stderr.rstrip("\n").splitlines()]
        found = re.search(r'"hash":"([0-9a-f]{64})"', result.stdout)
        if args[:2] == ["host", "return"]:
            values["bind"] = found.group(1) if found else "0" * 64
        effect = re.search(r'"effect":"([0-9a-f]{32})"|effect ([0-9a-f]{32})', result.stdout)
        if args[:2] == ["turn", "writeback"] and "effect" not in values and effect:
            values["effect"] = effect.group(1) or effect.group(2)
    # A follow-up command (`turn spend ... --journal J`) names the server's journal
    # path, which the client does not know: compared without it (README: what remains).
    text = "\n".join(out).replace(journal, "<journal>")
    text = re.sub(r'--journal [^ "]*/(served|local)\.jsonl', "--journal <journal>", text)
    text = re.sub(r'"[^"]*/(served|local)\.jsonl"', '"<journal>"', text)
    return placeholders(text + "\n")


def _files(where: Path) -> None:
    (where / "body.json").write_text(
        '{"usage": {"prompt_tokens": 1200, "completion_tokens": 300, '
        '"prompt_tokens_details": {"cached_tokens": 200}}}\n'
    )
    (where / "headers.txt").write_text(
        "x-ratelimit-limit-tokens: 120000\nx-ratelimit-remaining-tokens: 76000\n"
        "x-ratelimit-reset-tokens: 6m0s\nretry-after: 12\n"
    )


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_the_session_through_a_server_prints_what_it_prints_locally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("QUOTALEDGER_JOURNAL", raising=False)
    monkeypatch.delenv("QUOTALEDGER_JSON", raising=False)
    _files(tmp_path)
    proc, url = _start(tmp_path / "served.jsonl")
    try:
        remote = _session(url, as_json=as_json)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    local = _session(str(tmp_path / "local.jsonl"), as_json=as_json)
    assert remote == local


def test_ledger_open_url_answers_and_raises_as_the_local_ledger(
    server: str, tmp_path: Path
) -> None:
    calls = [
        ("configure", {"goal": "g", "max_active_cases": 1, "at": "2026-11-29T14:00:00Z"}),
        ("admit", {"goal": "g", "run": "r1", "arm": "baseline", "at": "2026-11-29T14:00:01Z"}),
        ("admit", {"goal": "g", "run": "r2", "arm": "baseline", "at": "2026-11-29T14:00:02Z"}),
        ("release", {"goal": "g", "run": "r1", "at": "2026-11-29T14:00:03Z"}),
        ("inspect", {"goal": "g", "at": "2026-11-29T14:00:04Z"}),
        ("audit", {"goal": "g", "run": "r2"}),
        ("goals", {}),
    ]
    with Ledger.open(server) as remote, Ledger.open(str(tmp_path / "l.jsonl")) as local:
        for name, params in calls:
            answers = [getattr(ledger, name)(**params) for ledger in (remote, local)]
            assert placeholders(repr(answers[0])) == placeholders(repr(answers[1])), name
        for ledger in (remote, local):
            with pytest.raises(quotaledger.TimeRegression) as raised:
                ledger.observe(
                    goal="g", uncached_input=1, cached_input=0, output=0, at="2020-01-01T00:00:00Z"
                )
            assert (raised.value.code, raised.value.exit_code) == (codes.TIME_REGRESSION, 2)
            with pytest.raises(quotaledger.InvalidInput) as unknown:
                ledger.inspect(goal="nobody")
            assert unknown.value.code == codes.UNKNOWN_GOAL
            assert unknown.value.context == {"parameter": "goal"} or unknown.value.context
        with pytest.raises(quotaledger.InvalidInput) as refused:
            remote.verify()
        assert refused.value.code == codes.REMOTE_NOT_SERVED
    with pytest.raises(quotaledger.InvalidInput) as closed:
        remote.goals()
    assert closed.value.code == codes.LEDGER_CLOSED


def test_an_unreachable_server_is_exit_4_server_unreachable() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    result = run_cli("inspect", "--goal", "g", "--journal", url, "--json")
    assert result.code == 4
    assert f'"code":"{codes.SERVER_UNREACHABLE}"' in result.stdout
    with Ledger.open(url) as ledger, pytest.raises(quotaledger.StorageFailure) as raised:
        ledger.goals()
    assert raised.value.code == codes.SERVER_UNREACHABLE


def test_commands_the_server_does_not_serve_refuse_its_url(server: str) -> None:
    for args in (["verify"], ["checkpoint"], ["report", "--goal", "g", "--out", "r.html"]):
        result = run_cli(*args, "--journal", server, "--json")
        assert result.code == 2, (args, result)
        assert codes.REMOTE_NOT_SERVED in result.stdout, (args, result)


def test_the_token_comes_from_the_environment(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o600)  # a token file others may read is refused
    proc, url = _start(tmp_path / "t.jsonl", "--token-file", str(token))
    try:
        refused = run_cli("goals", "--journal", url, "--json", env={"QUOTALEDGER_TOKEN": "wrong"})
        assert refused.code == 2, refused
        allowed = run_cli("goals", "--journal", url, "--json", env={"QUOTALEDGER_TOKEN": "s3cret"})
        assert allowed.code == 0, allowed
    finally:
        proc.terminate()
        proc.wait(timeout=30)
