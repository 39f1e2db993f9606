"""The pools over the open journal (SPEC §12.1): `pool configure`, and the rules a
goal's membership follows (`configure --pool`, `--leave-pool`), which
`services.capacity_state` applies in the goal's own configure."""

from __future__ import annotations

import difflib
from typing import Any

import msgspec

from quotaledger.journal import InvalidInput, Journal, codes
from quotaledger.journal.clock import canonical_at, check_not_in_future, parse_at, wall_us
from quotaledger.journal.clock import canonical_at as _canonical_at
from quotaledger.journal.store import PendingRecord
from quotaledger.projections import capacity as cap
from quotaledger.projections.capacity.pool_config import (
    pool_config_of,
    pool_flat,
    pool_reconfigure,
)
from quotaledger.projections.ledger import LedgerState
from quotaledger.projections.limits import SHARE_UNITS
from quotaledger.services.base import KNOWN_GOALS_SHOWN, ServiceBase
from quotaledger.services.pool_views import pool_context, pool_last_us, pool_view
from quotaledger.services.queueing import final_records, promote, promoted_of
from quotaledger.usecases.decode import event_or_unset
from quotaledger.usecases.pools import (
    PoolConfigureAnswer,
    PoolConfigureRequest,
    PoolConfigView,
    PoolLimitView,
    PoolsAnswer,
    PoolsRequest,
    PoolView,
)

POOL_FIELD_NAMES = (
    *(f"{part}_{d}" for d in cap.DIMENSIONS for part in ("quota", "target")),
    "cached_input_weight",
    "cooldown_base_s",
    "cooldown_max_s",
)
CAP_NAMES = ("cap_tokens", "cap_usd", "cap_since")


class PoolsService(ServiceBase):
    """Pools: named limits their member goals share."""

    def pool_configure(self, request: PoolConfigureRequest) -> PoolConfigureAnswer:
        """Create or change a pool: only the fields given change (SPEC §12.1)."""
        name = request.pool
        fields = {field: getattr(request, field) for field in POOL_FIELD_NAMES}
        capping = any(
            value not in (None, [])
            for value in (
                request.cap_tokens,
                request.cap_usd,
                request.cap_since,
                request.remove_cap,
            )
        )
        if all(v is None for v in fields.values()) and not request.remove_limit and not capping:
            raise InvalidInput(
                "nothing to configure: give a pool's limits, cooldown or caps",
                code=codes.INVALID_CONFIG,
            )
        check_choices(request)
        with self.journal.transaction() as txn:
            require_not_goal(self.journal, txn.state, name)
            pool = txn.state.pools.pools.get(name)
            current = None if pool is None else pool.config
            members = () if pool is None else tuple(pool.members)
            at_text = txn.time_for(name, request.at, members)
            flat, explicit = pool_reconfigure(current, fields, remove_limits=request.remove_limit)
            caps = caps_after(request, current, at_text, txn.wall_us)
            if caps and (current is None or caps["cap_since"] != current.cap_since):
                caps |= self._counted(txn.state, name, caps["cap_since"], at_text)
            elif caps and current is not None:  # the same cap_since: the same count
                caps |= {"cap_counted": current.cap_counted, "cap_total": current.cap_total}
            config = pool_config_of(flat, explicit, caps)
            changes = pool_changes(current, config)
            pending: PendingRecord | None = None
            promoted: list[PendingRecord] = []
            if current is None or changes or config.explicit != current.explicit:
                pending = txn.append(cap.POOL_CONFIGURED, name, config, at_text)
                if members:  # a new limit may let the pool's queue in (SPEC §12.2)
                    promoted = promote(txn, members[0], at_text, [pending])
        if promoted:
            pending = final_records(txn)[0]
        return PoolConfigureAnswer(
            ok=True,
            pool=name,
            appended=pending is not None,
            config=pool_config_view(config),
            explicit=list(config.explicit),
            changes=changes,
            event=event_or_unset(pending),
            promoted=promoted_of(promoted),
        )

    def _counted(
        self, ledger: LedgerState, name: str, since: str, at: str
    ) -> dict[str, cap.CapCounted]:
        """`cap_counted` (what the members spent from `since` to now, read from the
        journal once unless nothing can have been observed since) and `cap_total` (the
        pool's total now): the fold keeps the running total after (SPEC §12.4)."""
        pool = ledger.pools.pools.get(name)
        if pool is None:
            zero = cap.counted_of(cap.ZERO_TOTALS)
            return {"cap_counted": zero, "cap_total": zero}
        ctx = pool_context(ledger, name)
        since_us = parse_at(since)
        if since_us > pool_last_us(ctx):
            counted = cap.ZERO_TOTALS  # no member observed anything at or after since
        else:
            records = ((record, payload) for record, payload, _ in self.journal.records())
            counted = cap.pool_counted_in_records(records, name, since_us)
        total = cap.pool_total(ctx)
        return {"cap_counted": cap.counted_of(counted), "cap_total": cap.counted_of(total)}

    def pools(self, request: PoolsRequest) -> PoolsAnswer:
        """Every pool, now (on each pool's clock) or as of `at`."""
        if request.at is None:
            self.journal.refresh()
            ledger: LedgerState = self.journal.state
        else:
            ledger = self._state_as_of(at=request.at)
        at_us = None if request.at is None else parse_at(_canonical_at(request.at))
        found = {
            name: self._view(ledger, name, at_us, with_provider=False)
            for name in sorted(ledger.pools.pools)
            if ledger.pools.pools[name].config is not None
        }
        return PoolsAnswer(ok=True, pools=found)

    def _view(
        self, ledger: LedgerState, name: str, at_us: int | None, *, with_provider: bool
    ) -> PoolView:
        ctx = pool_context(ledger, name)
        when = at_us if at_us is not None else max(wall_us(), pool_last_us(ctx))
        return pool_view(ctx, when, with_provider=with_provider)

    def inspect_pool(self, name: str, at: str | None, seq: int | None) -> PoolsAnswer:
        """`inspect --pool P`: the pool as `pools` shows it, with its provider reports."""
        if at is None and seq is None:
            self.journal.refresh()
        ledger: LedgerState = self._state_as_of(at=at, seq=seq)
        require_pool(ledger, name)
        at_us = None if at is None else parse_at(_canonical_at(at))
        if seq is not None:
            at_us = pool_last_us(pool_context(ledger, name))
        return PoolsAnswer(
            ok=True, pools={name: self._view(ledger, name, at_us, with_provider=True)}
        )


