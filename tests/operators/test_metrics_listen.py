"""`metrics --listen HOST:PORT` (SPEC §7): GET /metrics for a Prometheus scrape, the
journal folded afresh on every scrape, until interrupted; what it serves passes
`promtool check metrics`."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from quotaledger import Ledger
from tests.support import REPO, promtool_check, run_cli

T0 = "2026-11-29T14:00:00Z"


def _history(journal: str) -> None:
    with Ledger.open(journal) as ledger:
        ledger.configure(goal="g", max_active_cases=2, quota_tpm=10_000, at=T0)
        ledger.observe(goal="g", uncached_input=100, cached_input=0, output=10, at=T0)
        ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=500, at=T0)
        ledger.admit(goal="g", run="r2", arm="baseline", forecast_tpm=50_000, at=T0)


def test_metrics_text_passes_promtool(journal_path: str) -> None:
    _history(journal_path)
    printed = run_cli("metrics", "--journal", journal_path)
    assert printed.code == 0
    promtool_check(printed.stdout)


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def test_listen_serves_every_scrape_afresh_until_interrupted(journal_path: str) -> None:
    _history(journal_path)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "quotaledger",
            "metrics",
            "--journal",
            journal_path,
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert server.stderr is not None
        banner = server.stderr.readline()  # the barrier: it listens once it says where
        found = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", banner)
        assert found, banner
        url = found.group(0)
        status, content_type, body = _get(url)
        assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
        assert 'quotaledger_admissions_total{goal="g"} 1' in body
        assert 'quotaledger_refusal_events_total{goal="g"} 1' in body
        promtool_check(body)
        # A writer process appends; the next scrape folds it.
        released = run_cli("release", "--journal", journal_path, "--goal", "g", "--run", "r1")
        assert released.code == 0, released.stderr
        _, _, again = _get(url)
        assert 'quotaledger_releases_total{goal="g"} 1' in again
        assert 'quotaledger_releases_total{goal="g"} 0' in body
        assert _get(url.replace("/metrics", "/nope"))[0] == 404
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    assert server.returncode == 0, server.stderr.read() if server.stderr else ""
    assert server.stdout is not None and server.stdout.read() == ""


@pytest.mark.parametrize("listen", ["", "nohost:", "127.0.0.1:70000", "127.0.0.1:http", "[::1"])
def test_a_bad_listen_address_is_exit_2(listen: str, journal_path: str) -> None:
    _history(journal_path)
    refused = run_cli("metrics", "--journal", journal_path, "--listen", listen, "--json")
    assert refused.code == 2, refused.stdout
    assert refused.json["error"]["code"] == "invalid_listen_address"


def test_a_port_in_use_is_exit_4(journal_path: str) -> None:
    import socket

    _history(journal_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = run_cli(
            "metrics", "--journal", journal_path, "--listen", f"127.0.0.1:{port}", "--json"
        )
    assert refused.code == 4, refused.stdout
    assert refused.json["error"]["code"] == "listen_failed"
