"""Whether a goal's events run ahead of this machine's clock (SPEC §2.2, `clock_ahead`).

Implicit time is `max(now, the goal's last event)` and never refused, so one event a
machine with a clock a day ahead stamped carries every later event of its goal a day
ahead, and its 60 s window stays frozen. On a file journal (stamped by every writer's
own clock) `inspect` and `goals` flag such a goal (`next_action: "check_clocks"`); on
PostgreSQL implicit time is the database server's one clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quotaledger.journal import Journal
from quotaledger.journal.clock import max_clock_skew_us, parse_at
from quotaledger.journal.store import local_file_of


def clock_ahead_of(journal: Journal[Any], now_us: int) -> Callable[[str], bool]:
    """For each goal: is its last event more than the clock-skew bound ahead of
    `now_us` (always false off a file journal)?"""
    if local_file_of(journal.store) is None:
        return lambda goal: False
    bound_us = now_us + max_clock_skew_us()
    last_at = journal.head.goal_last_at

    def ahead(goal: str) -> bool:
        last = last_at.get(goal)
        return last is not None and parse_at(last) > bound_us

    return ahead
