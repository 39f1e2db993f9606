"""What the CLI reads and checks before any command runs, whether it runs here or is a
client of a server (quotaledger.lean.remote_call): a `FILE|-` option's text, one reader of
standard input, and observe's counts. Loads only the error types.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Any

from quotaledger.journal import codes
from quotaledger.journal.environment import JSON_ENV
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.limits import INPUT_CHARS_MAX

TRUE_WORDS = ("1", "true", "t", "yes", "y", "on")
FALSE_WORDS = ("0", "false", "f", "no", "n", "off")
"""A boolean environment variable's words, as click reads them."""


def env_json() -> bool | None:
    """QUOTALEDGER_JSON read as click reads a boolean environment variable (unset or
    empty: False); None for a value click refuses (`2`): its parser says so."""
    value = os.environ.get(JSON_ENV, "").strip().lower()
    if value in TRUE_WORDS:
        return True
    return False if not value or value in FALSE_WORDS else None


_INPUT_ALONE = {
    "--usage": "the provider's usage object (or the response body holding it)",
    "--provider-headers": "the response's headers",
}
"""What a `FILE|-` option should hold, for its over-size message."""
_INPUT_CODE = {"--usage": codes.INVALID_USAGE, "--provider-headers": codes.INVALID_PROVIDER_HEADERS}
"""A `FILE|-` option's one code (SPEC §8), whatever is wrong: the file cannot be read,
is not UTF-8 or is over 1 MiB as much as its content is not a report."""


def read_input(option: str, value: str | None) -> str | None:
    """The text of a `FILE|-` option: the file, or standard input for `-` (exit 2 if it
    cannot be read, is not UTF-8, or is over 1 MiB); None when the option is not given."""
    if value is None:
        return None
    try:
        text = sys.stdin.read(INPUT_CHARS_MAX + 1) if value == "-" else _read_file(option, value)
    except (OSError, UnicodeDecodeError) as exc:
        where = "standard input" if value == "-" else repr(value)
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInput(
            f"{option}: cannot read {where}: {detail}", code=_input_code(option), option=option
        ) from None
    if len(text) > INPUT_CHARS_MAX:
        raise InvalidInput(
            f"{option}: more than 1 MiB; give {_INPUT_ALONE.get(option, 'the input')} alone",
            code=_input_code(option),
            option=option,
        )
    return text


def _read_file(option: str, path: str) -> str:
    """A `FILE` option's text, read as far as one past the limit. A FIFO is read only
    if something writes it (a shell's `<(command)` does): one with no writer would
    block for ever, so it is refused at once."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        start = b""
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            try:
                start = os.read(fd, 65536)
            except BlockingIOError:
                pass  # a writer that has written nothing yet: wait for it
            else:
                if not start:
                    raise InvalidInput(
                        f"{option}: {path!r} is a FIFO that nothing writes; give a file, "
                        "or - for standard input",
                        code=_input_code(option),
                        option=option,
                    )
        os.set_blocking(fd, True)
        cap = 4 * INPUT_CHARS_MAX + 4  # UTF-8 takes at most 4 bytes a character
        data = start + handle.read(cap - len(start))
    # Cut at the cap, a character may be split: it is over the limit anyway.
    return data.decode("utf-8", "ignore" if len(data) >= cap else "strict")


def _input_code(option: str) -> str:
    return _INPUT_CODE.get(option, codes.INVALID_OPTION)


STDIN_OPTIONS = {"usage": "--usage", "provider_headers": "--provider-headers"}
"""The `FILE|-` options, by parameter name: `-` reads standard input."""


def check_one_stdin_reader(options: dict[str, Any]) -> None:
    """At most one option reads standard input (SPEC §8): the first would take it all,
    and the second would read nothing, silently."""
    readers = [flag for name, flag in STDIN_OPTIONS.items() if options.get(name) == "-"]
    if len(readers) > 1:
        raise InvalidInput(
            f"{' and '.join(readers)} both read standard input (-); give one of them a file",
            code=codes.USAGE,
        )


def check_observe_counts(options: dict[str, Any]) -> None:
    """observe's counts (SPEC §3.5): a runner states all three, zero included (a
    zero-token measured observation is a heartbeat, never a forgotten flag), unless
    --usage gives the provider's usage instead or the observation is unmetered (its
    tokens unknown). The API's rule, in the same words (ObserveRequest.check)."""
    if options.get("coverage") == "unmetered":
        return
    counts = {
        "--uncached-input": options.get("uncached_input"),
        "--cached-input": options.get("cached_input"),
        "--output": options.get("output"),
    }
    missing = [flag for flag, value in counts.items() if value is None]
    if options.get("usage") is None and missing:
        raise InvalidInput(
            "observe needs --uncached-input, --cached-input and --output (zero "
            f"included) or --usage; missing {', '.join(missing)}",
            code=codes.USAGE,
        )
