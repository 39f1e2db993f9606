"""The README's CLI tour runs as printed, in order, on a fresh journal (in the style
of sqlite-utils' tests/test_docs.py), so the README cannot drift from the product.

Each line of the tour's `sh` blocks runs in bash (continuations joined) in a scratch
directory, QUOTALEDGER_JOURNAL naming a scratch journal, with one explicit `--at` per
quotaledger command (a second apart, from now: the 60 s window and the phase
deadlines then never depend on how fast this machine is). A trailing `# exit N`
is the exit code expected (0 otherwise); `# until Ctrl-C` runs the command until it
has printed, then interrupts it (exit 0 expected). `<hash>` and `<effect>` are what
`host return` and `turn resume` printed; `:9464` listens on a free port instead.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from quotaledger.journal.clock import US_PER_S, format_us, wall_us

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
GROUPS = {"host", "turn", "budget", "probe", "price", "pool"}


def tour_lines() -> list[str]:
    tour = README.split("## CLI tour", 1)[1].split("\n## ", 1)[0]
    lines: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", tour, re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        lines += [
            line.strip()
            for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")  # a comment line
        ]
    return lines


def _split_comment(line: str) -> tuple[str, str]:
    """(command, trailing comment): the tour never puts ' #' inside quotes."""
    command, _, comment = line.partition(" #")
    return command.strip(), comment.strip()


def _with_at(command: str, at: str) -> str:
    words = command.split(" ")
    if words[0] != "quotaledger":
        return command
    depth = 3 if len(words) > 2 and words[1] in GROUPS else 2
    return " ".join([*words[:depth], "--at", at, *words[depth:]])


def _run_until_printed(command: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=cwd,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    first = lines.get(timeout=120)  # the barrier: it runs once it has printed
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    return proc.returncode, first


def test_the_cli_tour_runs_as_printed(tmp_path: Path) -> None:
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "QUOTALEDGER_JOURNAL": str(tmp_path / "tour.jsonl"),
    }
    env.pop("QUOTALEDGER_JSON", None)
    start_us = (wall_us() // US_PER_S + 1) * US_PER_S
    printed: dict[str, str] = {}
    lines = tour_lines()
    assert len(lines) > 30, lines
    for step, line in enumerate(lines):
        command, comment = _split_comment(line)
        for name, value in printed.items():
            command = command.replace(f"<{name}>", value)
        assert "<" not in command.replace("<<", ""), f"unfilled placeholder in: {line}"
        # The tour runs offline: a line that fetches from the network is shown in a
        # comment (with what it saves written by printf), never run.
        assert not re.match(r"(curl|wget)\b", command), f"a network fetch in the tour: {line}"
        command = command.replace(":9464", ":0")
        command = _with_at(command, format_us(start_us + step * US_PER_S))
        if "until Ctrl-C" in comment:
            code, output = _run_until_printed(command, env, tmp_path)
            assert code == 0, (line, output)
            continue
        expected = int(m.group(1)) if (m := re.search(r"^exit (\d)", comment)) else 0
        done = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, env=env, cwd=tmp_path,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == expected, (line, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, (line, done.stderr)
        if (found := re.search(r"--bind ([0-9a-f]{64})", done.stdout)) is not None:
            printed["hash"] = found.group(1)
        if (found := re.search(r"--effect ([0-9a-f]{32})", done.stdout)) is not None:
            printed["effect"] = found.group(1)
    # The refusal the operators' block audits is the one the capacity block made.
    audit = subprocess.run(
        ["bash", "-c", "quotaledger audit --goal swe-bench --run r3"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert audit.returncode == 0 and "recorded: refused" in audit.stdout, audit.stdout
