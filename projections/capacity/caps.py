"""How a configure changes a goal's spend caps (SPEC §12.4).

`configure --cap-tokens N --cap-usd X [--cap-since T]` sets caps, `--remove-cap
tokens|usd` removes one; like the other config fields, what is not given stays.
`cap_since` defaults to the time the first cap was configured (it stays while any cap
does), and a past one counts what was observed since: the configure reads those
observations once and records what it counted (`Caps.counted`), so the fold only
keeps the running total from there, and a replay never needs older history.
"""

import bisect
from collections.abc import Callable, Iterable
from typing import Any

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.clock import parse_at
from quotaledger.projections.capacity.events import CapacityObserved, CapCounted, Caps, PriceSet
from quotaledger.projections.capacity.fold import (
    PRICES_KEY,
    WINDOW_US,
    ZERO_TOTALS,
    CapacityState,
    GoalCapacity,
    Totals,
    apply,
)
from quotaledger.projections.capacity.money import dollars_micro, micro_of, usd_number
from quotaledger.projections.capacity.pool_events import PoolMembership

CAP_UNITS = ("tokens", "usd")
CAP_FIELDS = ("cap_tokens", "cap_usd", "cap_since")
"""The caps' fields as `configure`'s `changes` names them."""


def spent_totals(goal: GoalCapacity) -> Totals:
    """What the goal spent since its `cap_since` (raw sums as `Totals`); its whole
    history without caps."""
    caps = goal.caps
    if caps is None:
        return goal.totals
    c = caps.counted
    counted = (c.uncached_input, c.cached_input, c.cache_write_input, c.output, 0, 0, 0)
    counted += (c.unpriced_tokens, micro_of(c.usd) or 0)  # type: ignore[assignment]
    since = goal.cap_totals
    return tuple(  # type: ignore[return-value]
        a + n - s for a, n, s in zip(counted, goal.totals, since, strict=True)
    )


def counted_from_samples(goal: GoalCapacity, since_us: int) -> Totals | None:
    """The sums of the goal's observations at or after `since_us`, from the samples the
    fold keeps; None when some of those may have been dropped (older than the latest
    event's 60 s window): then the journal must be read."""
    if since_us <= goal.last_at_us - WINDOW_US:
        return None
    samples = goal.samples
    index = bisect.bisect_left(samples, since_us, key=lambda sample: sample.at_us)
    before = samples[index - 1].totals if index > 0 else goal.base_totals
    return tuple(a - b for a, b in zip(goal.totals, before, strict=True))  # type: ignore[return-value]


def counted_of(totals: Totals) -> CapCounted:
    return CapCounted(
        uncached_input=totals[0],
        cached_input=totals[1],
        cache_write_input=totals[2],
        output=totals[3],
        unpriced_tokens=totals[7],
        usd=usd_number(totals[8]),
    )


def _invalid(message: str, about: str) -> InvalidInput:
    return InvalidInput(
        lambda name: message.format(name=name), code=codes.INVALID_CONFIG, about=about
    )


def recap(
    goal: GoalCapacity,
    *,
    cap_tokens: int | None,
    cap_usd: Any,
    cap_since: str | None,
    remove: Iterable[str],
    at: str,
    counted_since: Callable[[int], Totals],
) -> Caps | None:
    """The caps after a configure (None: no cap). `cap_since` is canonical, at or before
    `at`; `counted_since(t)` sums the goal's observations since t (read once)."""
    tokens, usd = _amounts(goal.caps, cap_tokens, cap_usd, list(remove))
    if tokens is None and usd is None:
        if cap_since is not None:
            raise _invalid("{name} needs a cap (cap_tokens or cap_usd)", "cap_since")
        return None
    current = goal.caps
    since = cap_since
    if since is None:
        since = current.cap_since if current is not None else at
    if since > at:
        raise _invalid(f"{{name}} {since} is after the configure's time {at}", "cap_since")
    if current is not None and since == current.cap_since:
        counted = spent_totals(goal)
    else:
        counted = counted_since(parse_at(since))
    return Caps(cap_tokens=tokens, cap_usd=usd, cap_since=since, counted=counted_of(counted))


