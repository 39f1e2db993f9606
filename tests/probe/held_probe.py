"""Run `quotaledger probe run` with its premise forced: CMD is held until strace has
seen the probe take enough sampling rounds (it lists /proc once per round), so the
sidecar is as large as a test needs however loaded the machine is."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROUNDS_FORCED = 80
"""Rounds a held probe takes at least: rows of 20-30 bytes each, a sidecar far over
the 1 KiB that `ulimit -f 1` allows."""
HELD_CMD = ["sh", "-c", "echo cmd-out; while [ ! -e go ]; do sleep 0.01; done; exit 7"]
"""Short (a journal line carries the command, and under `ulimit -f 1` the journal must
stay under 1 KiB too); it runs in the test's directory, where `go` appears once the
rounds were seen."""
WAIT_S = 120.0
"""A bound on waiting for the rounds (a failure, never a timing premise)."""

needs_strace = pytest.mark.skipif(
    shutil.which("strace") is None and os.environ.get("CI") != "true",
    reason="needs strace (CI installs it)",
)


def run_held(
    probe_args: list[str], cwd: Path, *, ulimit_kib: int = 1, rounds: int = ROUNDS_FORCED
) -> subprocess.CompletedProcess[str]:
    """`python -m quotaledger probe run PROBE_ARGS -- HELD_CMD` under `ulimit -f`, in
    `cwd`; CMD exits once the probe has sampled `rounds` rounds."""
    argv = [sys.executable, "-m", "quotaledger", "probe", "run", *probe_args, "--", *HELD_CMD]
    shell = f"ulimit -f {ulimit_kib}; exec {' '.join(shlex.quote(a) for a in argv)}"
    log = cwd / f"probe-trace.{time.monotonic_ns()}.log"
    (cwd / "go").unlink(missing_ok=True)
    proc = subprocess.Popen(
        [
            *(shutil.which("strace") or "strace", "-f", "-qq", "-o", str(log)),
            *("-e", "trace=openat", "bash", "-c", shell),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=os.environ.copy(),
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while _rounds_seen(log) < rounds:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the probe never sampled enough rounds"
            time.sleep(0.05)
        (cwd / "go").touch()
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.unlink(missing_ok=True)
        (cwd / "go").unlink(missing_ok=True)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _rounds_seen(log: Path) -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if '"/proc", O_RDONLY' in line)
