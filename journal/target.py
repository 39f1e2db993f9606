"""What a `--journal` value can name (SPEC §8, §11): a file path, a postgresql:// URL,
or a server (http://, https://, unix:PATH).

A value that cannot name a journal — empty, a file path whose directory does not
exist, a URL of another scheme (`mysql://`, `file://`) — is the user's to fix:
exit 2 for every command, checked before anything is opened. (An existing journal
that cannot be read is the journal's problem: exit 3, found when it is opened.)
"""

from __future__ import annotations

import os
import re

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.limits import JOURNAL_NAME_BYTES_MAX

DEFAULT_JOURNAL = "./quotaledger.jsonl"
PG_SCHEMES = ("postgresql://", "postgres://")
REMOTE_SCHEMES = ("http://", "https://", "unix:")
"""A `quotaledger serve` to be a client of (SPEC §11), not a journal to open."""
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_PASSWORD = re.compile(r"(://[^:/@?#]*):[^@/?#]*@")


def is_pg_url(target: str) -> bool:
    return target.startswith(PG_SCHEMES)


def is_remote_target(target: str) -> bool:
    return target.startswith(REMOTE_SCHEMES)


def check_target(target: str, option: str | None = None) -> None:
    """Refuse (InvalidInput, exit 2) a value that cannot name a journal: named as the
    caller's `option` (the CLI's `--journal`), else as the engine's parameter `target`."""
    word = option or "target"
    context = {"option": option} if option else {"parameter": "target"}
    if not target:
        raise InvalidInput(f"{word} is empty", code=codes.INVALID_OPTION, **context)
    if is_pg_url(target):
        return
    if is_remote_target(target):
        if target.rstrip("/") in ("http:/", "https:/", "unix:"):
            raise InvalidInput(
                f"{word} {target}: names no server", code=codes.INVALID_JOURNAL_URL, **context
            )
        return
    scheme = _SCHEME.match(target)
    if scheme is not None:
        shown = _PASSWORD.sub(r"\1:***@", target)
        raise InvalidInput(
            f"{word} {shown}: {scheme.group(0)} is not a journal store; give a file path "
            "or a postgresql:// URL",
            code=codes.INVALID_JOURNAL_URL,
            **context,
        )
    name = os.path.basename(target)
    try:
        name_bytes = len(os.fsencode(name))
    except UnicodeEncodeError:
        name_bytes = len(name.encode("utf-8", "surrogatepass"))
    if name_bytes > JOURNAL_NAME_BYTES_MAX:
        shown = name[:20] + f"... ({name_bytes} bytes)"
        raise InvalidInput(
            f"{word} {shown}: a journal's file name takes at most {JOURNAL_NAME_BYTES_MAX} "
            "bytes (its checkpoint and temporary files beside it add to it)",
            code=codes.INVALID_JOURNAL_PATH,
            **context,
        )
    directory = os.path.dirname(target) or "."
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise InvalidInput(
            f"{word} {target}: directory {directory} {what}",
            code=codes.INVALID_JOURNAL_PATH,
            **context,
        )


def follow_up_journal(target: str) -> tuple[list[str], bool]:
    """The `--journal` arguments a command printed for the user to run needs (SPEC §8),
    and whether a password was removed from them.

    A file path goes as an absolute path (quoted when the line is joined), so that the
    line means this journal from any directory, unless it is the default; a
    PostgreSQL URL always goes, without its password: the line is meant
    to be shown, logged and pasted, and libpq takes the password from PGPASSWORD or
    ~/.pgpass instead.
    """
    if not is_pg_url(target):
        if os.path.abspath(target) == os.path.abspath(DEFAULT_JOURNAL):
            return [], False
        return ["--journal", os.path.abspath(target)], False
    rest, hash_mark, fragment = target.partition("#")
    base, _, query = rest.partition("?")
    kept = [item for item in query.split("&") if item and not item.startswith("password=")]
    without = _PASSWORD.sub(r"\1@", base)
    without += ("?" + "&".join(kept) if kept else "") + hash_mark + fragment
    return ["--journal", without], without != target