def _amounts(
    current: Caps | None, cap_tokens: int | None, cap_usd: Any, removed: list[str]
) -> tuple[int | None, float | None]:
    """The caps' amounts after the configure: what is given, else what was."""
    for unit in removed:
        if unit not in CAP_UNITS:
            raise _invalid(f"{{name}} takes tokens or usd, got {unit!r}", "remove_cap")
    if "tokens" in removed and cap_tokens is not None:
        raise _invalid("{name} given for a cap being removed", "cap_tokens")
    if "usd" in removed and cap_usd is not None:
        raise _invalid("{name} given for a cap being removed", "cap_usd")
    tokens = current.cap_tokens if current is not None else None
    usd = current.cap_usd if current is not None else None
    if cap_tokens is not None:
        tokens = cap_tokens
    if cap_usd is not None:
        usd_micro = micro_of(cap_usd)
        if usd_micro is None:
            raise _invalid(
                f"{{name}} must be dollars from 0 with at most 6 decimals, got {cap_usd!r}",
                "cap_usd",
            )
        usd = usd_number(usd_micro)
    return (None if "tokens" in removed else tokens), (None if "usd" in removed else usd)


def cap_values(caps: Caps | None) -> dict[str, Any]:
    return {
        "cap_tokens": None if caps is None else caps.cap_tokens,
        "cap_usd": None if caps is None else caps.cap_usd,
        "cap_since": None if caps is None else caps.cap_since,
    }


def cap_changes(old: Caps | None, new: Caps | None) -> dict[str, list[Any]]:
    before, after = cap_values(old), cap_values(new)
    return {n: [before[n], after[n]] for n in CAP_FIELDS if before[n] != after[n]}


def counted_in_records(records: Iterable[tuple[Any, Any]], goal: str, since_us: int) -> Totals:
    """The sums of `goal`'s observations at or after `since_us` among `records` (every
    record of the journal, in order, with its payload): the prices folded on the way,
    each observation priced by the latest of its model before it (SPEC §12.4)."""
    return _counted(records, since_us, lambda record, payload: record.goal == goal)


def pool_counted_in_records(records: Iterable[tuple[Any, Any]], pool: str, since_us: int) -> Totals:
    """The sums of the observations at or after `since_us` of the goals that were
    members of `pool` when they were recorded (SPEC §12.1), priced as a goal's."""
    members: set[str] = set()

    def note(record: Any, payload: Any) -> bool:
        if record.goal == pool and isinstance(payload, PoolMembership):
            if payload.left:
                members.discard(payload.goal)
            else:
                members.add(payload.goal)
            return False
        return record.goal in members

    return _counted(records, since_us, note)


def _counted(
    records: Iterable[tuple[Any, Any]], since_us: int, counts: Callable[[Any, Any], bool]
) -> Totals:
    prices = CapacityState()
    sums = [0] * len(ZERO_TOTALS)
    for record, payload in records:
        if record.goal is None:
            if isinstance(payload, PriceSet):
                apply(prices, record, payload)
            continue
        if not counts(record, payload) or not isinstance(payload, CapacityObserved):
            continue
        if parse_at(record.at) < since_us:
            continue
        uncached, cached = payload.uncached_input, payload.cached_input
        cache_write, output = payload.cache_write_input, payload.output
        book = prices.prices.get(PRICES_KEY)
        price = (
            None
            if payload.model is None or book is None
            else book.in_force(payload.model, record.seq)
        )
        sums[0] += uncached
        sums[1] += cached
        sums[2] += cache_write
        sums[3] += output
        if price is None:
            sums[7] += uncached + cached + cache_write + output
        else:
            sums[8] += dollars_micro(price.per_mtok_micro, uncached, cached, cache_write, output)
    return tuple(sums)  # type: ignore[return-value]
