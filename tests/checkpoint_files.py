"""Tests' ways of rewriting a stored checkpoint: another header, or a forged state.

A checkpoint is a base file of per-goal sections (and maybe a delta): these read the
stored one whole and write it back as one base (journal/sections.py), changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from quotaledger.journal.checkpoint import (
    Checkpoint,
    checkpoint_path,
    read_checkpoint,
    write_checkpoint,
)
from quotaledger.journal.goalsources import WHOLE_KEY
from quotaledger.journal.sections import Section, layout, new_file_id
from quotaledger.projections.ledger import PROJECTOR


def stored(journal: str) -> Checkpoint:
    found = read_checkpoint(checkpoint_path(journal))
    assert found is not None, "the journal has no checkpoint"
    return found


def sections_of(checkpoint: Checkpoint) -> list[Section]:
    return [(e.goal, e.last_at, bytes(f.raw(e)), e.crc) for f, e in checkpoint.entries()]


def rewrite(
    journal: str,
    *,
    sections: list[Section] | None = None,
    header_of: Checkpoint | None = None,
    **fields: Any,
) -> None:
    """Store the journal's checkpoint again as one base: `fields` of its header changed,
    `sections` (another checkpoint's, say) in place of its own, or the header of
    `header_of` over its own sections."""
    checkpoint = stored(journal)
    top = (header_of or checkpoint).top
    header = msgspec.structs.replace(top, base=None, file_id=new_file_id(), **fields)
    found = sections_of(checkpoint) if sections is None else sections
    write_checkpoint(checkpoint_path(journal), header, found, delta=False)


def forged_sections(
    checkpoint: Checkpoint, change: Callable[[Any], None], projector: Any = PROJECTOR
) -> list[Section]:
    """The sections of `checkpoint`'s state changed by `change` (a per-goal projector)."""
    state = projector.initial()
    entries = list(checkpoint.entries())
    for file, entry in entries:
        if entry.length:
            projector.load_section(state, entry.goal, file.section(entry))
    change(state)
    return [(e.goal, e.last_at, projector.dump_section(state, e.goal), None) for _, e in entries]


def forge(journal: str, change: Callable[[Any], None], projector: Any = PROJECTOR) -> None:
    """Store the journal's checkpoint again with its state changed by `change`: seq,
    hash and offset untouched (what someone who may write the file can do)."""
    checkpoint = stored(journal)
    whole = checkpoint.entry(WHOLE_KEY)
    if whole is not None:  # a projector that keeps its state whole
        state = projector.load(whole[0].section(whole[1]))
        change(state)
        rewrite(
            journal,
            sections=[*_goals_only(checkpoint), (WHOLE_KEY, None, projector.dump(state), None)],
        )
        return
    rewrite(journal, sections=forged_sections(checkpoint, change, projector))


def _goals_only(checkpoint: Checkpoint) -> list[Section]:
    return [s for s in sections_of(checkpoint) if s[0] != WHOLE_KEY]


def file_bytes(header_of: Checkpoint, sections_from: Checkpoint) -> bytes:
    """One base file: the header of `header_of` over the sections of `sections_from`."""
    header = msgspec.structs.replace(header_of.top, base=None, file_id=new_file_id())
    return b"".join(layout(header, sections_of(sections_from)))
