"""Every limit of the domain's values, in one place (the engine's own are journal/limits.py).

The payload types' constraints, the config ranges and the messages that state a
bound all read these; a message says a bound with `power_of_ten` or `byte_size`,
never a hand-written figure, so changing a limit changes every message about it.
"""

from quotaledger.journal.identifier import IDENTIFIER_CHARS_MAX as IDENTIFIER_CHARS_MAX
from quotaledger.journal.limits import LINE_BYTES_MAX
from quotaledger.journal.limits import QUEUE_TTL_S_MAX as _QUEUE_TTL_S_MAX
from quotaledger.journal.limits import WAIT_S_MAX as _WAIT_S_MAX

# -- the value rules every payload shares (SPEC §8) -------------------------------------

# IDENTIFIER_CHARS_MAX: the engine's, which checks every event's goal (journal/identifier.py).
FREE_TEXT_BYTES_MAX = 4096
TOKEN_COUNT_MAX = 10**12
"""A token count (or any per-minute rate, and a settlement amount) is 0 to this."""

# -- capacity (SPEC §3.1, §3.6) -----------------------------------------------------------

CASES_MAX = 1024
QUOTA_TPM_MAX = TOKEN_COUNT_MAX
"""A quota, target or reserve of any dimension, per minute."""
COOLDOWN_S_LIMIT = 86_400
"""`cooldown_max_s` may not exceed a day (SPEC §3.1)."""
OBSERVATION_AGE_S_MAX = 86_400
LEASE_S_MAX = 366 * 86_400
RETRY_AFTER_S_MAX = 10**9

# -- pools (SPEC §12.1) -------------------------------------------------------------------

SHARE_PLACES = 4
"""A pool share, borrowing or lending limit is a decimal 0..1 with at most this many places."""
SHARE_UNITS: int = 10**SHARE_PLACES
"""Shares are kept and compared exactly, in units of 10^-SHARE_PLACES."""
PRIORITY_MIN = -1000
PRIORITY_MAX = 1000

# -- the queue (SPEC §12.2): the engine's, as a client of a server needs them too --------

QUEUE_TTL_S_MAX = _QUEUE_TTL_S_MAX
WAIT_S_MAX = _WAIT_S_MAX

# -- host continuation (SPEC §4) ----------------------------------------------------------

HANDOFF_BYTES_MAX = 256 << 10
assert HANDOFF_BYTES_MAX * 2 < LINE_BYTES_MAX, "a handoff must fit in one journal line"
PID_MAX = 2**31 - 1
ATTEMPTS_MAX = 10_000
"""A phase's `max_attempts`: far beyond any retry policy, within every JSON reader's
exact integers."""
EXIT_CODE_MAX = 255
SIGNAL_MAX = 128
"""A process killed by signal N: N is 1 to this."""

# -- settlement (SPEC §5) -----------------------------------------------------------------

WINDOW_HOURS_MAX = 24 * 366 * 10
"""The longest budget window accepted: ten years."""

# -- probes (SPEC §6) ---------------------------------------------------------------------

COMMAND_ARGS_MAX = 1024
CANDIDATES_MAX = 256
BYTES_MAX = 1 << 62
PATH_CHARS_MAX = 4096
INTERVAL_MS_MIN = 10
INTERVAL_MS_MAX = 10_000
INTERVAL_MS_DEFAULT = 100
"""How often the probe's sampler reads the group's memory."""
TIMEOUT_S_MAX = 7 * 24 * 3600.0
TERM_GRACE_S = 2.0
"""After SIGTERM to the group, how long members get before SIGKILL."""
SAMPLES_KEPT_MAX = 100_000
"""Rounds kept in memory for the sidecar. When full, every other kept round is
dropped and only every `stride`-th later round is kept, so a long run keeps an evenly
thinned picture of the whole run in bounded memory; the counts and the peak still
cover every round."""
HASH_CHUNK_BYTES = 1 << 20
"""Bytes of a candidate file hashed at a time."""
ERROR_TEXT_MAX = 1024
"""Characters of an OS error kept as the sidecar's `error` (a FreeText)."""
assert ERROR_TEXT_MAX * 4 <= FREE_TEXT_BYTES_MAX, "an error's text (UTF-8) is free text"
assert INTERVAL_MS_MIN <= INTERVAL_MS_DEFAULT <= INTERVAL_MS_MAX


def power_of_ten(value: int) -> str:
    """`value` as a message states a bound: 10^12 for 1000000000000, else its digits."""
    exponent = len(str(value)) - 1
    return f"10^{exponent}" if value == 10**exponent else str(value)


def byte_size(count: int) -> str:
    """A size in bytes as a message states it: 4 KiB, 1 MiB, else the bytes."""
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift and count % (1 << shift) == 0:
            return f"{count >> shift} {unit}"
    return f"{count} bytes"
