"""The probe answer shapes (SPEC §6), typed like `answers.py` (the journal's are
typed requests and answers now: `usecases.journal`).

Each TypedDict lists its keys in the order the answer is built, which is the order
they are printed (that order is public too).
"""

from __future__ import annotations

from typing import Any, TypedDict

# -- probe (SPEC §6) ------------------------------------------------------------------


class LatestProbeAnswer(TypedDict):
    ok: bool
    goal: str
    count: int
    latest: dict[str, Any] | None
