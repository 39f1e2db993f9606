"""Waiting in the queue (SPEC §12.2 `--wait`): poll until admitted or the wait is over.

Shared by every face that waits on its own side (the API and the CLI on a journal, a
client of a server between its held requests). It imports nothing of the engine: a
client of a server uses it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.limits import (
    QUEUE_TTL_S_DEFAULT,
    QUEUE_TTL_S_MAX,
    WAIT_POLL_S_MAX,
    WAIT_TTL_MARGIN_S,
)

A = TypeVar("A")


def wait_for_admission(
    poll: Callable[[float], A],
    pause_s: Callable[[A], float | None],
    wait_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> A:
    """Poll (`poll(seconds left)`: queue, or ask again) until an answer needs no more
    waiting (`pause_s` None: admitted, or refused outright) or `wait_s` is over; the
    last answer. Between polls it sleeps what `pause_s` says (until the estimate),
    never more than WAIT_POLL_S_MAX and never past the end of the wait."""
    deadline = clock() + wait_s
    answer = poll(wait_s)
    while True:
        pause = pause_s(answer)
        remaining = deadline - clock()
        if pause is None or remaining <= 0:
            return answer
        sleep(max(0.0, min(pause, WAIT_POLL_S_MAX, remaining)))
        answer = poll(max(0.0, deadline - clock()))


def pause_until(estimate_us: int | None, at_us: int) -> float:
    """How long a queued run waits before it polls again: until its estimate if that is
    ahead, else the longest pause (an estimate reached that did not admit it, or none)."""
    if estimate_us is None or estimate_us <= at_us:
        return WAIT_POLL_S_MAX
    return (estimate_us - at_us) / 1e6


def queue_ttl_s(
    *, queue: bool, queue_ttl_s: int | None, wait_s: int | None, lease_s: int | None
) -> int:
    """The ttl an entry of an `admit` would get, its options checked (exit 2 before
    anything is read): a wait queues; a queue needs a lease (whoever waits may be gone
    when it is admitted); the ttl is at least the wait."""
    queue = queue or wait_s is not None
    if queue_ttl_s is not None and not queue:
        raise InvalidInput(
            lambda names: (
                f"{names('queue_ttl_s')} is the ttl of a queue entry: give {names('queue')} too"
            ),
            code=codes.INVALID_OPTION,
            about=("queue_ttl_s", "queue"),
        )
    if queue and lease_s is None:
        raise InvalidInput(
            lambda names: (
                f"{names('queue')} needs {names('lease_s')}: whoever waits may be "
                "gone when the run is admitted, and a lease frees what it would hold"
            ),
            code=codes.LEASE_REQUIRED,
            about=("queue", "lease_s"),
        )
    waited_s = wait_s or 0
    if queue_ttl_s is not None:
        if queue_ttl_s < waited_s:
            raise InvalidInput(
                lambda names: (
                    f"{names('queue_ttl_s')} {queue_ttl_s} is shorter than the wait "
                    f"({names('wait_s')} {waited_s}): the entry would expire first"
                ),
                code=codes.INVALID_OPTION,
                about=("queue_ttl_s", "wait_s"),
            )
        return queue_ttl_s
    if waited_s:
        return min(waited_s + WAIT_TTL_MARGIN_S, QUEUE_TTL_S_MAX)
    return QUEUE_TTL_S_DEFAULT
