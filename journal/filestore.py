"""The file store: one JSON Lines file, flock-serialised, fdatasync-durable.

Writers hold an exclusive `flock` for a whole transaction (read tail -> fold ->
sample time -> decide -> one write -> fdatasync). `flock` and not `fcntl` record
locks: a stray close() of any descriptor of the file releases the latter.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from quotaledger.journal import codes, unsynced
from quotaledger.journal.checkpoint import (
    Checkpoint,
    checkpoint_path,
    peek_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from quotaledger.journal.errors import (
    JournalCorrupt,
    JournalPoisoned,
    JournalReplaced,
    LockTimeout,
    NotRegularFile,
    StorageFailure,
)
from quotaledger.journal.filecheck import insecure_reason
from quotaledger.journal.flockwait import KernelLock
from quotaledger.journal.fsutil import FILE_MODE, create_temp_beside, fsync_dir, write_all
from quotaledger.journal.limits import (
    LINE_BYTES_MAX,
    READ_CHUNK_BYTES,
)
from quotaledger.journal.sections import Header, Section, SectionFile
from quotaledger.journal.store import PendingRecord, Tail

_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
_TAIL_BYTES = 64 + len('"}\n')
"""A line's last bytes: its hash, the closing quote and brace, the newline."""
_WRITE_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
"""A writer reads and appends through one descriptor: with a second one, opened by path
for reading, an empty file that another handle's refused first command removes between
the two opens would leave the writer holding a file it cannot read ("no journal")."""


def _refuse_special(path: str, exc: OSError) -> NotRegularFile | JournalCorrupt:
    if exc.errno == errno.ELOOP:
        return NotRegularFile(f"{path} is a symlink; refusing to follow it", path=path)
    if exc.errno in (errno.EISDIR, errno.ENXIO, errno.ENODEV):
        return NotRegularFile(f"{path} is not a regular file", path=path)
    return JournalCorrupt(
        f"cannot open {path}: {exc.strerror}", code=codes.JOURNAL_UNREADABLE, path=path
    )


def _check_regular(path: str, fd: int) -> os.stat_result:
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        raise NotRegularFile(f"{path} is not a regular file", path=path)
    return found


