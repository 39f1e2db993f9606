"""An independent model of SPEC §12.3 (daily windows) and §12.4 (prices, spend caps),
written from the SPEC text only, a sibling of `independent_model.py` (SPEC §3).

It shares no code with `projections/` or `commands/`: it keeps the goal's events as a
list and recomputes every figure from the whole list for every question, with
`fractions.Fraction` for tokens and `decimal.Decimal` for dollars.

The rules, as the SPEC states them:
- tpd sums tokens as tpm (uncached + cache_write + cached x weight + output), rpd
  requests (given, else 1 for an observation with tokens, 0 for a heartbeat), over the
  observations at second s (the time truncated to the second) with s > t - 86,400 s.
- reserved_D = the sum over active runs of max(0, forecast_D - D observed with the run
  in the records after its admission record); load_D = usage_D + reserved_D.
- Per configured daily dimension, in order tpd then rpd: forecast_required (no
  forecast), forecast_exceeds_target (forecast > target), then headroom:
  load + forecast + cold_start > target - (evaluator_reserve for a solver) refuses,
  `evaluator_reserve_protected` for a solver that fits the target,
  `headroom_exhausted` otherwise.
- An observation's dollars: its counters times the latest price of its model set
  before it in the journal (cached and cache-write prices default to the input
  price), per million tokens, rounded half-even to 10^-6; with no model or an unpriced
  one it adds no dollars and its tokens count as unpriced.
- spent = the sums over observations with at >= cap_since; reserved tokens and
  dollars = the active runs' remaining forecast_tokens / forecast_usd;
  `spend_cap_reached` when spent >= cap (either unit), else `spend_cap_exceeded` when
  spent + reserved + this request's forecast > cap; each reason once.

Points the SPEC leaves open, and the reading taken (the implementation's too):
- rounding: each observation's dollars are rounded, then summed (the sum is exact);
- a cap's `spent` compares exactly, in micro-dollars, with the cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

US = 1_000_000
DAY_US = 86_400 * US
MICRO = Decimal("0.000001")


@dataclass
class Obs:
    index: int
    at_us: int
    run: str | None
    uncached: int
    cached: int
    cache_write: int
    output: int
    requests: int | None
    model: str | None


@dataclass
class Admission:
    index: int
    run: str
    forecast_tokens: int | None
    forecast_requests: int | None
    forecast_usd: Decimal | None


@dataclass
class Model:
    """One goal's events, in journal order, and the journal's prices."""

    weight: Fraction = Fraction(1)
    limits: dict[str, dict[str, int]] = field(default_factory=dict)
    """tpd/rpd -> quota, target, evaluator_reserve, cold_start_reserve."""
    cap_tokens: int | None = None
    cap_usd: Decimal | None = None
    cap_since_us: int | None = None
    events: list[Any] = field(default_factory=list)
    prices: list[tuple[int, str, tuple[Decimal, Decimal, Decimal, Decimal]]] = field(
        default_factory=list
    )
    index: int = 0

    def _next(self) -> int:
        self.index += 1
        return self.index

    # -- events ----------------------------------------------------------------------

    def price_set(
        self,
        model: str,
        input_: Decimal,
        output: Decimal,
        cached: Decimal | None = None,
        cache_write: Decimal | None = None,
    ) -> None:
        cached = input_ if cached is None else cached
        cache_write = input_ if cache_write is None else cache_write
        self.prices.append((self._next(), model, (input_, cached, cache_write, output)))

    def observe(self, at_us: int, **counts: Any) -> None:
        self.events.append(
            Obs(
                self._next(),
                at_us,
                counts.get("run"),
                counts.get("uncached_input", 0),
                counts.get("cached_input", 0),
                counts.get("cache_write_input", 0),
                counts.get("output", 0),
                counts.get("requests"),
                counts.get("model"),
            )
        )

    def admitted(self, run: str, **forecasts: Any) -> None:
        usd = forecasts.get("forecast_usd")
        self.events.append(
            Admission(
                self._next(),
                run,
                forecasts.get("forecast_tokens"),
                forecasts.get("forecast_requests"),
                None if usd is None else Decimal(repr(usd)),
            )
        )

    def released(self, run: str) -> None:
        self.events.append(("released", self._next(), run))

    # -- figures ---------------------------------------------------------------------

    def tokens_of(self, o: Obs) -> Fraction:
        return o.uncached + o.cache_write + o.cached * self.weight + o.output

    @staticmethod
    def requests_of(o: Obs) -> int:
        if o.requests is not None:
            return o.requests
        return 1 if (o.uncached or o.cached or o.cache_write or o.output) else 0

    def observations(self) -> list[Obs]:
        return [e for e in self.events if isinstance(e, Obs)]

    def active_runs(self) -> list[Admission]:
        active: dict[str, Admission] = {}
        for e in self.events:
            if isinstance(e, Admission):
                active[e.run] = e
            elif isinstance(e, tuple) and e[0] == "released":
                active.pop(e[2], None)
        return list(active.values())

    def observed_with(self, admission: Admission) -> list[Obs]:
        return [
            o for o in self.observations() if o.run == admission.run and o.index > admission.index
        ]

    def usage(self, dim: str, t_us: int) -> Fraction:
        total = Fraction(0)
        for o in self.observations():
            second = o.at_us // US
            if o.at_us <= t_us and second * US > t_us - DAY_US:
                total += self.tokens_of(o) if dim == "tpd" else self.requests_of(o)
        return total

    def remaining(self, admission: Admission, dim: str) -> Fraction:
        forecast = admission.forecast_tokens if dim == "tpd" else admission.forecast_requests
        if forecast is None:
            return Fraction(0)
        seen = self.observed_with(admission)
        used = sum(
            (self.tokens_of(o) if dim == "tpd" else Fraction(self.requests_of(o)) for o in seen),
            Fraction(0),
        )
        return max(Fraction(0), forecast - used)

    def reserved(self, dim: str) -> Fraction:
        return sum((self.remaining(a, dim) for a in self.active_runs()), Fraction(0))

    def load(self, dim: str, t_us: int) -> Fraction:
        return self.usage(dim, t_us) + self.reserved(dim)

    def dollars(self, o: Obs) -> Decimal | None:
        """The observation's dollars at the price in force, or None when unpriced."""
        if o.model is None:
            return None
        found = [p for index, model, p in self.prices if model == o.model and index < o.index]
        if not found:
            return None
        input_, cached, write, output = found[-1]
        exact = (
            o.uncached * input_ + o.cached * cached + o.cache_write * write + o.output * output
        ) / Decimal(1_000_000)
        return exact.quantize(MICRO, rounding=ROUND_HALF_EVEN)

    def spent(self) -> tuple[Fraction, Decimal, int]:
        """Tokens, dollars and unpriced tokens since cap_since (all time without one)."""
        tokens, usd, unpriced = Fraction(0), Decimal(0), 0
        for o in self.observations():
            if self.cap_since_us is not None and o.at_us < self.cap_since_us:
                continue
            tokens += self.tokens_of(o)
            dollars = self.dollars(o)
            if dollars is None:
                unpriced += o.uncached + o.cached + o.cache_write + o.output
            else:
                usd += dollars
        return tokens, usd, unpriced

    def reserved_usd(self) -> Decimal:
        total = Decimal(0)
        for a in self.active_runs():
            if a.forecast_usd is None:
                continue
            used = sum(
                (d for o in self.observed_with(a) if (d := self.dollars(o)) is not None),
                Decimal(0),
            )
            total += max(Decimal(0), a.forecast_usd - used)
        return total

    # -- the decision ----------------------------------------------------------------

    def reasons(self, t_us: int, run_class: str = "solver", **forecasts: Any) -> list[str]:
        return self.daily_reasons(t_us, run_class, forecasts) + self.cap_reasons(forecasts)

    def daily_reasons(self, t_us: int, run_class: str, forecasts: dict[str, Any]) -> list[str]:
        reasons: list[str] = []
        for dim, key in (("tpd", "forecast_tokens"), ("rpd", "forecast_requests")):
            limit = self.limits.get(dim)
            if limit is None:
                continue
            forecast = forecasts.get(key)
            if forecast is None:
                reasons.append(f"{dim}_forecast_required")
                continue
            if forecast > limit["target"]:
                reasons.append(f"{dim}_forecast_exceeds_target")
            needed = self.load(dim, t_us) + forecast + limit["cold_start_reserve"]
            available = limit["target"] - (
                limit["evaluator_reserve"] if run_class == "solver" else 0
            )
            if needed > available:
                protected = run_class == "solver" and needed <= limit["target"]
                reasons.append(
                    f"{dim}_evaluator_reserve_protected"
                    if protected
                    else f"{dim}_headroom_exhausted"
                )
        return reasons

    def cap_reasons(self, forecasts: dict[str, Any]) -> list[str]:
        reasons: list[str] = []
        reached = exceeded = False
        tokens, usd, _ = self.spent()
        if self.cap_tokens is not None:
            if tokens >= self.cap_tokens:
                reached = True
            elif (
                tokens + self.reserved("tpd") + (forecasts.get("forecast_tokens") or 0)
                > self.cap_tokens
            ):
                exceeded = True
        if self.cap_usd is not None:
            forecast_usd = forecasts.get("forecast_usd")
            forecast = Decimal(0) if forecast_usd is None else Decimal(repr(forecast_usd))
            if usd >= self.cap_usd:
                reached = True
            elif usd + self.reserved_usd() + forecast > self.cap_usd:
                exceeded = True
        if reached:
            reasons.append("spend_cap_reached")
        if exceeded:
            reasons.append("spend_cap_exceeded")
        return reasons
