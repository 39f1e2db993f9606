"""`whatif --pool P` (SPEC §12.1): every member's recorded requests replayed under
changed pool limits or shares (`projections.audit.pool_whatif`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quotaledger.journal import InvalidInput, Journal, Record, codes
from quotaledger.projections import audit as au
from quotaledger.projections import capacity as cap
from quotaledger.projections.audit.pool_whatif import PoolWhatIf
from quotaledger.projections.capacity.pool_config import POOL_FIELDS
from quotaledger.projections.ledger import LedgerState
from quotaledger.services.audit_views import flip_of, promotion_flip_of
from quotaledger.services.pools import require_pool
from quotaledger.usecases.decode import API
from quotaledger.usecases.operator import (
    Range,
    WhatifAnswer,
    WhatifRequest,
    range_us,
    shares_of,
)

Progress = Callable[[int], None]


def pool_whatif(
    journal: Journal[LedgerState], request: WhatifRequest, pool: str, progress: Progress | None
) -> WhatifAnswer:
    """`whatif --pool P`: every member's recorded requests under changed pool limits
    or shares (SPEC §12.1)."""
    limits = {
        name: value
        for name, value in request.config_fields().items()
        if value is not None and name in POOL_FIELDS
    }
    others = [
        name
        for name, value in request.config_fields().items()
        if value is not None and name not in POOL_FIELDS
    ]
    if others:
        raise InvalidInput(
            lambda names: (
                "whatif --pool changes the pool's quotas, targets, caps, shares and "
                f"prices only, not {', '.join(map(names, others))}"
            ),
            code=codes.INVALID_OPTION,
            about=tuple(others),
        )
    since_us, until_us = range_us(request.since, request.until, API)
    caps = au.Overrides.of({}, {"cap_tokens": request.cap_tokens, "cap_usd": request.cap_usd})
    price = request.price_override()
    replay = PoolWhatIf(
        pool, limits, shares_of(request.share), since_us, until_us, caps.caps, price
    )
    journal.replay(_pool_feeder(replay), progress=progress)
    require_pool(journal.state, pool)  # the handle folded the whole journal in the pass
    return WhatifAnswer(
        ok=True,
        goal=None,
        pool=pool,
        assumptions=replay.assumptions(),
        decisions=replay.decisions,
        flips=[flip_of(f) for f in replay.flips],
        changes={
            **limits,
            **caps.caps,
            **{f"share {g}": cap.share_number(u) for g, u in replay.shares.items()},
            **({} if price is None else au.price_changes(price)),
        },
        range=Range(replay.first_at, replay.last_at),
        promotions=[promotion_flip_of(f) for f in replay.promotion_flips()],
    )


def _pool_feeder(fold: PoolWhatIf) -> Callable[[Record, Any, bytes], None]:
    feed = fold.feed

    def visit(record: Record, payload: Any, line: bytes) -> None:
        feed(record, payload)

    return visit
