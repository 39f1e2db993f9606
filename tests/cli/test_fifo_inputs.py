"""Issue 41: a `FILE` input option (`--usage`, `--provider-headers`) on a FIFO that
nothing writes is refused at once with the option's code, instead of blocking for
ever; a FIFO something writes (a shell's `<(command)`) is read as a file is."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tests.support import run_process

USAGE = '{"usage": {"prompt_tokens": 12, "completion_tokens": 3}}'


def _journal(tmp_path: Path) -> Path:
    journal = tmp_path / "j.jsonl"
    done = run_process("configure", "--goal", "g", "--quota-tpm", "1000", "--journal", journal)
    assert done.code == 0, done.stderr
    return journal


def test_a_fifo_nothing_writes_is_refused_with_the_options_code(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    before = journal.read_bytes()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for option, code in (("--usage", "invalid_usage"),
                         ("--provider-headers", "invalid_provider_headers")):  # fmt: skip
        args = ["observe", "--goal", "g", option, fifo, "--journal", journal, "--json"]
        if option == "--provider-headers":
            args += ["--uncached-input", "1", "--cached-input", "0", "--output", "0"]
        done = run_process(*args, timeout=60)
        assert done.code == 2, done.stdout
        assert done.json["error"]["code"] == code
    assert journal.read_bytes() == before


def test_a_fifo_something_writes_is_read(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "w") as writer:
            writer.write(USAGE)

    writer = threading.Thread(target=write)
    writer.start()  # blocks in open until the command opens the FIFO to read
    done = run_process("observe", "--goal", "g", "--usage", fifo, "--journal", journal, "--json")
    writer.join(timeout=60)
    assert done.code == 0, done.stderr
    assert done.json["usage"]["uncached_input"] == 12
