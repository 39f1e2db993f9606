"""Every limit the engine enforces, and those of the faces over it (what the CLI, a
client and the server read before a request reaches the engine), in one place (the
domain's values are projections/limits.py).

The relationships between them are checked once, at import, so a change to one
limit that breaks another fails loudly instead of corrupting a journal later. This
module imports nothing: every command, the lean CLI client included, reads it.
"""

from __future__ import annotations

FORMAT = "quotaledger/1"
FORMAT_VERSION = 1

LINE_BYTES_MAX = 1 << 20
"""A journal line (including its newline) never exceeds 1 MiB."""

BATCH_EVENTS_MAX = 100_000
"""Events one transaction may append (one write, one fdatasync)."""

BATCH_BYTES_MAX = 256 << 20
"""Bytes one transaction may append."""

LOCK_TIMEOUT_S_DEFAULT = 30.0
LOCK_TIMEOUT_S_MAX = 86_400.0
"""A day: a bounded wait (PostgreSQL's lock_timeout tops out near 24.8 days)."""

CLOCK_SKEW_S_DEFAULT = 300
CLOCK_SKEW_S_MAX = 86_400
"""How far ahead of the wall clock an explicit time on a writer may be (SPEC §2.2;
env QUOTALEDGER_MAX_CLOCK_SKEW_S): one far-future event would stamp every later
event of its goal and freeze its 60 s window."""

CHECKPOINT_EVERY_EVENTS = 10_000
"""Writers refresh the checkpoint once this many records are past it."""

READ_CHUNK_BYTES = 8 << 20
"""Bytes read from a journal file at a time while folding."""

NAME_BYTES_MAX = 255
"""The longest file name Linux filesystems take (NAME_MAX)."""
COMPANION_NAME_BYTES_EXTRA = len(".checkpoint.delta") + len(".tmp.") + 7 + 1 + 32
"""The most a file beside a journal adds to its name: its checkpoint delta's temporary
file, `<name>.checkpoint.delta.tmp.<pid>.<32 hex digits>` (a pid has at most 7)."""
JOURNAL_NAME_BYTES_MAX = NAME_BYTES_MAX - COMPANION_NAME_BYTES_EXTRA
"""A journal file's name leaves room for its companions' (checkpoint, `.unsynced`
marker, temporary files): a longer one would fail later, as if a write had."""

INTEGER_DIGITS_MAX = 30
"""An integer an input may carry (a token count, a seq, seconds): every bound is far
below 10^30, so a longer one is refused before it is ever printed or converted
(Python refuses to print one of more than 4,300 digits)."""

GENESIS_PREV = "0" * 64

# -- what a user hands in, before it is parsed (SPEC §8) ----------------------------------

NUMBER_CHARS_MAX = 40
"""A number on the command line or in a JSON body: longer than any count, seq or
duration takes (10^12 has 13 digits, a float's text ~25 characters), so a longer one is
refused before it is converted."""
JSON_DEPTH_MAX = 32
"""Deeper than any usage object or header map a provider sends (they are 2-3 deep)."""
INPUT_CHARS_MAX = 1 << 20
"""The most a `FILE|-` input option (`--usage`, `--provider-headers`) reads: a usage
body or a header block is a few KiB; anything larger is not one, and no more would fit
in the one journal line its event becomes."""

# -- the server (SPEC §11) ----------------------------------------------------------------

BODY_BYTES_MAX = LINE_BYTES_MAX
"""A request body over 1 MiB is refused (413) unread: no event can be larger."""
HEAD_BYTES_MAX = 16 << 10
"""A request's line and headers together: over this, 431 and the connection closed."""
REQUEST_S_MAX = 60.0
"""A connection that has not completed its request within this long of its first
byte (or of connecting) is closed, without disturbing any other (slowloris)."""
KEEP_ALIVE_S = 75.0
"""An idle keep-alive connection is closed after this long (runners keep theirs)."""
DRAIN_S = 10.0
"""SIGTERM: what is waiting is committed and answered within this many seconds."""
RETRY_AFTER_BUSY_S = 1
"""Retry-After on a 503 a retry can cure (a lock timeout, a server shutting down)."""
FIRST_LINES_WAIT_S = 1.0
"""How long the log's answer waits for its first lines (an error still gets its status)
before the headers go: a follower of a quiet journal sees them at once after that."""
LOG_CHUNK_BYTES = 64 << 10
"""The log is sent in chunks of about this size (or as each commit's records come)."""
LOG_CHUNKS_AHEAD = 8
"""At most this many chunks wait for a slow client: the reader thread waits too."""
FOLLOW_LOOK_S = 0.5
"""A server's follower looks for records other writers appended at least this often."""
FOLLOW_POLL_S = 0.2
"""How often a local `log --follow` looks for appended records."""
TOKEN_FILE_BYTES_MAX = 4096
"""A bearer token is a line of at most a few hundred bytes: a token file holding more
is not one (`serve --token-file`)."""
LISTEN_BACKLOG = 4096
"""Connections the kernel queues before the server accepts them (many runners at once)."""
MAX_BATCH_DEFAULT = 1024
"""At most this many requests are committed together (`serve --max-batch`)."""
MAX_BATCH_MAX = 1_000_000
"""The largest `--max-batch` accepted."""

# -- a client of a server (SPEC §11) ------------------------------------------------------

READ_TIMEOUT_S = 120.0
"""How long a call waits for its answer: a commit waits for the lock (30 s by
default) and its batch, so well beyond either."""

assert BATCH_BYTES_MAX >= LINE_BYTES_MAX
assert READ_CHUNK_BYTES >= 2 * LINE_BYTES_MAX
assert LOCK_TIMEOUT_S_DEFAULT < LOCK_TIMEOUT_S_MAX
assert BODY_BYTES_MAX == LINE_BYTES_MAX, "a body is one event's line, no more"
assert INPUT_CHARS_MAX <= LINE_BYTES_MAX, "an input option fits in one journal line"
assert HEAD_BYTES_MAX < BODY_BYTES_MAX
assert 1 <= MAX_BATCH_DEFAULT <= MAX_BATCH_MAX
assert READ_TIMEOUT_S > LOCK_TIMEOUT_S_DEFAULT, "a call outwaits the lock its commit waits for"
assert JOURNAL_NAME_BYTES_MAX >= 128

# -- waiting in a queue (SPEC §12.2) ------------------------------------------------------

QUEUE_TTL_S_MAX = 86_400
"""How long an entry may wait: `--queue-ttl-s` is 1 to this."""
QUEUE_TTL_S_DEFAULT = 600
WAIT_S_MAX = 86_400
"""`--wait-timeout-s` (the API's `wait_s`) is 1 to this."""
WAIT_S_DEFAULT = 300
WAIT_TTL_MARGIN_S = 60
"""With a wait, the ttl defaults to the wait plus this (at most QUEUE_TTL_S_MAX)."""

WAIT_POLL_S_MAX = 1.0
"""A waiting client polls at most this far apart (sooner at its estimate)."""
HTTP_WAIT_S_MAX = 60
"""A server holds one HTTP request at most this long; a longer wait polls again."""
assert HTTP_WAIT_S_MAX <= WAIT_S_MAX <= QUEUE_TTL_S_MAX
