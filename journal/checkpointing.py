"""A handle's checkpoints (SPEC §2.5): starting from one goal by goal, and writing
only what changed.

Starting: the stored checkpoint, if writers may trust it, becomes a lazy state and
lazy goal times (journal/goalsources.py): a command about one goal decodes the index
bucket and the section of that goal, whatever the number of others.

Writing: a handle knows the checkpoint its state started from or last wrote (its
`basis`) and the goals its fold changed since, with the seq of each one's last change
(`dirty`). A refresh writes a delta
against the stored base, holding the dirty goals' sections and copying, without
decoding, the stored delta's other sections, as long as the stored checkpoint is
one this handle's dirty goals cover (not older than its basis). A delta grown past
DELTA_FRACTION of its base is folded into a new base instead, again by copying the
unchanged sections as stored; so is a refresh the stored checkpoint does not allow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from quotaledger.journal import codes
from quotaledger.journal.chain import Head
from quotaledger.journal.checkpoint import Checkpoint
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.goalsources import (
    NO_GOAL_KEY,
    WHOLE_KEY,
    GoalSections,
    GoalTimes,
    Sectioned,
    key_of,
)
from quotaledger.journal.lazymap import LazyMap
from quotaledger.journal.record import Record
from quotaledger.journal.sections import Damaged, Header, Section, new_file_id
from quotaledger.journal.store import checkpoints_of

if TYPE_CHECKING:
    from quotaledger.journal.fold import Fold

DELTA_FRACTION = 0.25
"""A delta larger than this fraction of its base is compacted into a new base: a
refresh then costs at most about this fraction of the state in bytes written."""


class Accepted(NamedTuple):
    state: Any
    head: Head
    source: GoalSections | None
    checkpoint: Checkpoint


def sectioned(projector: Any) -> Sectioned[Any] | None:
    """The projector's per-goal sections, if it keeps its state per goal."""
    return projector if hasattr(projector, "dump_section") else None


def accept(
    fold: Fold[Any],
    checkpoint: Checkpoint,
    covers: Callable[[Head], bool] | None,
    *,
    strict: bool = False,
) -> Accepted | None:
    """`checkpoint` (already found trustworthy) as a lazy state and head. A damaged
    section is folded from genesis instead, or, when `strict` (what `verify` reads),
    raises Damaged."""
    times = GoalTimes(checkpoint)
    head = Head(
        next_seq=checkpoint.seq + 1,
        prev_hash=checkpoint.hash,
        offset=checkpoint.offset,
        journal_id=checkpoint.journal_id,
        goal_last_at=times.times,
    )
    if covers is not None and not covers(head):
        return None
    projector = fold.projector
    per_goal = sectioned(projector)
    if per_goal is None:  # the whole state is one section
        found = checkpoint.entry(WHOLE_KEY)
        if found is None:
            raise ValueError("it holds no state")
        file, entry = found
        return Accepted(projector.load(file.section(entry)), head, None, checkpoint)

    def rebuild(key: str) -> list[tuple[Record, Any]]:
        if strict:
            raise Damaged(f"the section of goal {key!r} is damaged")
        # Up to the checkpoint's record, not `head`'s: the fold advances that head past
        # the records after the checkpoint, which wait in `pending` and follow these.
        return goal_from_genesis(fold, key, checkpoint.seq)

    source = GoalSections(checkpoint, per_goal, projector.apply, rebuild)
    source.state = per_goal.lazy(source)
    return Accepted(source.state, head, source, checkpoint)


def goal_from_genesis(fold: Fold[Any], key: str, seq: int) -> list[tuple[Record, Any]]:
    """The records of one goal up to `seq`, read and verified from genesis: what a
    goal whose section is damaged is folded from."""
    records: list[tuple[Record, Any]] = []

    def collect(record: Record, payload: Any, line: bytes) -> None:
        if key_of(record.goal) == key:
            records.append((record, payload))

    failure = fold.fold_into(Head(), collect, stop_after_seq=seq)
    if failure is not None and failure.seq <= seq:
        fold.raise_if_corrupt(failure)
    return records


def latest_at(goal_last_at: dict[str | None, str]) -> str | None:
    """The latest of the goal times (a lazy map's without loading every goal)."""
    if isinstance(goal_last_at, LazyMap) and isinstance(goal_last_at.source, GoalTimes):
        source = goal_last_at.source
        if not source.complete:
            known = [source.checkpoint.latest_at, *dict.values(goal_last_at)]
            return max((at for at in known if at is not None), default=None)
    return max(goal_last_at.values(), default=None)