def check_choices(request: PoolConfigureRequest) -> None:
    """The removals name units and dimensions (input errors first, whatever the state)."""
    for field, given, choices in (
        ("remove_cap", request.remove_cap, cap.CAP_UNITS),
        ("remove_limit", request.remove_limit, cap.DIMENSIONS),
    ):
        for value in given:
            if value not in choices:
                raise InvalidInput(
                    lambda name, v=value, c=choices: f"{name} takes {', '.join(c)}, got {v!r}",
                    code=codes.INVALID_CONFIG,
                    about=field,
                )


def caps_after(
    request: PoolConfigureRequest, current: cap.PoolConfigured | None, at: str, wall_us: int
) -> dict[str, Any]:
    """The pool's caps after this configure: what is not given stays; `cap_since`
    defaults to when the first cap was configured and stays while any cap does."""
    tokens = None if current is None else current.cap_tokens
    usd = None if current is None else current.cap_usd
    since = None if current is None else current.cap_since
    for unit in request.remove_cap:
        if unit == "tokens":
            tokens = None
        else:
            usd = None
    if request.cap_tokens is not None:
        tokens = request.cap_tokens
    if request.cap_usd is not None:
        usd = cap.usd_number(cap.micro_of(request.cap_usd) or 0)
    if request.cap_since is not None:
        since = canonical_at(request.cap_since)
        check_not_in_future(since, wall_us)
    if tokens is None and usd is None:
        if request.cap_since is not None:
            raise InvalidInput(
                lambda name: f"{name} needs a cap (cap_tokens or cap_usd)",
                code=codes.INVALID_CONFIG,
                about="cap_since",
            )
        return {}
    since = since or at
    if since > at:
        raise InvalidInput(
            lambda name: f"{name} {since} is after the configure's time {at}",
            code=codes.INVALID_CONFIG,
            about="cap_since",
        )
    return {"cap_tokens": tokens, "cap_usd": usd, "cap_since": since}


def pool_changes(
    current: cap.PoolConfigured | None, new: cap.PoolConfigured
) -> dict[str, list[Any]]:
    """Every field that changed, as [old, new] (a new pool: every field set)."""
    old, now = pool_flat(current), pool_flat(new)
    for caps_of, flat in ((current, old), (new, now)):
        for field in CAP_NAMES:
            flat[field] = None if caps_of is None else getattr(caps_of, field)
    return {field: [old[field], now[field]] for field in now if old[field] != now[field]}


def pool_config_view(config: cap.PoolConfigured) -> PoolConfigView:
    return PoolConfigView(
        limits={
            d: PoolLimitView(quota=limit.quota, target=limit.target)
            for d, limit in config.limits.items()
        },
        cached_input_weight=config.cached_input_weight,
        cooldown_base_s=config.cooldown_base_s,
        cooldown_max_s=config.cooldown_max_s,
        cap_tokens=config.cap_tokens,
        cap_usd=config.cap_usd,
        cap_since=config.cap_since,
    )


