"""Dicts keyed by goal whose entries come from a checkpoint's sections on first use.

A command about one goal reads that goal's entries and no others: a `LazyMap` asks
its `Source` for a key the first time anything looks it up, sets it or deletes it,
and for every key the first time anything walks the whole map (iteration, length,
equality, a copy): readers over every goal still see all of them. Once a key is
loaded the map is an ordinary dict for it, so the fold's `get` and `[]=` stay cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

_ABSENT: Any = object()


class Source(Protocol):
    """What fills one or more LazyMaps: `fetch(key)` loads the key into every map it
    fills (once; False when it was loaded already), `fetch_all()` every key."""

    complete: bool

    def fetch(self, key: Any) -> bool: ...

    def fetch_all(self) -> None: ...


class LazyMap(dict):  # type: ignore[type-arg]
    """A dict filled from a Source: see the module docstring."""

    __slots__ = ("source",)

    def __init__(self, source: Source) -> None:
        super().__init__()
        self.source = source

    # -- one key ---------------------------------------------------------------------

    def _fetched(self, key: Any) -> bool:
        source = self.source
        return not source.complete and source.fetch(key)

    def get(self, key: Any, default: Any = None) -> Any:
        found = dict.get(self, key, _ABSENT)
        if found is _ABSENT:
            if not self._fetched(key):
                return default
            found = dict.get(self, key, _ABSENT)
            return default if found is _ABSENT else found
        return found

    def __missing__(self, key: Any) -> Any:
        if self._fetched(key):
            found = dict.get(self, key, _ABSENT)
            if found is not _ABSENT:
                return found
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or (self._fetched(key) and dict.__contains__(self, key))

    def __setitem__(self, key: Any, value: Any) -> None:
        # Loaded first: a later fetch must not put the checkpoint's older value back.
        if not dict.__contains__(self, key):
            self._fetched(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        self._fetched(key)
        dict.__delitem__(self, key)

    def pop(self, key: Any, *default: Any) -> Any:
        self._fetched(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._fetched(key)
        return dict.setdefault(self, key, default)

    def update(self, *others: Any, **more: Any) -> None:
        for key, value in dict(*others, **more).items():
            self[key] = value

    # -- every key -------------------------------------------------------------------

    def whole(self) -> LazyMap:
        if not self.source.complete:
            self.source.fetch_all()
        return self

    def __iter__(self) -> Iterator[Any]:
        return dict.__iter__(self.whole())

    def __len__(self) -> int:
        return dict.__len__(self.whole())

    def keys(self) -> Any:
        return dict.keys(self.whole())

    def values(self) -> Any:
        return dict.values(self.whole())

    def items(self) -> Any:
        return dict.items(self.whole())

    def copy(self) -> dict[Any, Any]:
        return dict(dict.items(self.whole()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyMap):
            other.whole()
        return dict.__eq__(self.whole(), other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def __repr__(self) -> str:
        return dict.__repr__(self.whole())

    def __reduce__(self) -> Any:
        return (dict, (dict(dict.items(self.whole())),))


def plain(mapping: dict[Any, Any]) -> dict[Any, Any]:
    """`mapping` as an ordinary dict with every entry (what an encoder walks)."""
    return mapping.copy() if isinstance(mapping, LazyMap) else mapping


def load_keys(maps: Iterable[LazyMap]) -> None:
    for each in maps:
        each.whole()