# -- writing -------------------------------------------------------------------------


def write(fold: Fold[Any]) -> Checkpoint:
    """Store the handle's state as a checkpoint: a delta when it can, else a base."""
    fold.check_poisoned()
    checkpoints = checkpoints_of(fold.store)
    if checkpoints is None:
        raise InvalidInput(
            f"{fold.store.target} keeps no checkpoints", code=codes.CHECKPOINT_UNSUPPORTED
        )
    head = fold.head
    if head.journal_id is None:
        raise InvalidInput("the journal is empty; nothing to checkpoint", code=codes.EMPTY_JOURNAL)
    basis = fold.basis
    # Only a store that keeps deltas needs the stored base: a whole rewrite copies from
    # the basis (on PostgreSQL, reading the row would move the whole state twice).
    stored = (
        checkpoints.load_checkpoint() if basis is not None and checkpoints.keeps_deltas else None
    )
    if (
        stored is not None
        and basis is not None
        and basis.seq <= stored.seq <= head.seq
        and fold.checkpoint_problem(stored) is None
    ):
        against: Checkpoint | None = stored  # the dirty goals cover everything since it
    else:
        against = basis
    if against is None:
        dirty = everything(fold)
    else:  # what changed since the checkpoint written against (another writer's, maybe)
        dirty = {key for key, seq in fold.dirty.items() if seq > against.seq}
    if fold.projector_sections is None:
        dirty.add(WHOLE_KEY)
    fresh = dict(fresh_sections(fold, dirty))
    header = new_header(fold, fresh, against)
    if against is not None and against is stored:  # a delta names the base stored now
        kept = [(f, e) for f, e in _delta_entries(against) if e.goal not in fresh]
        size = sum(len(s[2]) for s in fresh.values()) + sum(e.length for _, e in kept)
        if size <= DELTA_FRACTION * against.base.header.table_at:
            header.base = against.base.header.file_id
            copied = [(e.goal, e.last_at, f.raw(e), e.crc) for f, e in kept]
            written = checkpoints.save_checkpoint(header, [*fresh.values(), *copied], delta=True)
            return fold.wrote(Checkpoint(against.base, written))
    copied = [
        (e.goal, e.last_at, f.raw(e), e.crc)
        for f, e in (() if against is None else against.entries())
        if e.goal not in fresh
    ]
    written = checkpoints.save_checkpoint(header, [*fresh.values(), *copied], delta=False)
    return fold.wrote(Checkpoint(written))


def _delta_entries(checkpoint: Checkpoint) -> Iterator[tuple[Any, Any]]:
    if checkpoint.delta is not None:
        for entry in checkpoint.delta.entries():
            yield checkpoint.delta, entry


def fresh_sections(fold: Fold[Any], keys: Iterable[str]) -> Iterator[tuple[str, Section]]:
    """The current sections of `keys` (the dirty goals), encoded from the state."""
    goal_last_at, state, projector = fold.head.goal_last_at, fold.state, fold.projector
    per_goal = fold.projector_sections
    empty = b"" if per_goal is None else per_goal.dump_section(projector.initial(), NO_GOAL_KEY)
    for key in sorted(keys):
        last_at = None if key == WHOLE_KEY else goal_last_at.get(key)
        if key == WHOLE_KEY:
            blob = projector.dump(state)
        elif per_goal is not None:
            blob = per_goal.dump_section(state, key)
        else:
            blob = b""
        if blob == empty and last_at is None:
            continue  # journal-level records alone, none of which left state (genesis)
        yield key, (key, last_at, blob, None)


def everything(fold: Fold[Any]) -> set[str]:
    """Every key of a handle without a basis: its goals, and what its state holds."""
    keys = {key_of(goal) for goal in fold.head.goal_last_at}
    per_goal = fold.projector_sections
    if per_goal is not None:
        keys |= per_goal.section_keys(fold.state)
    return keys


def new_header(fold: Fold[Any], fresh: dict[str, Section], against: Checkpoint | None) -> Header:
    head = fold.head
    assert head.journal_id is not None
    known = [s[1] for s in fresh.values()]
    known.append(None if against is None else against.latest_at)
    return Header(
        seq=head.seq,
        hash=head.prev_hash,
        offset=head.offset,
        journal_id=head.journal_id,
        projection_version=fold.projector.version,
        file_id=new_file_id(),
        base=None,
        null_goal_last_at=head.goal_last_at.get(None),
        latest_at=max((at for at in known if at is not None), default=None),
        goals=0,
        buckets=0,
        table_at=0,
        size=0,
        index_crc=0,
    )