# -- one space of names (SPEC §12.1) -------------------------------------------------------


def is_goal(journal: Journal[LedgerState], state: LedgerState, name: str) -> bool:
    """An event names `name` and it is not a pool: a goal's name."""
    return name in journal.head.goal_last_at and name not in state.pools.pools


def require_not_goal(journal: Journal[LedgerState], state: LedgerState, name: str) -> None:
    """`pool configure` of a goal's name is `name_taken` (exit 2)."""
    if is_goal(journal, state, name):
        raise InvalidInput(
            f"{name!r} is a goal: pools and goals share one space of names",
            code=codes.NAME_TAKEN,
            name=name,
        )


def require_not_pool(state: LedgerState, name: str) -> None:
    """A goal named like a pool is `name_taken` (exit 2)."""
    if name in state.pools.pools:
        raise InvalidInput(
            f"{name!r} is a pool (quotaledger inspect --pool {name}): pools and goals share "
            "one space of names",
            code=codes.NAME_TAKEN,
            name=name,
        )


def unknown_pool(name: str, known: list[str]) -> InvalidInput:
    """`unknown_pool` (exit 2), naming the closest known pools."""
    closest = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if closest:
        hint = "did you mean " + " or ".join(repr(one) for one in closest) + "?"
    elif known:
        hint = f"known pools: {', '.join(known[:KNOWN_GOALS_SHOWN])}"
    else:
        hint = "no pool is configured yet (quotaledger pool configure)"
    return InvalidInput(
        f"no pool configure created pool {name!r}; {hint}",
        code=codes.UNKNOWN_POOL,
        pool=name,
        closest=closest,
    )


def require_pool(state: LedgerState, name: str) -> cap.PoolState:
    found = state.pools.pools.get(name)
    if found is None or found.config is None:
        known = sorted(p for p, s in state.pools.pools.items() if s.config is not None)
        raise unknown_pool(name, known)
    return found


# -- a goal's membership (configure --pool, --leave-pool) ----------------------------------


class Membership(msgspec.Struct, frozen=True):
    """A goal's pool and priority after a configure, and the pool events it appends."""

    pool: cap.PoolRef | None
    priority: int
    events: list[tuple[str, cap.PoolMembership]]
    """(pool name, membership event) to append under the pool's name, in order."""
    clock: tuple[str, ...]
    """The streams whose clock the configure shares: the old and new pools and members."""

    moved: bool = False
    """The goal joins, leaves or changes pools: its queue entries move (SPEC §12.1)."""


def _share_error(text: str, about: str) -> InvalidInput:
    return InvalidInput(
        lambda name: text.format(name=name), code=codes.INVALID_POOL_SHARE, about=about
    )


def membership_after(
    state: LedgerState,
    goal: str,
    current: cap.GoalCapacity,
    *,
    pool: str | None,
    share: float | None,
    borrowing_limit: float | None,
    lending_limit: float | None,
    priority: int | None,
    leave: bool,
) -> Membership:
    """The goal's membership after a configure, by SPEC §12.1's rules (exit 2 with
    nothing written: `invalid_pool_share` first, then `unknown_pool`,
    `pool_overcommitted`)."""
    old = current.pool
    new_priority = current.priority if priority is None else priority
    terms_given = [
        n
        for n, v in (
            ("pool_share", share),
            ("pool_borrowing_limit", borrowing_limit),
            ("pool_lending_limit", lending_limit),
        )
        if v is not None
    ]
    if leave:
        return _leaving(state, goal, current, pool, terms_given, new_priority)
    target = pool if pool is not None else (old.name if old is not None else None)
    if target is None:
        if terms_given:
            raise _share_error("{name} needs --pool (the goal is in no pool)", terms_given[0])
        return Membership(None, new_priority, [], ())
    same = old is not None and old.name == target
    share_u, borrow_u, lend_u = _terms(
        target,
        old.units if same and old is not None else None,
        share,
        borrowing_limit,
        lending_limit,
    )
    found = require_pool(state, target)
    _check_overcommitted(found, target, goal, share_u)
    return _joining(state, goal, current, found, target, (share_u, borrow_u, lend_u), new_priority)


def _left(goal: str, current: cap.GoalCapacity) -> cap.PoolMembership:
    """The goal leaves its pool (what it spent there stays the pool's: its own fold
    keeps it, SPEC §12.4)."""
    return cap.PoolMembership(goal=goal, left=True)


