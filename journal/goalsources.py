"""A handle's state and goal times loaded from a checkpoint one goal at a time.

A projector that keeps its state per goal (`Sectioned`) builds a state whose goal-keyed
dicts are LazyMaps over a `GoalSections`: a goal's section is decoded the first time
anything asks for the goal, and the records the handle folded since the checkpoint
for a goal not loaded yet wait in `pending` until then (every record's hash and chain
were checked as it was read; only its fold waits). The head's goal times
(`Head.goal_last_at`, what the chain verifier checks each record's time against) are
a LazyMap over `GoalTimes`, read from the same index.

A section is keyed by its goal; the records of no goal (journal-level) by "", which no
goal can be called (SPEC §8: identifiers have at least one character).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from quotaledger.journal.checkpoint import Checkpoint, warn
from quotaledger.journal.lazymap import LazyMap, Source
from quotaledger.journal.record import Record
from quotaledger.journal.sections import Damaged

S = TypeVar("S")
NO_GOAL_KEY = ""
"""The section of what records of no goal (goal null) fold into."""
WHOLE_KEY = "*"
"""The one section of a projector that does not keep its state per goal."""
Rebuild = Callable[[str], list[tuple[Record, Any]]]
"""A goal's records from genesis to the checkpoint (when its section is damaged)."""


class Sectioned(Protocol[S]):
    """What a projector that keeps its state per goal offers the checkpoint."""

    def lazy(self, source: Source) -> S:
        """A state whose goal-keyed dicts are LazyMaps over `source`."""
        ...

    def load_section(self, state: S, key: str, blob: bytes) -> None:
        """Put a section's goal into `state` (bypassing the LazyMaps' fetch)."""
        ...

    def dump_section(self, state: S, key: str) -> bytes:
        """The goal's section (its state in every part of `state`)."""
        ...

    def section_keys(self, state: S) -> set[str]:
        """Every key `state` holds a part of."""
        ...


def key_of(goal: str | None) -> str:
    return NO_GOAL_KEY if goal is None else goal


class GoalSections(Source):
    """Fills a lazy state from a checkpoint's sections: see the module docstring."""

    def __init__(
        self,
        checkpoint: Checkpoint,
        projector: Sectioned[Any],
        apply: Callable[[Any, Record, Any], None],
        rebuild: Rebuild,
    ) -> None:
        self.checkpoint = checkpoint
        self.projector = projector
        self.apply = apply
        self.rebuild = rebuild
        self.state: Any = None
        self.complete = False
        self.loaded: set[str] = set()
        self.pending: dict[str, list[tuple[Record, Any]]] = {}
        self.decoded = 0
        """How many sections this source decoded (what a test of laziness counts)."""

    def fetch(self, key: Any) -> bool:
        if key in self.loaded or not isinstance(key, str):
            return False
        self.loaded.add(key)
        try:
            found = self.checkpoint.entry(key)
            if found is not None and found[1].length:
                file, entry = found
                self.projector.load_section(self.state, key, file.section(entry))
                self.decoded += 1
        except Damaged as exc:
            # Never trusted: the goal is folded from genesis instead.
            records = self.rebuild(key)
            warn(f"ignoring the checkpoint's section of goal {key!r}: {exc}; folded from genesis")
            for record, payload in records:
                self.apply(self.state, record, payload)
        for record, payload in self.pending.pop(key, ()):
            self.apply(self.state, record, payload)
        return True

    def fetch_all(self) -> None:
        for _, entry in list(self.checkpoint.entries()):
            self.fetch(entry.goal)
        for key in list(self.pending):
            self.fetch(key)
        self.complete = True


class GoalTimes(Source):
    """Fills a head's goal times from a checkpoint's index, goal by goal."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        self.times: LazyMap = LazyMap(self)
        self.complete = False
        self.loaded: set[str | None] = set()

    def fetch(self, key: Any) -> bool:
        if key in self.loaded:
            return False
        self.loaded.add(key)
        if key is None:
            at = self.checkpoint.null_goal_last_at
        else:
            found = self.checkpoint.entry(key)  # the index was checked whole on open
            at = None if found is None else found[1].last_at
        if at is not None:
            dict.__setitem__(self.times, key, at)
        return True

    def fetch_all(self) -> None:
        for _, entry in list(self.checkpoint.entries()):
            self.fetch(entry.goal)
        self.fetch(None)
        self.complete = True
