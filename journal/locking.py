"""The journal's lock as one handle holds it: the store's lock (a file's flock, a
PostgreSQL advisory lock) for other processes, a thread lock for the handle's own
threads, and the bound on every wait.

A handle shared by threads serialises their transactions: each waits its turn (as
long as a process would wait for the store's lock), then takes the store's lock. One
thread beginning a transaction inside its own is refused, since it would wait on itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput, LockTimeout
from quotaledger.journal.store import Store


class LockHold:
    """Who holds a handle's lock: at most one of its threads, and then the store's lock."""

    __slots__ = ("_mutex", "_owner", "store", "timeout_s")

    def __init__(self, store: Store, timeout_s: float) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self._mutex = threading.Lock()
        self._owner: int | None = None

    def acquire(self, meanwhile: Callable[[], None] | None = None) -> None:
        """This thread's turn on the handle, then the store's lock; each wait bounded.
        `meanwhile` runs in this thread's turn while the store's lock is waited for, if
        the store can (see `Store.lock`)."""
        self._take_turn()
        try:
            self.store.lock(self.timeout_s, meanwhile)
        except BaseException:
            self._give_turn()
            raise

    def release(self) -> None:
        try:
            self.store.unlock()
        finally:
            self._give_turn()

    @contextmanager
    def turn(self) -> Iterator[None]:
        """This thread's turn on the handle without the store's lock (a refresh, which
        folds into the state a transaction of another thread may be folding into)."""
        if self._owner == threading.get_ident():
            yield  # inside this thread's own transaction: it is already its turn
            return
        self._take_turn()
        try:
            yield
        finally:
            self._give_turn()

    def _take_turn(self) -> None:
        me = threading.get_ident()
        if self._owner == me:
            raise InvalidInput(
                f"a transaction on {self.store.target} was begun inside another on the "
                "same handle: they do not nest (end the first, or open a second handle)",
                code=codes.NESTED_TRANSACTION,
            )
        if not self._mutex.acquire(timeout=self.timeout_s):
            raise LockTimeout(
                lambda name: (
                    f"journal {self.store.target} stayed locked by another thread of this "
                    f"process for {self.timeout_s:g} s: give it longer with {name}"
                ),
                about="lock_timeout_s",
                lock_timeout_s=self.timeout_s,
                holder_pid=None,
            )
        self._owner = me

    def _give_turn(self) -> None:
        self._owner = None
        self._mutex.release()