def _joining(
    state: LedgerState,
    goal: str,
    current: cap.GoalCapacity,
    found: cap.PoolState,
    target: str,
    units: tuple[int, int, int],
    priority: int,
) -> Membership:
    """The goal in pool `target` on these terms: a `pool.membership` unless its terms
    there are already these (and, when it moves, its leaving the old pool)."""
    share_u, borrow_u, lend_u = units
    old = current.pool
    same = old is not None and old.name == target
    ref = cap.PoolRef(
        name=target,
        share=_number(share_u),
        borrowing_limit=_number(borrow_u),
        lending_limit=_number(lend_u),
    )
    events: list[tuple[str, cap.PoolMembership]] = []
    clock = _clock_of(state, target, goal)
    if old is not None and not same:
        events.append((old.name, _left(goal, current)))
        clock += _clock_of(state, old.name, goal)
    member = found.members.get(goal)
    terms = None if member is None else (member.share, member.borrowing_limit, member.lending_limit)
    if not same or terms != units or member is None or member.priority != priority:
        joined = cap.PoolMembership(
            goal=goal,
            share=ref.share,
            borrowing_limit=ref.borrowing_limit,
            lending_limit=ref.lending_limit,
            priority=priority,
        )
        events.append((target, joined))
    return Membership(ref, priority, events, clock, moved=not same)


def _leaving(
    state: LedgerState,
    goal: str,
    current: cap.GoalCapacity,
    pool: str | None,
    terms_given: list[str],
    priority: int,
) -> Membership:
    """`--leave-pool`: the goal leaves its pool (nothing to do when in none)."""
    if pool is not None or terms_given:
        raise InvalidInput(
            lambda names: f"{names('leave_pool')} takes no pool terms",
            code=codes.INVALID_OPTION,
            about=("leave_pool", *(["pool"] if pool is not None else []), *terms_given),
        )
    old = current.pool
    if old is None:
        return Membership(None, priority, [], ())
    clock = _clock_of(state, old.name, goal)
    return Membership(None, priority, [(old.name, _left(goal, current))], clock, moved=True)


def _check_overcommitted(found: cap.PoolState, target: str, goal: str, share_u: int) -> None:
    """The members' shares, the goal's new one included, sum to at most 1."""
    shares = {m: t.share for m, t in found.members.items() if m != goal}
    shares[goal] = share_u
    if sum(shares.values()) > SHARE_UNITS:
        listed = ", ".join(f"{m}={_number(u)}" for m, u in shares.items())
        raise InvalidInput(
            f"pool {target!r} would be overcommitted: shares {listed} sum to more than 1",
            code=codes.POOL_OVERCOMMITTED,
            pool=target,
            shares={m: _number(u) for m, u in shares.items()},
        )


def _terms(
    target: str,
    old: tuple[int, int, int] | None,
    share: float | None,
    borrowing_limit: float | None,
    lending_limit: float | None,
) -> tuple[int, int, int]:
    """share, borrowing and lending limits in units of 10^-4 after the configure: what
    is given, else what was set before, else the defaults (1 - share, and share)."""
    if share is None and old is None:
        raise _share_error(f"joining pool {target!r} needs {{name}}", "pool_share")
    share_u = _units(share) if share is not None else old[0]  # type: ignore[index]
    if borrowing_limit is not None:
        borrow_u = _units(borrowing_limit)
    elif old is not None and old[1] != SHARE_UNITS - old[0]:
        borrow_u = old[1]  # set explicitly before: it stays
    else:
        borrow_u = SHARE_UNITS - share_u
    if lending_limit is not None:
        lend_u = _units(lending_limit)
    elif old is not None and old[2] != old[0]:
        lend_u = old[2]
    else:
        lend_u = share_u
    if share_u + borrow_u > SHARE_UNITS:
        raise _share_error(
            f"share + borrowing limit must be <= 1, got {_number(share_u)} + {_number(borrow_u)}",
            "pool_borrowing_limit",
        )
    if lend_u > share_u:
        raise _share_error(
            f"lending limit must be <= share, got {_number(lend_u)} > {_number(share_u)}",
            "pool_lending_limit",
        )
    return share_u, borrow_u, lend_u


def _clock_of(state: LedgerState, pool: str, goal: str) -> tuple[str, ...]:
    found = state.pools.pools.get(pool)
    members = () if found is None else tuple(m for m in found.members if m != goal)
    return (pool, *members)


def _units(value: float) -> int:
    units = cap.share_units(value)
    assert units is not None  # the request's rule checked it
    return units


def _number(units: int) -> int | float:
    return cap.share_number(units)
