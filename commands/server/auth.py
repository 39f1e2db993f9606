"""Bearer tokens (SPEC §11): compared in constant time, never logged or echoed."""

import enum
import hmac
from pathlib import Path

from quotaledger.journal import InvalidInput, codes


class Access(enum.Enum):
    NONE = 0
    READ = 1
    WRITE = 2


def read_token(path: str) -> bytes:
    """A token file's content, a trailing newline ignored."""
    try:
        token = Path(path).read_bytes().rstrip(b"\r\n")
    except OSError as error:
        raise InvalidInput(
            f"cannot read the token file {path}: {error.strerror}", code=codes.INVALID_INPUT
        ) from None
    if not token:
        raise InvalidInput(f"the token file {path} is empty", code=codes.INVALID_INPUT)
    return token


class Tokens:
    """The write token and the read token; with neither, every caller may write
    (loopback or a unix socket only: `listen.check_exposure`)."""

    def __init__(self, write: bytes | None, read: bytes | None) -> None:
        self.write = write
        self.read = read

    def access(self, authorization: bytes | None) -> Access:
        if self.write is None and self.read is None:
            return Access.WRITE
        scheme, _, given = (authorization or b"").partition(b" ")
        if scheme.lower() != b"bearer" or not given:
            return Access.NONE
        # Both compared whatever the first gives: the time says nothing of which matched.
        is_write = self.write is not None and hmac.compare_digest(given, self.write)
        is_read = self.read is not None and hmac.compare_digest(given, self.read)
        if is_write:
            return Access.WRITE
        return Access.READ if is_read else Access.NONE
