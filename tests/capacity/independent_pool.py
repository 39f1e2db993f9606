"""An independent model of SPEC §12.1 (pools), written from the SPEC text only.

It shares no code with `projections/` or `commands/`: it keeps every event as a list
and recomputes every figure from the whole list for every question, with
`fractions.Fraction` for every quantity (shares are decimals with at most 4 places).

The rules, as SPEC §12.1 states them (member goals without gates of their own, so the
goal's own reasons are none):
- per member h and pool dimension D at t: usage_D(h) over the window (t - 60 s, t] for
  tpm/rpm (tokens = uncached + cached x the pool's weight + output; requests as given),
  over whole seconds s > t - 86,400 s for tpd; reserved_D(h) = the active runs'
  forecasts (tpd: max(0, forecast_tokens - tokens observed with the run after its
  admission)); load_D(h) = max(usage, reserved) per minute, usage + reserved per day.
- the pool's load_D = max(sum of load_D(h), provider_used_D), provider_used from the
  latest provider report any member recorded, while live (at most 60 s old and before
  its reset): limit - remaining; its room = remaining - the members' D-usage after it.
- unused(h) = max(0, share_h x T - load(h)); protected(h) = max(0, unused(h) -
  lending_h x T).
- reasons in order, each once: pool_cooldown_active, pool_forecast_required,
  pool_forecast_exceeds_target (f > T or f > (share + borrowing) x T),
  pool_headroom_exhausted (load + f > T), pool_borrowing_limit (load(g) + f > (share +
  borrowing) x T), pool_share_protected (load + f <= T < load + f + sum of others'
  protected), pool_provider_exhausted (f > room).
- a member's reject: cooldown by §3.2's rule with the pool's base/max and a streak
  across members: streak continues while at < previous until + max, else 1;
  cooldown_s = min(retry_after or base x 2^(streak-1), max); until = max(previous,
  at + cooldown_s).

Reading taken where the SPEC is open (the implementation's too): "the latest live
provider report" is the latest report of the dimension, counted while it is live.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

US = 1_000_000
WINDOW_US = 60 * US
DAY_US = 86_400 * US
DIMENSIONS = ("tpm", "itpm", "otpm", "rpm", "tpd", "rpd")
DAILY = ("tpd", "rpd")
FORECAST = {
    "tpm": "forecast_tpm",
    "itpm": "forecast_itpm",
    "otpm": "forecast_otpm",
    "rpm": "forecast_rpm",
    "tpd": "forecast_tokens",
    "rpd": "forecast_requests",
}


def frac(value: float | int | str) -> Fraction:
    return Fraction(str(value)) if isinstance(value, float) else Fraction(value)


@dataclass
class Obs:
    index: int
    goal: str
    at_us: int
    run: str | None
    uncached: int
    cached: int
    output: int
    requests: int
    report: dict[str, tuple[int, int, int]] | None = None
    """Provider report: dimension -> (limit, remaining, reset_at_us)."""


@dataclass
class Run:
    index: int
    goal: str
    run: str
    at_us: int
    forecasts: dict[str, int | None]
    released: bool = False


@dataclass
class Member:
    share: Fraction
    borrowing: Fraction
    lending: Fraction


@dataclass
class PoolModel:
    targets: dict[str, int]
    weight: Fraction = Fraction(1)
    cooldown_base_s: int = 15
    cooldown_max_s: int = 300
    members: dict[str, Member] = field(default_factory=dict)
    observations: list[Obs] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    cooldown_until_us: int | None = None
    streak: int = 0
    index: int = 0

    def _next(self) -> int:
        self.index += 1
        return self.index

    # -- events ---------------------------------------------------------------------

    def observe(self, goal: str, at_us: int, *, run: str | None = None, uncached: int = 0,
                cached: int = 0, output: int = 0, requests: int | None = None,
                report: dict[str, tuple[int, int, int]] | None = None) -> None:  # fmt: skip
        if requests is None:
            requests = 1 if uncached or cached or output else 0
        self.observations.append(
            Obs(self._next(), goal, at_us, run, uncached, cached, output, requests, report)
        )

    def admit(self, goal: str, run: str, at_us: int, forecasts: dict[str, int | None]) -> None:
        self.runs.append(Run(self._next(), goal, run, at_us, dict(forecasts)))

    def release(self, goal: str, run: str) -> None:
        for r in self.runs:
            if r.goal == goal and r.run == run and not r.released:
                r.released = True
        self._next()

    def reject(self, at_us: int, retry_after_s: int | None) -> None:
        previous = self.cooldown_until_us
        max_us = self.cooldown_max_s * US
        continues = previous is not None and at_us < previous + max_us
        self.streak = self.streak + 1 if continues else 1
        wanted = (
            retry_after_s
            if retry_after_s is not None
            else self.cooldown_base_s * 2 ** (self.streak - 1)
        )
        until = at_us + min(wanted, self.cooldown_max_s) * US
        self.cooldown_until_us = until if previous is None else max(previous, until)
        self._next()

    # -- figures ---------------------------------------------------------------------

    def _tokens(self, o: Obs, dimension: str) -> Fraction:
        if dimension in ("tpm", "tpd"):
            return o.uncached + o.cached * self.weight + o.output
        if dimension == "itpm":
            return o.uncached + o.cached * self.weight
        if dimension == "otpm":
            return Fraction(o.output)
        return Fraction(o.requests)

    def _counts(self, o: Obs, dimension: str, t_us: int) -> bool:
        if o.at_us > t_us:
            return False
        if dimension in DAILY:
            return (o.at_us // US) * US > t_us - DAY_US
        return o.at_us > t_us - WINDOW_US

    def active(self, goal: str) -> list[Run]:
        return [r for r in self.runs if r.goal == goal and not r.released]

    def usage(self, goal: str, dimension: str, t_us: int) -> Fraction:
        return sum(
            (
                self._tokens(o, dimension)
                for o in self.observations
                if o.goal == goal and self._counts(o, dimension, t_us)
            ),
            Fraction(0),
        )

    def reserved(self, goal: str, dimension: str) -> Fraction:
        total = Fraction(0)
        for r in self.active(goal):
            forecast = r.forecasts.get(FORECAST[dimension])
            if forecast is None:
                continue
            if dimension in DAILY:
                seen = sum(
                    (
                        self._tokens(o, dimension)
                        for o in self.observations
                        if o.goal == goal and o.run == r.run and o.index > r.index
                    ),
                    Fraction(0),
                )
                total += max(Fraction(0), forecast - seen)
            else:
                total += forecast
        return total

    def member_load(self, goal: str, dimension: str, t_us: int) -> Fraction:
        usage, reserved = self.usage(goal, dimension, t_us), self.reserved(goal, dimension)
        return usage + reserved if dimension in DAILY else max(usage, reserved)

    def report(self, dimension: str, t_us: int) -> tuple[Obs, tuple[int, int, int]] | None:
        """The latest report of `dimension` by any member, if live at t."""
        latest = None
        for o in self.observations:
            if o.goal in self.members and o.report and dimension in o.report and o.at_us <= t_us:
                latest = (o, o.report[dimension])
        if latest is None:
            return None
        o, (_, _, reset_us) = latest
        live = t_us - o.at_us <= WINDOW_US and t_us < reset_us
        return latest if live else None

    def pool_load(self, dimension: str, t_us: int) -> tuple[Fraction, Fraction | None]:
        """(load, the provider's room or None)."""
        total = sum((self.member_load(h, dimension, t_us) for h in self.members), Fraction(0))
        found = self.report(dimension, t_us) if dimension not in DAILY else None
        if found is None:
            return total, None
        o, (limit, remaining, _) = found
        since = sum(
            (
                self._tokens(x, dimension)
                for x in self.observations
                if x.goal in self.members and x.index > o.index
            ),
            Fraction(0),
        )
        return max(total, Fraction(limit - remaining)), remaining - since

    def protected(self, goal: str, dimension: str, t_us: int) -> Fraction:
        m, target = self.members[goal], self.targets[dimension]
        unused = max(Fraction(0), m.share * target - self.member_load(goal, dimension, t_us))
        return max(Fraction(0), unused - m.lending * target)

    # -- the decision ----------------------------------------------------------------

    def reasons(self, goal: str, forecasts: dict[str, int | None], t_us: int) -> list[str]:
        found: list[str] = []
        if self.cooldown_until_us is not None and t_us < self.cooldown_until_us:
            found.append("pool_cooldown_active")
        m = self.members[goal]
        flags = dict.fromkeys(
            (
                "pool_forecast_required",
                "pool_forecast_exceeds_target",
                "pool_headroom_exhausted",
                "pool_borrowing_limit",
                "pool_share_protected",
                "pool_provider_exhausted",
            ),
            False,
        )
        for dimension in DIMENSIONS:
            if dimension not in self.targets:
                continue
            target = self.targets[dimension]
            f = forecasts.get(FORECAST[dimension])
            if f is None:
                flags["pool_forecast_required"] = True
                continue
            load, room = self.pool_load(dimension, t_us)
            own = self.member_load(goal, dimension, t_us)
            ceiling = (m.share + m.borrowing) * target
            others = sum(
                (self.protected(h, dimension, t_us) for h in self.members if h != goal),
                Fraction(0),
            )
            if f > target or f > ceiling:
                flags["pool_forecast_exceeds_target"] = True
            if load + f > target:
                flags["pool_headroom_exhausted"] = True
            if own + f > ceiling:
                flags["pool_borrowing_limit"] = True
            if load + f <= target < load + f + others:
                flags["pool_share_protected"] = True
            if room is not None and f > room:
                flags["pool_provider_exhausted"] = True
        return found + [reason for reason, failed in flags.items() if failed]

    def admission_holds(self, goal: str, forecasts: dict[str, int | None], t_us: int) -> bool:
        """SPEC §12.1's guarantees for an admission: every pool dimension within its
        target, the goal within its borrowing limit, the others' guaranteed parts
        untouched."""
        m = self.members[goal]
        for dimension, target in self.targets.items():
            f = forecasts.get(FORECAST[dimension])
            if f is None:
                return False
            load, _ = self.pool_load(dimension, t_us)
            others = sum(
                (self.protected(h, dimension, t_us) for h in self.members if h != goal),
                Fraction(0),
            )
            if load + f > target or load + f + others > target:
                return False
            if self.member_load(goal, dimension, t_us) + f > (m.share + m.borrowing) * target:
                return False
        return True
