"""Dollars, exactly (SPEC §12.4): prices and caps take at most 6 decimals, and an
observation's dollars are its counters times the price in force, in exact decimal
arithmetic, rounded half-even to 10^-6.

Inside the projections every amount of dollars is an integer of micro-dollars (10^-6
USD) and every price an integer of micro-dollars per million tokens, so sums never
drift; payloads and answers carry them as JSON numbers, which `usd_number` gives
(a decimal with at most 6 places and at most 16 significant digits is one exactly:
its float's shortest repr is that decimal).
"""

from decimal import Decimal, InvalidOperation

USD_DECIMALS = 6
MICRO = 10**USD_DECIMALS
"""Micro-dollars per dollar."""
TOKENS_PER_PRICE_UNIT = 10**6
"""Prices are per million tokens."""
USD_MAX = 10**9
"""The largest price (per million tokens) or dollar cap: a figure beyond it is a typo,
and every amount below it with 6 decimals is exactly a JSON number."""

Usd = int | float
"""Dollars as a payload or an answer holds them: a JSON number."""


def micro_of(value: object) -> int | None:
    """`value` (an int, a float or a decimal string of dollars) in micro-dollars, or
    None when it is not a number from 0 to USD_MAX with at most 6 decimals."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        # The float's shortest repr is the decimal it was written as (`0.1`, not
        # 0.1000000000000000055...): the user's number, not the float's binary value.
        text = repr(value)
    elif isinstance(value, (int, str, Decimal)):
        text = str(value)
    else:
        return None
    try:
        exact = Decimal(text.strip())
    except InvalidOperation:
        return None
    if not exact.is_finite() or exact < 0 or exact > USD_MAX:
        return None
    scaled = exact.scaleb(USD_DECIMALS)
    if scaled != scaled.to_integral_value():
        return None
    return int(scaled)


def usd_number(micro: int) -> float:
    """Micro-dollars as the JSON number an answer gives (always a float: one type)."""
    return float(Decimal(micro).scaleb(-USD_DECIMALS))


def round_half_even(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded to an integer, ties to the even one."""
    quotient, remainder = divmod(numerator, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2):
        quotient += 1
    return quotient


def dollars_micro(
    price: tuple[int, int, int, int],
    uncached_input: int,
    cached_input: int,
    cache_write_input: int,
    output: int,
) -> int:
    """An observation's dollars, in micro-dollars, rounded half-even (SPEC §12.4)."""
    per_input, per_cached, per_write, per_output = price
    exact = (
        uncached_input * per_input
        + cached_input * per_cached
        + cache_write_input * per_write
        + output * per_output
    )  # in micro-dollars per million tokens, times tokens
    return round_half_even(exact, TOKENS_PER_PRICE_UNIT)
