"""The engine's public surface is `journal.__all__`: sorted, and every name is real."""

from __future__ import annotations

from quotaledger import journal


def test_all_is_sorted_and_complete() -> None:
    assert journal.__all__ == sorted(journal.__all__)
    for name in journal.__all__:
        assert getattr(journal, name) is not None, name
    exported = {name for name in vars(journal) if name[0].isupper()}
    assert exported <= set(journal.__all__), exported - set(journal.__all__)
