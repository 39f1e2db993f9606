"""The execution probe's I/O: run a command in its own process group, sample the group's
PSS from /proc, hash candidate files, write the optional sidecar (SPEC §6, seed 003).

The pure shape of the observation lives in `projections.probes`; this module only
touches processes and files.

Sampling (Linux). Every `interval_s` the sampler lists /proc and reads, for every
process whose pgid *and* session are the command's and whose start time is not
before the command's (a recycled pid cannot qualify), `Pss:` from
/proc/<pid>/smaps_rollup, then re-reads the process's stat to make sure the pid still
names the same member. The per-round sum is sequential, not atomic: memory handed
from one member to another between two reads can be counted twice (seed 003's
counterexample), so the result is an estimate and is labelled as such.

Choices where SPEC §6 is silent:
- `samples` counts rounds; `unavailable_samples` counts rounds in which at least
  one member's PSS could not be read (it vanished mid-round, or smaps_rollup was not
  permitted). Such a round's partial sum still counts toward the peak; a round that
  read nothing does not, and with no such round the peak is null.
- The run ends when the leader exits. Members it leaves behind are sent SIGTERM,
  then SIGKILL after `TERM_GRACE_S` (counted as `stragglers_terminated`), before
  the leader is reaped, so the pgid cannot have been recycled when we signal it.
  A process that calls setsid() has left the group and is neither sampled nor killed.
- A command killed by signal N exits 128+N (the shell's convention); a timeout is 124
  whatever the command did during the grace period.
- If the probe itself is interrupted (SIGINT/SIGTERM/SIGHUP), the group is killed,
  nothing is journaled, and the CLI exits 130.
- A sidecar that fails after creation is unlinked if the path still names the inode
  the probe created (so no truncated file is left looking like evidence); a path
  replaced during the run is left alone and the sidecar is unavailable.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import stat as stat_module
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from quotaledger.projections.limits import (
    ERROR_TEXT_MAX,
    HASH_CHUNK_BYTES,
    SAMPLES_KEPT_MAX,
    TERM_GRACE_S,
)
from quotaledger.projections.probes import ProbeMemory, Sidecar

EXIT_TIMEOUT = 124
EXIT_SIGNAL_BASE = 128
SIDECAR_FORMAT = "quotaledger.probe.samples/1"
SIDECAR_MODE = 0o644

_PROC = "/proc"


# -- /proc -------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcStat:
    state: str
    pgrp: int
    session: int
    start_ticks: int


def read_stat(pid: int) -> ProcStat | None:
    """The fields of /proc/<pid>/stat the sampler needs; None if the process is gone."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    # comm (field 2) may contain spaces and parentheses: parse after the last ")".
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return ProcStat(fields[0].decode(), int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def read_pss_bytes(pid: int) -> int | None:
    """Pss of one process from /proc/<pid>/smaps_rollup; None if unreadable or gone."""
    try:
        with open(f"{_PROC}/{pid}/smaps_rollup", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    for line in raw.splitlines():
        if line.startswith(b"Pss:"):
            parts = line.split()
            try:
                return int(parts[1]) * 1024  # the kernel reports kB
            except (IndexError, ValueError):
                return None
    return None


def sampling_available() -> bool:
    return os.path.exists(f"{_PROC}/self/smaps_rollup") and os.path.exists(f"{_PROC}/self/stat")


@dataclass(frozen=True)
class Group:
    """The command's process group: membership is pgid + session + start time."""

    pgid: int
    session: int
    start_ticks: int

    def is_member(self, stat: ProcStat | None) -> bool:
        return (
            stat is not None
            and stat.pgrp == self.pgid
            and stat.session == self.session
            and stat.start_ticks >= self.start_ticks
        )

    def live_members(self) -> list[int]:
        """Pids of members that are not zombies."""
        found = []
        for pid in _pids():
            stat = read_stat(pid)
            if self.is_member(stat) and stat is not None and stat.state != "Z":
                found.append(pid)
        return found


def _pids() -> list[int]:
    """Pids in ascending order, so a round reads members in a stable order."""
    try:
        names = os.listdir(_PROC)
    except OSError:
        return []
    return sorted(int(name) for name in names if name.isdigit())


# -- sampling ----------------------------------------------------------------------


@dataclass
class Round:
    t_s: float
    pss_bytes: int
    processes: int
    unreadable: int


@dataclass
class Sampler:
    group: Group
    rounds: int = 0
    unavailable_rounds: int = 0
    peak_bytes: int | None = None
    kept: list[Round] = field(default_factory=list)
    stride: int = 1
    kept_max: int = SAMPLES_KEPT_MAX

    def sample(self, t_s: float) -> Round:
        """One round: read every member's PSS in turn and sum (sequential, not atomic)."""
        total = read = unreadable = 0
        group = self.group
        for pid in _pids():
            stat = read_stat(pid)
            if not group.is_member(stat) or stat is None or stat.state == "Z":
                continue
            pss = read_pss_bytes(pid)
            again = read_stat(pid)
            if pss is None or again is None or again.start_ticks != stat.start_ticks:
                unreadable += 1  # vanished mid-read, or smaps_rollup not permitted
                continue
            total += pss
            read += 1
        one = Round(round(t_s, 6), total, read, unreadable)
        self._record(one)
        return one

    def _record(self, one: Round) -> None:
        index = self.rounds
        self.rounds += 1
        if one.unreadable:
            self.unavailable_rounds += 1
        if one.processes and (self.peak_bytes is None or one.pss_bytes > self.peak_bytes):
            self.peak_bytes = one.pss_bytes
        if index % self.stride == 0:
            self.kept.append(one)
            if len(self.kept) >= self.kept_max:
                self.kept = self.kept[::2]
                self.stride *= 2

    def summary(self) -> ProbeMemory:
        return ProbeMemory(
            peak_estimate_bytes=self.peak_bytes,
            samples=self.rounds,
            unavailable_samples=self.unavailable_rounds,
        )


# -- running -----------------------------------------------------------------------


@dataclass
class RunResult:
    exit_code: int
    timed_out: bool
    duration_s: float
    sampler: Sampler | None
    stragglers_terminated: int
    signal: int | None


def resolve_command(argv: Sequence[str]) -> str | None:
    """The executable argv[0] names (PATH search as exec does), or None."""
    name = argv[0]
    if "/" in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name)


def run_group(
    argv: Sequence[str],
    *,
    interval_s: float,
    timeout_s: float | None,
    stdout_fd: int | None,
) -> RunResult:
    """Run argv in a new session, sample its group until the leader exits, reap it.

    Raises OSError when the command cannot be started. The journal lock is not held
    here: the caller appends the observation after this returns.
    """
    _ignore_sigxfsz()
    with _signals_interrupt():
        # restore_signals (the default) gives the command SIGXFSZ/SIGPIPE back.
        proc = subprocess.Popen(
            list(argv), start_new_session=True, stdout=stdout_fd, close_fds=True
        )
        started = time.monotonic()
        try:
            return _supervise(proc, started, interval_s, timeout_s)
        except BaseException:
            _kill_and_reap(proc)
            raise


def _supervise(
    proc: subprocess.Popen[bytes], started: float, interval_s: float, timeout_s: float | None
) -> RunResult:
    exited = _exit_watcher(proc.pid)
    leader = read_stat(proc.pid)
    group = Group(proc.pid, proc.pid, leader.start_ticks) if leader is not None else None
    sampler = Sampler(group) if group is not None and sampling_available() else None
    deadline = None if timeout_s is None else started + timeout_s
    timed_out = False
    next_round = started
    while not exited.is_set():
        if sampler is not None:
            sampler.sample(time.monotonic() - started)
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            timed_out = True
            break
        next_round = max(next_round + interval_s, now)
        wait_s = next_round - now
        if deadline is not None:
            wait_s = min(wait_s, deadline - now)
        exited.wait(wait_s)
    stragglers = 0
    if timed_out:
        _terminate(proc.pid, group, exited)
    elif group is not None:
        # The leader is a zombie we have not reaped, so the pgid cannot be recycled
        # yet: signalling the group now cannot reach an unrelated process.
        stragglers = len(group.live_members())
        if stragglers:
            _terminate(proc.pid, group, exited)
    returncode = proc.wait()
    duration_s = time.monotonic() - started
    signal_number = -returncode if returncode < 0 else None
    if timed_out:
        exit_code = EXIT_TIMEOUT
    elif signal_number is not None:
        exit_code = EXIT_SIGNAL_BASE + signal_number  # the shell's convention
    else:
        exit_code = returncode
    return RunResult(exit_code, timed_out, duration_s, sampler, stragglers, signal_number)


def _exit_watcher(pid: int) -> threading.Event:
    """An event set when the leader exits, observed with WNOWAIT (not reaped)."""
    exited = threading.Event()

    def watch() -> None:
        with suppress(ChildProcessError):
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        exited.set()

    threading.Thread(target=watch, name=f"probe-wait-{pid}", daemon=True).start()
    return exited


def _terminate(pgid: int, group: Group | None, exited: threading.Event) -> None:
    """SIGTERM to the whole group, then SIGKILL to what is left after a short grace."""
    _killpg(pgid, signal.SIGTERM)
    grace_end = time.monotonic() + TERM_GRACE_S
    while time.monotonic() < grace_end:
        if exited.is_set() and (group is None or not group.live_members()):
            return
        time.sleep(0.02)
    _killpg(pgid, signal.SIGKILL)
    exited.wait(10.0)


def _kill_and_reap(proc: subprocess.Popen[bytes]) -> None:
    """On our own interruption or failure: leave no process of the group behind."""
    _killpg(proc.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(10.0)


def _killpg(pgid: int, signum: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _ignore_sigxfsz() -> None:
    """Under `ulimit -f` a too-large write must fail with EFBIG, not kill the probe.

    CPython already ignores SIGXFSZ at start-up; this keeps it so when the API is
    embedded in a process that restored it.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


class Interrupted(KeyboardInterrupt):
    """SIGTERM/SIGHUP reached the probe while the command ran."""


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into an exception so the command's group is cleaned up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted(f"signal {signum}")

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# -- candidate files ---------------------------------------------------------------


def hash_file(path: str) -> str:
    """SHA-256 of a regular file. Never blocks on a FIFO or device (O_NONBLOCK + fstat)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat_module.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        digest = hashlib.sha256()
        while chunk := os.read(fd, HASH_CHUNK_BYTES):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def hash_after(path: str) -> str | None:
    """The candidate's hash after the run; None if it can no longer be read."""
    try:
        return hash_file(path)
    except OSError:
        return None


# -- the sidecar -------------------------------------------------------------------


class SidecarExists(Exception):
    """The sidecar path already exists (a dangling symlink too): refuse before running."""


class SidecarFile:
    """The optional samples file: created exclusively before the command starts.

    Every later failure (write, short write, EFBIG, ENOSPC, fsync, close) only makes
    the sidecar unavailable; the digest exists only after a complete write, fsync and
    close, while the path still names the file we created. A partially written file
    is unlinked (if the path still names our inode) so no truncated file is left
    looking like evidence.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.identity: tuple[int, int] | None = None
        self.error: str | None = None

    @classmethod
    def create(cls, path: str) -> SidecarFile:
        sidecar = cls(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            sidecar.fd = os.open(path, flags, SIDECAR_MODE)
        except FileExistsError as exc:
            raise SidecarExists(str(exc)) from exc
        except OSError as exc:
            # Could not create (no directory, no permission, no space): the sidecar
            # is an optional diagnostic, so the command still runs without it.
            sidecar.error = _error_text("open", exc)
            return sidecar
        st = os.fstat(sidecar.fd)
        sidecar.identity = (st.st_dev, st.st_ino)
        return sidecar

    def write(self, blob: bytes) -> Sidecar:
        """Write, fsync and close; the digest, or `{"status": "unavailable", ...}`."""
        if self.fd is None:
            return self._unavailable()
        fd, self.fd = self.fd, None
        try:
            _write_all(fd, blob)
            os.fsync(fd)
        except OSError as exc:
            self.error = _error_text("write", exc)
        try:
            os.close(fd)
        except OSError as exc:
            self.error = self.error or _error_text("close", exc)
        if self.error is None and not self._still_ours():
            # Someone moved or replaced the path while the command ran: our bytes are
            # not what the path names, so a digest of the path would be a lie.
            self.error = "path no longer names the file the probe created"
        if self.error is not None:
            self._remove_ours()
            return self._unavailable()
        return Sidecar(path=self.path, sha256=hashlib.sha256(blob).hexdigest(), bytes=len(blob))

    def discard(self) -> None:
        """The command never ran: close and remove the empty file we created."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            with suppress(OSError):
                os.close(fd)
            self._remove_ours()

    def _still_ours(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.identity

    def _remove_ours(self) -> None:
        """Unlink the path only while it still names the inode we created."""
        if self.identity is not None and self._still_ours():
            with suppress(OSError):
                os.unlink(self.path)

    def _unavailable(self) -> Sidecar:
        return Sidecar(status="unavailable", error=self.error or "unavailable")


def _write_all(fd: int, blob: bytes) -> None:
    view = memoryview(blob)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]


def _error_text(step: str, exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "EIO")
    return f"{step}: {name}: {exc.strerror or exc}"[:ERROR_TEXT_MAX]


def sidecar_document(header: dict[str, Any], run: RunResult) -> bytes:
    """All kept samples as one JSON object (columns listed once to keep it small)."""
    sampler = run.sampler
    kept = sampler.kept if sampler is not None else []
    document = {
        "format": SIDECAR_FORMAT,
        **header,
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "duration_s": round(run.duration_s, 6),
        "method": "sequential_pss_sum",
        "atomic": False,
        "samples_total": sampler.rounds if sampler is not None else 0,
        "stride": sampler.stride if sampler is not None else 1,
        "columns": ["t_s", "pss_bytes", "processes", "unreadable"],
        "samples": [[r.t_s, r.pss_bytes, r.processes, r.unreadable] for r in kept],
    }
    return (json.dumps(document, separators=(",", ":")) + "\n").encode()
