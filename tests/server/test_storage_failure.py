"""A failed commit (SPEC §11): EIO injected at the server's fdatasync mid-batch (strace)
answers every request of that batch 503 `storage_failure` (nothing acknowledged), the
server stops taking requests and exits 4, and a restart recovers the journal."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.server.serving import configure_and_observe, needs_strace, serving, strace
from tests.server.test_group_commit import _concurrently
from tests.support import run_cli


@needs_strace
def test_eio_at_fdatasync_fails_the_whole_batch_and_exits_4(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    # fdatasync 1 and 2 are configure's and observe's commits; the third is the batch's.
    failing = strace("trace=fdatasync", "inject=fdatasync:error=EIO:when=3")
    with serving(journal, prefix=failing) as server:
        configure_and_observe(server)
        calls = [
            ("observe", {"goal": "g", "uncached_input": 7, "cached_input": 0, "output": 7})
        ] * 6
        answers = _concurrently(server, calls)
        answered = [a for a in answers if a is not None]
        assert answered, "no request was answered"
        for answer in answered:
            assert (answer.status, answer.exit_code) == (503, 4), answer.body
            assert answer.json["error"]["code"] in ("storage_failure", "shutting_down")
            assert answer.headers["retry-after"] == "1"  # the restarted server may take it
        assert any(a.json["error"]["code"] == "storage_failure" for a in answered)
        assert server.proc.wait(timeout=60) == 4
        server.proc.send_signal(signal.SIGCONT)  # harmless: it has exited
    assert run_cli("verify", "--journal", str(journal)).code == 0
    with serving(journal) as restarted:
        assert restarted.call("GET", "/readyz").status == 200
        again = restarted.post("observe", goal="g", uncached_input=1, cached_input=0, output=1)
        assert (again.status, again.exit_code) == (200, 0)
    assert run_cli("verify", "--journal", str(journal)).code == 0
