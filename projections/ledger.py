"""The whole ledger's state and the projector the journal folds with.

Each domain module (capacity, hosts, settlement, probes) exports `EVENTS` (kind ->
payload Struct), a state Struct and `apply(state, record, payload)`. This module
composes them; it is the only place that knows the list of domains.
"""

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.chain import NotFolded, Noting, PayloadDecoder, RunVisitor, Visitor
from quotaledger.journal.errors import Error
from quotaledger.journal.lazymap import LazyMap, Source
from quotaledger.journal.record import BATCH_KIND, GENESIS_KIND, REPAIRED_KIND
from quotaledger.projections import capacity, hosts, probes, settlement
from quotaledger.projections.capacity import (
    CapacityState,
    GoalCapacity,
    PoolsState,
    PoolState,
    PriceBook,
)
from quotaledger.projections.hosts import GoalHosts, HostsState
from quotaledger.projections.probes import LatestProbe, ProbesState
from quotaledger.projections.settlement import GoalSettlement, SettlementState
from quotaledger.projections.types import StateStruct


class LedgerState(StateStruct):
    # The states by their own names: a field named like its module would shadow the
    # module in the annotations after it (evaluated at class creation, not strings).
    capacity: CapacityState = msgspec.field(default_factory=CapacityState)
    hosts: HostsState = msgspec.field(default_factory=HostsState)
    settlement: SettlementState = msgspec.field(default_factory=SettlementState)
    probes: ProbesState = msgspec.field(default_factory=ProbesState)
    pools: PoolsState = msgspec.field(default_factory=PoolsState)


class GoalSection(msgspec.Struct, array_like=True, omit_defaults=True):
    """One goal's part of every domain's state: a checkpoint's section (SPEC §2.5).
    Every domain keeps its state per goal (records of no goal under "")."""

    capacity: GoalCapacity | None = None
    hosts: GoalHosts | None = None
    settlement: GoalSettlement | None = None
    probe: LatestProbe | None = None
    probes: int | None = None
    prices: PriceBook | None = None
    """The journal-level section's alone (SPEC §12.4's prices)."""
    pool: PoolState | None = None
    """A pool's section (SPEC §12.1: pools and goals share one space of names)."""


def goal_maps(state: LedgerState) -> tuple[dict[str, Any], ...]:
    """The state's dicts keyed by goal, in GoalSection's field order."""
    return (
        state.capacity.goals,
        state.hosts.goals,
        state.settlement.goals,
        state.probes.latest,
        state.probes.count,
        state.capacity.prices,
        state.pools.pools,
    )


def pool_context_of(state: LedgerState, goal: str) -> capacity.PoolContext | None:
    """The pool `goal` is a member of, with every member's state, or None (SPEC §12.1).
    Only the pool's members are looked at: with a checkpoint, only their sections load."""
    found = state.capacity.goals.get(goal)
    if found is None or found.pool is None:
        return None
    name = found.pool.name
    pool = state.pools.pools.get(name)
    if pool is None:
        return None
    goals = state.capacity.goals
    members = {m: g for m in pool.members if (g := goals.get(m)) is not None}
    former = {
        f: g for f in pool.former if f not in pool.members and (g := goals.get(f)) is not None
    }
    return capacity.PoolContext(name, pool, members, former)


def on_pool_clock(state: LedgerState, pool: str, record: Record, payload: Any) -> bool:
    """`record` is of the pool's stream or of a goal that is (or by it becomes) one of
    its members: a record on the pool's one clock (SPEC §12.1), as `state` (folded up
    to it) knows the members."""
    goal = record.goal
    if goal is None:
        return False
    if goal == pool:
        return True
    if isinstance(payload, capacity.CapacityConfigured):
        return payload.pool is not None and payload.pool.name == pool
    found = state.pools.pools.get(pool)
    return found is not None and goal in found.members


DomainApply = Callable[[Any, Record, Any], None]
"""A domain's fold step: (its part of the LedgerState, record, decoded payload)."""


DOMAINS: tuple[tuple[str, dict[str, type[Any]], DomainApply], ...] = (
    ("capacity", capacity.EVENTS, capacity.apply),
    ("hosts", hosts.EVENTS, hosts.apply),
    ("settlement", settlement.EVENTS, settlement.apply),
    ("probes", probes.EVENTS, probes.apply),
    ("pools", capacity.POOL_EVENTS, capacity.apply_pool),
)
"""Each domain: its part of the LedgerState, its kinds' payload Structs, its fold step."""


def _payload_types() -> dict[str, type[Any]]:
    types: dict[str, type[Any]] = {}
    for _, events, _ in DOMAINS:
        for kind, payload_type in events.items():
            if kind in types:
                raise RuntimeError(f"event kind {kind} registered twice")
            types[kind] = payload_type
    return types


EVENT_KINDS: tuple[str, ...] = (
    GENESIS_KIND,
    REPAIRED_KIND,
    BATCH_KIND,
    *capacity.EVENTS,
    *hosts.EVENTS,
    *settlement.EVENTS,
    *probes.EVENTS,
    *capacity.POOL_EVENTS,
)
"""Every kind a journal can hold: the journal's own three, then each domain's."""


