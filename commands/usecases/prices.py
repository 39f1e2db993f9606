"""The prices' use cases (SPEC §12.4): `price set` and `prices`.

A price is an event (`price.set`, journal-level: its envelope names no goal), so an
audit reproduces the price in force; an observation's dollars come from the latest
price of its model before it in the journal.
"""

from quotaledger.usecases.decode import Answer, Event, Request
from quotaledger.usecases.fields import Identifier, Time, UsdAmount


class PriceSetRequest(Request):
    """Set a model's price from now on, in US dollars per million tokens (cached input
    and cache writes default to the input price)."""

    model: Identifier
    input_usd_per_mtok: UsdAmount
    output_usd_per_mtok: UsdAmount
    cached_input_usd_per_mtok: UsdAmount | None = None
    cache_write_usd_per_mtok: UsdAmount | None = None
    at: Time | None = None


class PriceView(Answer):
    """A model's price in force and the record that set it."""

    input_usd_per_mtok: float
    cached_input_usd_per_mtok: float
    cache_write_usd_per_mtok: float
    output_usd_per_mtok: float
    at: str
    seq: int


class PriceSetAnswer(Answer, kw_only=True):
    """`price set`: appended, or nothing when the model's price is already this one."""

    ok: bool
    model: str
    appended: bool
    price: PriceView
    event: Event | None = None


class PricesRequest(Request):
    """Every priced model's price in force (as of time `at`, or now)."""

    at: Time | None = None


class PricesAnswer(Answer):
    ok: bool
    prices: dict[str, PriceView]
