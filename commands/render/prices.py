"""What `price set` and `prices` print."""

from __future__ import annotations

from quotaledger.render.output import table
from quotaledger.render.per_event import num
from quotaledger.usecases.prices import PricesAnswer, PriceSetAnswer, PriceView


def _per_mtok(price: PriceView) -> str:
    return (
        f"${num(price.input_usd_per_mtok)} input, ${num(price.cached_input_usd_per_mtok)} "
        f"cached input, ${num(price.cache_write_usd_per_mtok)} cache write, "
        f"${num(price.output_usd_per_mtok)} output per million tokens"
    )


def price_set_text(answer: PriceSetAnswer) -> str:
    if not answer.appended:
        return f"price of {answer.model} unchanged: {_per_mtok(answer.price)}"
    return f"price of {answer.model} from {answer.price.at}: {_per_mtok(answer.price)}"


def prices_text(answer: PricesAnswer) -> str:
    if not answer.prices:
        return "no prices: observations' tokens count as unpriced (quotaledger price set)"
    rows = [
        [
            model,
            num(p.input_usd_per_mtok),
            num(p.cached_input_usd_per_mtok),
            num(p.cache_write_usd_per_mtok),
            num(p.output_usd_per_mtok),
            p.at,
            str(p.seq),
        ]
        for model, p in answer.prices.items()
    ]
    header = ["MODEL", "INPUT", "CACHED", "CACHE_WRITE", "OUTPUT", "SINCE", "SEQ"]
    return f"{len(rows)} priced models (US dollars per million tokens)\n" + table(rows, header)