class LedgerProjector:
    """The `journal.Projector` for quotaledger's domain."""

    version = "ledger/1:" + ".".join(
        (capacity.VERSION, hosts.VERSION, settlement.VERSION, probes.VERSION)
    )

    def __init__(self) -> None:
        self._payload_types = _payload_types()
        self._appliers = {
            kind: (attrgetter(part), apply) for part, events, apply in DOMAINS for kind in events
        }
        # Decoders are built on first use: building one per kind (and the checkpoint's,
        # over the whole state's types) costs milliseconds, and a CLI call that
        # appends one event to a checkpointed journal needs one or two of them.
        self._decoders: dict[str, PayloadDecoder] = {}
        self._encode = msgspec.msgpack.Encoder().encode
        self._decode: Callable[[bytes], LedgerState] | None = None
        self._decode_section: Callable[[bytes], GoalSection] | None = None

    def decoder(self, kind: str) -> PayloadDecoder | None:
        decode = self._decoders.get(kind)
        if decode is None:
            payload_type = self._payload_types.get(kind)
            if payload_type is None:
                return None
            decode = self._decoders[kind] = msgspec.json.Decoder(payload_type).decode
        return decode

    def initial(self) -> LedgerState:
        return LedgerState()

    def apply(self, state: LedgerState, record: Record, payload: Any) -> None:
        found = self._appliers.get(record.kind)
        if found is not None:  # journal.* records carry no domain state
            part, apply = found
            apply(part(state), record, payload)

    def visitor(self, state: LedgerState, noting: Noting | None = None) -> Visitor:
        """`apply` on `state` as the fold's visitor, each kind's step and part of the
        LedgerState found once per fold instead of once per record: a fold of 100,000
        records calls it 100,000 times. (A domain's apply mutates its part in place;
        no step replaces a part of the LedgerState.) With `noting`, each record's goal
        key and seq are told to it first, in the same call (a wrapper is one more
        Python call per record)."""
        steps = {kind: (apply, part(state)) for kind, (part, apply) in self._appliers.items()}
        step_of = steps.get
        if noting is not None:
            changed = noting

            def visit_noting(record: Record, payload: Any, line: bytes) -> None:
                changed(record.goal or "", record.seq)
                step = step_of(record.kind)
                if step is not None:  # journal.* records carry no domain state
                    step[0](step[1], record, payload)

            return visit_noting

        def visit(record: Record, payload: Any, line: bytes) -> None:
            step = step_of(record.kind)
            if step is not None:  # journal.* records carry no domain state
                step[0](step[1], record, payload)

        return visit

    def run_visitor(self, state: LedgerState) -> RunVisitor:
        """`visitor`'s fold of many records in one call (a transaction's, or a commit's):
        a run of observations of one goal at one time is folded by
        `capacity.fold_observations`, which looks the goal up once for all of them.
        A record that does not fold raises NotFolded with its index."""
        steps = {kind: (apply, part(state)) for kind, (part, apply) in self._appliers.items()}
        step_of = steps.get
        capacity_state = state.capacity
        observed, fold_observations = capacity.CapacityObserved, capacity.fold_observations

        def visit_run(items: Sequence[tuple[Record, Any, bytes]]) -> None:
            index, count = 0, len(items)
            try:
                while index < count:
                    record, payload, _ = items[index]
                    if type(payload) is observed and record.goal is not None:
                        index = fold_observations(capacity_state, items, index)
                        continue
                    step = step_of(record.kind)
                    if step is not None:  # journal.* records carry no domain state
                        step[0](step[1], record, payload)
                    index += 1
            except (ValueError, OverflowError, Error) as exc:
                raise NotFolded(index, exc) from exc

        return visit_run

    def dump(self, state: LedgerState) -> bytes:
        for goals in goal_maps(state):
            if isinstance(goals, LazyMap):
                goals.whole()  # the encoder walks the dicts as they are: all goals first
        return self._encode(state)

    # -- a checkpoint's sections, one per goal (journal.goalsources.Sectioned) ---------

    def lazy(self, source: Source) -> LedgerState:
        return LedgerState(
            capacity=CapacityState(goals=LazyMap(source), prices=LazyMap(source)),
            hosts=HostsState(goals=LazyMap(source)),
            settlement=SettlementState(goals=LazyMap(source)),
            probes=ProbesState(latest=LazyMap(source), count=LazyMap(source)),
            pools=PoolsState(pools=LazyMap(source)),
        )

    def load_section(self, state: LedgerState, key: str, blob: bytes) -> None:
        if self._decode_section is None:
            self._decode_section = msgspec.msgpack.Decoder(GoalSection).decode
        section = self._decode_section(blob)
        for goals, part in zip(goal_maps(state), section.__struct_fields__, strict=True):
            value = getattr(section, part)
            if value is not None:
                dict.__setitem__(goals, key, value)

    def dump_section(self, state: LedgerState, key: str) -> bytes:
        return self._encode(GoalSection(*(goals.get(key) for goals in goal_maps(state))))

    def section_keys(self, state: LedgerState) -> set[str]:
        keys: set[str] = set()
        for goals in goal_maps(state):
            keys.update(goals)
        return keys

    def load(self, blob: bytes) -> LedgerState:
        if self._decode is None:
            self._decode = msgspec.msgpack.Decoder(LedgerState).decode
        return self._decode(blob)


PROJECTOR = LedgerProjector()
