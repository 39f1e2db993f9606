"""The prices over the open journal (SPEC §12.4): `price set` and `prices`."""

from __future__ import annotations

from quotaledger.journal import TimeRegression
from quotaledger.journal.clock import canonical_at, format_us, parse_at
from quotaledger.projections import capacity as cap
from quotaledger.projections.ledger import LedgerState
from quotaledger.services.base import ServiceBase
from quotaledger.usecases.decode import event_of
from quotaledger.usecases.prices import (
    PricesAnswer,
    PriceSetAnswer,
    PriceSetRequest,
    PricesRequest,
    PriceView,
)


class PricesService(ServiceBase):
    """Prices are journal-level events: a `price.set` names no goal."""

    def price_set(self, request: PriceSetRequest) -> PriceSetAnswer:
        """Set a model's price from now on (cached input and cache writes default to the
        input price); the same price again appends nothing."""
        given = request.input_usd_per_mtok
        payload = cap.PriceSet(
            model=request.model,
            input_usd_per_mtok=_exact(given),
            cached_input_usd_per_mtok=_exact(
                given
                if request.cached_input_usd_per_mtok is None
                else request.cached_input_usd_per_mtok
            ),
            cache_write_usd_per_mtok=_exact(
                given
                if request.cache_write_usd_per_mtok is None
                else request.cache_write_usd_per_mtok
            ),
            output_usd_per_mtok=_exact(request.output_usd_per_mtok),
        )
        with self.journal.transaction() as txn:
            book = txn.state.capacity.prices.get(cap.PRICES_KEY)
            latest = None if book is None else book.latest(request.model)
            if request.at is not None and latest is not None:
                _not_before(request.model, canonical_at(request.at), latest)
            at_text = txn.time_for(None, request.at)
            micro = tuple(cap.micro_of(getattr(payload, n)) for n in cap.PRICE_FIELDS)
            if latest is not None and latest.per_mtok_micro == micro:
                return PriceSetAnswer(
                    ok=True, model=request.model, appended=False, price=price_view(latest)
                )
            pending = txn.append(cap.PRICE_SET, None, payload, at_text)
        record = pending.record
        price = cap.ModelPrice(per_mtok_micro=micro, at_us=parse_at(record.at), seq=record.seq)  # type: ignore[arg-type]
        return PriceSetAnswer(
            ok=True,
            model=request.model,
            appended=True,
            price=price_view(price),
            event=event_of(pending),
        )

    def prices(self, request: PricesRequest) -> PricesAnswer:
        """Every priced model's price in force, as of `at` (every record at or before
        it) or now."""
        if request.at is None:
            state: LedgerState = self.journal.refresh()
            at_us = None
        else:
            at = canonical_at(request.at)
            state, _ = self.journal.fold_as_of(at=at)
            at_us = parse_at(at)
        book = state.capacity.prices.get(cap.PRICES_KEY)
        found: dict[str, PriceView] = {}
        if book is not None:
            for model in sorted(book.models):
                history = [p for p in book.models[model] if at_us is None or p.at_us <= at_us]
                if history:
                    found[model] = price_view(history[-1])
        return PricesAnswer(ok=True, prices=found)


def _not_before(model: str, at: str, latest: cap.ModelPrice) -> None:
    """A `price set --at` before the model's latest price is `time_regression` (SPEC
    §12.4); one before another journal-level event is too (SPEC §2: journal-level
    events are one stream whose times never go back), in the journal's words."""
    last_at = format_us(latest.at_us)
    if at < last_at:
        raise TimeRegression(
            lambda name: (
                f"{name} {at} is earlier than model {model!r}'s latest price at "
                f"{last_at} (seq {latest.seq})"
            ),
            about="at",
            at=at,
            last_at=last_at,
        )


def _exact(value: int | float) -> float:
    """Dollars as the payload keeps them: the exact decimal given, as a JSON number."""
    return cap.usd_number(cap.micro_of(value) or 0)


def price_view(price: cap.ModelPrice) -> PriceView:
    input_, cached, write, output = (cap.usd_number(m) for m in price.per_mtok_micro)
    return PriceView(
        input_usd_per_mtok=input_,
        cached_input_usd_per_mtok=cached,
        cache_write_usd_per_mtok=write,
        output_usd_per_mtok=output,
        at=format_us(price.at_us),
        seq=price.seq,
    )
