"""Waiting for a file's flock in the kernel, the wait bounded by other means.

A blocking `flock(LOCK_EX)` queues the writer among the lock's waiters in the kernel,
which wakes them the moment the holder lets go. Polling instead (a non-blocking flock
retried after sleeps) finds the lock free only by chance: a writer that has just
released it and asks again wins it over and over, the others sleep through their
turns (unfair, and a tail of seconds). A blocking flock takes no timeout, and Python
retries it when a signal interrupts it (outside the main thread nothing can), so the
blocking call runs on a helper thread while the caller waits for its outcome, bounded.

A wait the caller gave up on stays queued in the kernel: the caller's next `wait`
adopts it (keeping its place); if the kernel grants it while nobody wants it, the
helper releases it at once, so a handle that timed out never sits on the lock.
"""

from __future__ import annotations

import _thread
import fcntl
import queue
import time
from collections.abc import Callable

HELPER_IDLE_S = 5.0
"""A helper thread with nothing to wait for this long ends (the next wait starts one)."""


class _Wait:
    """One blocking flock of one descriptor, as the helper thread runs it."""

    __slots__ = ("done", "error", "fd", "finished", "forgotten", "wanted")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.done = _thread.allocate_lock()
        self.done.acquire()  # released by the helper once flock returns
        self.wanted = True
        """Whether a caller waits for it; only the mutex's holder reads or writes it."""
        self.finished = False
        self.forgotten = False
        """The descriptor was closed (or is about to be): the helper must not touch it."""
        self.error: OSError | None = None


class KernelLock:
    """The exclusive flock of one handle's descriptor, waited for in the kernel."""

    __slots__ = ("_helper_running", "_mutex", "_pending", "_requests")

    def __init__(self) -> None:
        self._mutex = _thread.allocate_lock()
        self._pending: _Wait | None = None
        self._requests: queue.SimpleQueue[_Wait] = queue.SimpleQueue()
        self._helper_running = False

    def wait(self, fd: int, timeout_s: float, meanwhile: Callable[[], None] | None = None) -> bool:
        """Whether this handle now holds the exclusive flock of `fd`, after waiting at
        most `timeout_s` seconds in the kernel's queue of its waiters. `meanwhile` runs
        once the wait is queued (its time counts against `timeout_s`). An OSError of
        the flock itself is raised."""
        deadline = time.monotonic() + timeout_s
        with self._mutex:
            wait = self._pending
            if wait is None and timeout_s <= 0:
                return _try_once(fd)  # no wait at all: nothing to queue
            if wait is None or wait.fd != fd:
                wait = self._pending = _Wait(fd)
                self._requests.put(wait)
                if not self._helper_running:
                    self._helper_running = True
                    _thread.start_new_thread(self._helper, (self._requests,))
            wait.wanted = True
        if meanwhile is not None:
            try:
                meanwhile()
            except BaseException:
                self._give_up(wait)
                raise
            timeout_s = max(0.0, deadline - time.monotonic())
        granted = wait.done.acquire(True, timeout_s)
        with self._mutex:
            if not (granted or wait.finished):
                wait.wanted = False  # the helper releases it if the kernel grants it now
                return False
            self._pending = None
        if wait.error is not None:
            raise wait.error
        return True

    def _give_up(self, wait: _Wait) -> None:
        """The caller no longer wants the lock it queued for: released if granted
        already, else left for the helper to release when the kernel grants it."""
        with self._mutex:
            if not wait.finished:
                wait.wanted = False
                return
            self._pending = None
        if wait.error is None:
            fcntl.flock(wait.fd, fcntl.LOCK_UN)

    def forget(self) -> None:
        """The descriptor is about to be closed: a wait still queued must never touch
        it again (its number may name another file by then). The kernel drops the
        lock it grants to a closed descriptor's wait as the helper's flock returns."""
        with self._mutex:
            if self._pending is not None:
                self._pending.forgotten = True
                self._pending.wanted = False
                self._pending = None
                # Its helper stays blocked until the kernel grants that wait: a later
                # wait (the descriptor reopened) gets a helper and a queue of its own.
                self._requests = queue.SimpleQueue()
                self._helper_running = False

    def _helper(self, requests: queue.SimpleQueue[_Wait]) -> None:
        mutex = self._mutex
        while True:
            try:
                wait = requests.get(True, HELPER_IDLE_S)
            except queue.Empty:
                with mutex:
                    if requests is not self._requests:
                        return  # forgotten: another helper serves the handle now
                    if requests.empty():
                        self._helper_running = False
                        return
                continue
            self._run(wait)

    def _run(self, wait: _Wait) -> None:
        error = None
        try:
            fcntl.flock(wait.fd, fcntl.LOCK_EX)
        except OSError as exc:
            error = exc
        with self._mutex:
            wait.finished, wait.error = True, error
            if not wait.wanted:
                if self._pending is wait:
                    self._pending = None
                if error is None and not wait.forgotten:
                    fcntl.flock(wait.fd, fcntl.LOCK_UN)  # nobody wants it: the next waiter's
        wait.done.release()


def _try_once(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
