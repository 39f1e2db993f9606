"""A goal's or a pool's spend as `inspect` and `pools` show it (SPEC §12.4)."""

from __future__ import annotations

from quotaledger.journal.clock import format_us_or_none
from quotaledger.projections import capacity as cap
from quotaledger.usecases.capacity import SpendView


def spend_view(spend: cap.Spend) -> SpendView:
    """`inspect`'s spend (SPEC §12.4): remaining = cap - spent - reserved, negative when
    overspent, null without that cap."""
    usd = cap.usd_number
    remaining_tokens = None
    if spend.cap_tokens is not None:
        remaining_tokens = cap.tidy(spend.cap_tokens - spend.tokens - spend.reserved_tokens)
    remaining_usd = None
    if spend.cap_usd_micro is not None:
        remaining_usd = usd(spend.cap_usd_micro - spend.usd_micro - spend.reserved_usd_micro)
    return SpendView(
        since=format_us_or_none(spend.since_us),
        tokens=spend.tokens,
        usd=usd(spend.usd_micro),
        unpriced_tokens=spend.unpriced_tokens,
        cap_tokens=spend.cap_tokens,
        cap_usd=None if spend.cap_usd_micro is None else usd(spend.cap_usd_micro),
        reserved_tokens=spend.reserved_tokens,
        reserved_usd=usd(spend.reserved_usd_micro),
        remaining_tokens=remaining_tokens,
        remaining_usd=remaining_usd,
    )