def open_for_read(path: str) -> int:
    """A read-only descriptor of an existing regular journal file (never blocks)."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        raise JournalCorrupt(
            f"no journal at {path} (a writing command creates it)",
            code=codes.JOURNAL_NOT_FOUND,
            path=path,
        ) from None
    except OSError as exc:
        raise _refuse_special(path, exc) from exc
    _check_regular(path, fd)
    return fd


def storage_code(exc: OSError) -> str:
    """One code per condition (SPEC §8): a full disk, a read-only filesystem, else I/O."""
    if exc.errno == errno.ENOSPC:
        return codes.NO_SPACE
    if exc.errno == errno.EROFS:
        return codes.JOURNAL_READ_ONLY
    return codes.IO_ERROR


def _storage_failure(message: str, exc: OSError) -> StorageFailure:
    return StorageFailure(f"{message}: {exc.strerror}", code=storage_code(exc))


def _remove_quietly(path: str) -> None:
    # Gone already, or the directory refuses: nothing more to do either way.
    with contextlib.suppress(OSError):
        os.unlink(path)


class FileStore:
    """Low-level access to one journal file. Not thread-safe; one per process or thread.

    It is the core `Store`, its `Checkpoints` (a file beside the journal) and the
    `LocalFile` capability (torn tails cut aside, the empty file re-linked, a descriptor
    for the parallel verify)."""

    def __init__(self, path: str, *, create: bool, repairing: bool = False) -> None:
        self.path = self.target = path
        self.repairing = repairing
        """A repair's handle: the one that may open past `<journal>.unsynced`."""
        self._tail: tuple[str, bytes] = ("", b"")
        """The last hash this handle wrote or checked, and the bytes its line ends with."""
        self.writable = create
        self.poisoned = False
        self._locked = False
        self.created = False
        self.closed = False
        self.read_fd = -1
        self.write_fd = -1
        self._identity = (-1, -1)
        """The (st_dev, st_ino) of the file write_fd holds: the path must still name it."""
        self._reopened = False
        self.read_only_reason: str | None = None
        """Why a writer's journal cannot be written (EROFS, EACCES); None if it can."""
        if not repairing:
            unsynced.refuse_if_marked(path)
        self._kernel_lock = KernelLock()
        if create:
            # A missing file is created by the first lock() (a transaction, a repair or
            # an import), so a command refused before writing leaves nothing behind.
            self.read_fd = self.write_fd = self._open_writer(create_file=False)
        else:
            self.read_fd = open_for_read(path)

    def _close_descriptors(self) -> None:
        self._kernel_lock.forget()  # a wait still queued must not touch a closed number
        for fd in {self.read_fd, self.write_fd} - {-1}:  # a writer's are one descriptor
            os.close(fd)
        self.read_fd = self.write_fd = -1

    def _open_writer(self, *, create_file: bool = True) -> int:
        try:
            fd = os.open(self.path, _WRITE_FLAGS)
        except FileNotFoundError:
            if not create_file:
                return -1
            try:
                fd = os.open(self.path, _WRITE_FLAGS | os.O_CREAT | os.O_EXCL, FILE_MODE)
                self.created = True
            except FileExistsError:
                return self._open_writer()
            except OSError as exc:
                raise _storage_failure(f"cannot create {self.path}", exc) from exc
        except OSError as exc:
            fd = self._open_unwritable(exc)
        found = _check_regular(self.path, fd)
        insecure = insecure_reason(found)
        if insecure is not None:
            os.close(fd)
            raise JournalCorrupt(
                f"refusing to write to {self.path}: {insecure}, so its owner could truncate "
                "or forge it; nothing was written (give the writer a journal only it may "
                "write, e.g. in a directory of its own)",
                code=codes.JOURNAL_INSECURE,
                path=self.path,
            )
        self._identity = (found.st_dev, found.st_ino)
        return fd

    def _open_unwritable(self, exc: OSError) -> int:
        """A journal that can be read but not written (a read-only filesystem, a file
        without write permission): opened for reading, so readers' work and replays that
        append nothing answer as usual; any write is `journal_read_only` (SPEC §8)."""
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise _refuse_special(self.path, exc) from exc
        try:
            fd = os.open(self.path, _READ_FLAGS)
        except OSError:
            raise _refuse_special(self.path, exc) from exc
        self.read_only_reason = exc.strerror or "not writable"
        return fd

    def _check_writable(self) -> None:
        if self.read_only_reason is not None:
            raise StorageFailure(
                f"cannot write {self.path}: {self.read_only_reason}; nothing was changed",
                code=codes.JOURNAL_READ_ONLY,
            )

    # -- locking -----------------------------------------------------------------

    def lock(self, timeout_s: float, meanwhile: Callable[[], None] | None = None) -> None:
        """Take the exclusive flock, waiting at most `timeout_s` seconds in the kernel's
        queue of its waiters (journal/flockwait.py: never polled with sleeps), running
        `meanwhile` while the wait is queued, if it must wait."""
        if self.write_fd < 0 or self.poisoned:
            if self.closed:
                raise StorageFailure(f"the handle of {self.path} is closed", code=codes.CLOSED)
            if self.writable and self.write_fd < 0 and not self.poisoned:
                self.read_fd = self.write_fd = self._open_writer()
            self._check_usable()
        try:
            try:
                fcntl.flock(self.write_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: no thread
            except BlockingIOError:
                if not self._kernel_lock.wait(self.write_fd, timeout_s, meanwhile):
                    raise self._lock_timeout(timeout_s) from None
        except OSError as exc:
            raise StorageFailure(f"cannot lock {self.path}: {exc.strerror}") from exc
        self._locked = True
        self._check_still_named(timeout_s)

    def _lock_timeout(self, timeout_s: float) -> LockTimeout:
        """What a timed-out waiter is told: who holds the lock, and what to do."""
        pid = flock_holder_pid(self.path)
        holder = "another process"
        if pid is not None:
            holder = f"pid {pid}"
            command = process_command(pid)
            if command:
                holder += f" ({command})"
        return LockTimeout(
            lambda name: (
                f"journal {self.path} stayed locked by {holder} for {timeout_s:g} s: retry "
                f"once it finishes, give it longer with {name}, or stop that process if it "
                "hangs"
            ),
            about="lock_timeout_s",
            lock_timeout_s=timeout_s,
            holder_pid=pid,
        )

    def _check_still_named(self, timeout_s: float) -> None:
        """Under the lock: the path must still name the file this handle holds (SPEC
        §2.3). A long-lived handle whose file was renamed away, unlinked or replaced
        would otherwise append to a file nobody reads, beside a new journal at the path.
        One stat per transaction."""
        try:
            named = os.stat(self.path, follow_symlinks=False)
            if (named.st_dev, named.st_ino) == self._identity:
                return
        except FileNotFoundError:
            pass
        except OSError as exc:
            self.unlock()
            raise StorageFailure(f"cannot stat {self.path}: {exc.strerror}") from exc
        if os.fstat(self.write_fd).st_size == 0:
            # An empty file holds nothing acknowledged: another handle's refused first
            # command removed it (see close), or it was replaced before any write.
            # Open the path again, creating it if need be, and lock that instead.
            self.unlock()
            self._close_descriptors()
            self.created = False
            self._reopened = True
            self.lock(timeout_s)
            return
        self.unlock()
        raise JournalReplaced(
            f"{self.path} no longer names the journal file this handle holds (it was renamed "
            "away, unlinked or replaced); nothing was appended: reopen the journal",
            path=self.path,
        )

    def unlock(self) -> None:
        if self._locked:
            self._locked = False
            fcntl.flock(self.write_fd, fcntl.LOCK_UN)

    # -- reading -----------------------------------------------------------------

    def size(self) -> int:
        if self.read_fd < 0:  # a writer's file that does not exist yet
            return 0
        return os.fstat(self.read_fd).st_size

    def read(self, offset: int, size_bytes: int) -> bytes:
        if self.read_fd < 0:
            return b""
        try:
            return os.pread(self.read_fd, size_bytes, offset)
        except OSError as exc:
            raise StorageFailure(f"cannot read {self.path}: {exc.strerror}") from exc

    def chunks(self, offset: int, next_seq: int) -> Iterator[bytes]:
        end = self.size()
        while offset < end:
            chunk = self.read(offset, min(READ_CHUNK_BYTES, end - offset))
            if not chunk:
                return
            offset += len(chunk)
            yield chunk

    def verify_columns(self) -> None:
        """Nothing to check: a file holds only the lines."""

    def size_hint(self, offset: int, next_seq: int) -> int | None:
        return max(0, self.size() - offset)

    def tail_after(self, offset: int, seq: int, hash_hex: str) -> Tail:
        tail = self._tail_after(offset, hash_hex)
        if tail != "same" and not self.repairing:
            # Bytes another handle wrote: if its fdatasync failed and it could not cut
            # them back, no answer may stand on them (SPEC §2.3). Checked only when
            # the file changed, so a lone writer's transactions pay nothing for it.
            unsynced.refuse_if_marked(self.path)
        return tail

    def _tail_after(self, offset: int, hash_hex: str) -> Tail:
        # Every line ends with `<64 hex hash>"}\n`; the hash names the whole prefix.
        known_hash, expected = self._tail
        if known_hash != hash_hex:
            expected = f'{hash_hex}"}}\n'.encode()
            self._tail = (hash_hex, expected)
        if offset < _TAIL_BYTES:
            if offset == 0:
                return "grew" if self.size() > 0 else "same"
            return "changed"
        # One read answers both questions: is the folded prefix intact (its last line
        # still ends with its hash), and does a byte follow it.
        try:
            found = os.pread(self.read_fd, _TAIL_BYTES + 1, offset - _TAIL_BYTES)
        except OSError as exc:
            if self.read_fd < 0:  # no file (yet, or any more): nothing is ours
                return "changed"
            raise StorageFailure(f"cannot read {self.path}: {exc.strerror}") from exc
        if found == expected:
            return "same"
        return "grew" if found[:_TAIL_BYTES] == expected else "changed"

    def line_ending_at(self, offset: int, seq: int = -1) -> bytes | None:
        """The complete line (without newline) whose newline is the byte before `offset`."""
        if offset <= 0:
            return None
        start = max(0, offset - LINE_BYTES_MAX - 1)
        chunk = self.read(start, offset - start)
        if len(chunk) != offset - start or not chunk.endswith(b"\n"):
            return None
        begin = chunk.rfind(b"\n", 0, len(chunk) - 1)
        if begin < 0 and start > 0:
            return None
        return chunk[begin + 1 : -1]

    # -- writing -----------------------------------------------------------------

    def append(self, records: Sequence[PendingRecord], offset: int) -> None:
        """One write of whole lines at `offset` (the file's size), then fdatasync; for
        a new journal (`offset` 0: its genesis record) the directory entry too (SPEC
        §2.3: genesis, fsync the file, fsync the directory).

        A failed or short write is rolled back and nothing is acknowledged.
        """
        if self.poisoned or self.write_fd < 0:
            self._check_usable()
        self._check_writable()
        last = records[-1]
        data = last.line if len(records) == 1 else b"".join([r.line for r in records])
        try:
            written = os.write(self.write_fd, data)
        except OSError as exc:
            raise self._write_failed(
                offset,
                f"write to {self.path} failed: {exc.strerror}; nothing was acknowledged",
                codes.NO_SPACE if exc.errno == errno.ENOSPC else codes.IO_ERROR,
            ) from exc
        if written != len(data):
            raise self._write_failed(
                offset,
                f"short write to {self.path} ({written} of {len(data)} bytes); rolled back",
                codes.SHORT_WRITE,
            )
        self._sync_appended(offset)
        # The next transaction's tail check expects this line's end: slice it, once.
        self._tail = (last.record.hash, last.line[-_TAIL_BYTES:])
        if offset == 0:
            fsync_dir(self.path)
            self.created = False  # written: close has no empty file to remove

    def _write_failed(self, size_before: int, message: str, code: str) -> StorageFailure:
        self._roll_back(size_before)
        self.poisoned = True
        return StorageFailure(message, code=code)

    def _sync_appended(self, size_before: int) -> None:
        """fdatasync what `append` wrote after `size_before`. On failure, never retried:
        the bytes are cut back first (ftruncate, then fdatasync), so no later process
        takes them for durable ones, or, if that fails too, `<journal>.unsynced` names
        the offset and every open refuses until a repair (SPEC §2.3, fsyncgate)."""
        try:
            os.fdatasync(self.write_fd)
        except OSError as exc:
            self.poisoned = True
            raise JournalPoisoned(
                f"fdatasync of {self.path} failed: {exc.strerror}; nothing was acknowledged, "
                f"{self._cut_unsynced(size_before)}; this handle is poisoned and the next "
                "open runs recovery",
                code=codes.FSYNC_FAILED,
            ) from exc

    def _cut_unsynced(self, size_before: int) -> str:
        """Cut the file back to `size_before` after a failed fdatasync; what was done."""
        try:
            os.ftruncate(self.write_fd, size_before)
            os.fdatasync(self.write_fd)
            return f"the file was cut back to its {size_before} durable bytes"
        except OSError as exc:
            failure = exc.strerror
            if size_before == 0 and os.fstat(self.write_fd).st_size == 0:
                # A new journal cut back to nothing: no byte of it can pass for a
                # record, and close() removes the empty file this handle created.
                return "the new journal was cut back to nothing"
        try:
            size = os.fstat(self.write_fd).st_size
            marker = unsynced.mark(self.path, size_before, size)
        except OSError as exc:
            return (
                f"cutting the file back to byte {size_before} failed ({failure}) and so did "
                f"recording it ({exc.strerror}): do not use this journal before checking "
                "its disk"
            )
        return (
            f"cutting the file back to byte {size_before} failed ({failure}): {marker} "
            "names it, and every open refuses until `quotaledger repair`"
        )

    def sync(self) -> None:
        self._fdatasync(self.write_fd)

    def _fdatasync(self, fd: int) -> None:
        try:
            os.fdatasync(fd)
        except OSError as exc:
            # Never retry: the kernel may already have marked the failed pages clean, so a
            # second fdatasync could "succeed" without the data being on disk (fsyncgate).
            self.poisoned = True
            raise JournalPoisoned(
                f"fdatasync of {self.path} failed: {exc.strerror}; this handle is poisoned "
                "and the next open runs recovery",
                code=codes.FSYNC_FAILED,
            ) from exc

    def _roll_back(self, size_before: int) -> None:
        try:
            os.ftruncate(self.write_fd, size_before)
        except OSError as exc:
            self.poisoned = True
            raise JournalPoisoned(
                f"could not roll back a failed write to {self.path}: {exc.strerror}"
            ) from exc

    def load(self, records: Sequence[PendingRecord]) -> None:
        """Import into this empty journal: write the whole journal beside the path, make
        it durable and rename it into place (SPEC §2.4 item 5), so a crash leaves no
        journal or all of it, and a failure leaves nothing behind. Called under the
        lock of the (empty) file at the path; the new file is locked before it is named,
        so a writer that opens the path after the rename waits until the rename is
        durable, and one that waited on the old file finds it replaced while empty and
        opens the path again (_check_still_named)."""
        self._check_usable()
        self._check_writable()
        try:
            fd, temp = create_temp_beside(self.path, flags=_WRITE_FLAGS)
        except OSError as exc:
            raise _storage_failure(f"cannot create a file beside {self.path}", exc) from exc
        try:
            write_all(fd, b"".join([record.line for record in records]))
            os.fdatasync(fd)
            os.rename(temp, self.path)
        except OSError as exc:
            os.close(fd)
            _remove_quietly(temp)
            raise _storage_failure(
                f"import into {self.path} failed; nothing was imported", exc
            ) from exc
        self.unlock()
        self._close_descriptors()
        self.read_fd = self.write_fd = fd
        self._locked, self.created = True, False
        found = os.fstat(fd)
        self._identity = (found.st_dev, found.st_ino)
        fsync_dir(self.path)

    def load_checkpoint(self) -> Checkpoint | None:
        return read_checkpoint(checkpoint_path(self.path))

    def peek_checkpoint(self) -> tuple[int, str] | None:
        return peek_checkpoint(checkpoint_path(self.path))

    keeps_deltas = True

    def save_checkpoint(
        self, header: Header, sections: Iterable[Section], *, delta: bool
    ) -> SectionFile:
        """Checkpoints only ever cover durable records: what this handle folded may
        include lines another writer wrote but died before syncing, so sync the journal
        first (cheap when nothing is dirty; allowed on a read-only descriptor too)."""
        self.make_durable()
        path = checkpoint_path(self.path)
        try:
            return write_checkpoint(path, header, sections, delta=delta)
        except OSError as exc:
            raise _storage_failure(f"cannot write the checkpoint of {self.path}", exc) from exc

    def make_durable(self) -> None:
        """fdatasync the journal, through whichever descriptor this handle has (a
        read-only one will do): what was read from it is then on disk. Like a failed
        append's fdatasync, a failure poisons the handle and is never retried."""
        if self.poisoned:
            self._check_usable()
        fd = self.write_fd if self.write_fd >= 0 else self.read_fd
        if fd < 0:
            return  # no file yet: nothing was read
        self._fdatasync(fd)

    def _check_usable(self) -> None:
        if self.poisoned:
            raise JournalPoisoned(
                f"an earlier fdatasync of {self.path} failed; reopen the journal to recover"
            )
        if self.write_fd < 0:
            raise StorageFailure(f"{self.path} was opened read-only", code=codes.READ_ONLY)

    # -- what only a file offers (the LocalFile capability) ---------------------

    def local_fd(self) -> int | None:
        return self.read_fd if self.read_fd >= 0 else None

    def cut_tail(self, offset: int, next_seq: int, label: str) -> str:
        """Move the bytes after `offset` to `<journal>.<label>.<seq>.<unix_ns>`; truncate.

        A failure before the journal is truncated removes the copy again: the journal
        still holds the bytes, and a failed recovery or repair leaves nothing behind."""
        self._check_usable()
        self._check_writable()
        tail = self.read(offset, max(0, self.size() - offset))
        keep_path = f"{self.path}.{label}.{next_seq}.{time.time_ns()}"
        try:
            fd = os.open(keep_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
        except OSError as exc:
            raise _storage_failure(f"cannot create {keep_path}", exc) from exc
        try:
            try:
                write_all(fd, tail)
                os.fsync(fd)
            finally:
                os.close(fd)
            # The copy (file and directory entry) is durable before the journal loses the
            # bytes: a crash in between leaves two copies, never none.
            fsync_dir(keep_path)
            os.ftruncate(self.write_fd, offset)
        except OSError as exc:
            _remove_quietly(keep_path)
            raise _storage_failure(
                f"cannot move the bytes after byte {offset} of {self.path} to {keep_path}; "
                "nothing was changed",
                exc,
            ) from exc
        self.sync()
        return keep_path

    def cut_files(self, next_seq: int, label: str) -> list[tuple[int, str]]:
        prefix = f"{os.path.basename(self.path)}.{label}.{next_seq}."
        directory = os.path.dirname(self.path)
        found = []
        for name in os.listdir(directory or "."):
            stamp = name[len(prefix) :]  # cut_tail names the file by its unix_ns
            if name.startswith(prefix) and stamp.isdigit():
                found.append((int(stamp) // 1000, os.path.join(directory, name)))
        return sorted(found)

    def ensure_linked(self, timeout_s: float) -> bool:
        """Whether the last lock() found the empty file it held removed or replaced and
        locked the file the path names now instead (see _check_still_named)."""
        reopened, self._reopened = self._reopened, False
        return reopened

    # -- closing ---------------------------------------------------------------

    def _remove_if_never_written(self) -> None:
        """Remove a file this handle created but never wrote (its first command was
        refused or invalid), so such a command leaves nothing behind. Only under the
        lock, only while the file is empty and the path still names it; a writer that
        opened it meanwhile finds it unlinked after locking and creates it again."""
        try:
            if not self._locked:
                fcntl.flock(self.write_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._locked = True
            held = os.fstat(self.write_fd)
            named = os.stat(self.path, follow_symlinks=False)
            if held.st_size == 0 and (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino):
                os.unlink(self.path)
        except OSError:
            pass  # best effort: someone else holds the lock, or the path changed
        finally:
            self.unlock()

    def close(self) -> None:
        # Also when poisoned: a first command whose write failed (ENOSPC) was rolled
        # back to an empty file, which must not stay behind either.
        if self.created and self.write_fd >= 0 and not self.closed:
            self._remove_if_never_written()
        self.closed = True
        self.unlock()
        self._close_descriptors()


def flock_holder_pid(path: str) -> int | None:
    """The pid holding a flock on `path`, from /proc/locks (Linux); None when unknown.

    /proc/locks names the process that took the lock; a lock inherited across fork
    stays under the parent's pid. Waiting requests (lines with `->`) are skipped."""
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii") as locks:
            lines = locks.read().splitlines()
    except OSError:
        return None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            try:
                return int(fields[4])
            except ValueError:
                return None
    return None


def process_command(pid: int, words: int = 4) -> str | None:
    """The first words of a process's command line, if this user may read it."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return None
    text = " ".join(arg.decode(errors="replace") for arg in argv[:words] if arg)
    return text or None
