"""Figures as operators read them: a dimension's load with the parts it is the largest
of, and durations rounded for people (SPEC §3.2, §3.6; issue 29).

`load 75000 (usage 9000, reserved 0)` reads as wrong arithmetic when the provider's
count is what made the load: so a dimension's line names each part that is not zero,
and says it is the largest of them when there are several. A duration a person reads
(a cooldown, a wait) is rounded to what matters (`43.6s`, `2m05s`, `1h30m`); JSON keeps
the exact number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

UNITS = {"tpm": "TPM", "itpm": "ITPM", "otpm": "OTPM", "rpm": "RPM", "tpd": "TPD", "rpd": "RPD"}
DAILY_UNITS = frozenset({"TPD", "RPD"})
"""A daily dimension's load is usage plus reserved (SPEC §12.3), not their maximum."""


class DimensionFigures(Protocol):
    """What a dimension line needs: refusal figures and `inspect` views both have it."""

    @property
    def usage(self) -> Any: ...
    @property
    def reserved(self) -> Any: ...
    @property
    def provider_used(self) -> Any: ...
    @property
    def load(self) -> Any: ...
    @property
    def target(self) -> Any: ...
    @property
    def headroom(self) -> Any: ...


def num(value: Any) -> str:
    """A figure as the text commands print: `-` for none, a float to six significant digits."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value)


def load_text(d: DimensionFigures, fmt: Callable[[Any], str] = num, *, summed: bool = False) -> str:
    """`load 75000 (max of usage 9000, provider used 75000)`: the parts that are not zero;
    `summed` (a daily dimension): `load 2100 (usage 1100 + reserved 1000)`."""
    parts = [
        f"{label} {fmt(value)}"
        for label, value in (
            ("usage", d.usage),
            ("reserved", d.reserved),
            ("provider used", d.provider_used),
        )
        if value
    ]
    if not parts:
        return f"load {fmt(d.load)}"
    if len(parts) == 1:
        return f"load {fmt(d.load)} ({parts[0]})"
    if summed:
        return f"load {fmt(d.load)} ({' + '.join(parts)})"
    return f"load {fmt(d.load)} (max of {', '.join(parts)})"


def dimension_line(name: str, d: DimensionFigures, *, binding: bool = False, **figures: Any) -> str:
    """One configured dimension: its name, then `dimension_figures`."""
    text = dimension_figures(d, UNITS.get(name, name.upper()), **figures)
    return f"{name}{' (binding)' if binding else ''}: {text}"


def dimension_figures(
    d: DimensionFigures,
    unit: str,
    *,
    forecast: Any = None,
    cold_start: Any = 0,
    evaluator_reserve: Any = 0,
    fmt: Callable[[Any], str] = num,
) -> str:
    """A dimension's load and parts, what the request adds, its target and headroom, in
    its `unit`: `load 10 (usage 10) + forecast 2000 vs target 900; headroom 890 ITPM`."""
    text = load_text(d, fmt, summed=unit in DAILY_UNITS)
    if forecast is not None:
        text += f" + forecast {fmt(forecast)}"
    if cold_start:
        text += f" + cold start {fmt(cold_start)}"
    text += f" vs target {fmt(d.target)}"
    if evaluator_reserve:
        text += f" (evaluator reserve {fmt(evaluator_reserve)})"
    headroom = d.headroom
    if hasattr(headroom, "solver"):  # inspect: per class
        if headroom.solver == headroom.evaluator:
            return text + f"; headroom {fmt(headroom.solver)} {unit}"
        return (
            text + f"; headroom solver {fmt(headroom.solver)} / evaluator "
            f"{fmt(headroom.evaluator)} {unit}"
        )
    return text + f"; headroom {fmt(headroom)} {unit}"


class DecisionFigures(Protocol):
    """A decision's dimensions with what the tpm line adds: a refusal's figures and
    its audit's explanation both have them."""

    @property
    def dimensions(self) -> Any: ...
    @property
    def binding_dimension(self) -> Any: ...
    @property
    def cold_start_reserve_tpm(self) -> Any: ...
    @property
    def evaluator_reserve_tpm(self) -> Any: ...


def decision_dimension_lines(
    figures: DecisionFigures, fmt: Callable[[Any], str] = num
) -> list[str]:
    """A decision's line per configured dimension, in its unit, with the request's
    forecast; the binding one marked (what `admit` prints of a refusal, and `audit`)."""
    return [
        dimension_line(
            name,
            d,
            binding=name == figures.binding_dimension,
            forecast=d.forecast,
            cold_start=figures.cold_start_reserve_tpm if name == "tpm" else 0,
            evaluator_reserve=figures.evaluator_reserve_tpm if name == "tpm" else 0,
            fmt=fmt,
        )
        for name, d in (figures.dimensions or {}).items()
    ]


def parts_text(parts: dict[str, Any], fmt: Callable[[Any], str] = num) -> str:
    """`uncached 10, output 5`: the parts that are not zero (`-` when none is)."""
    return ", ".join(f"{name} {fmt(value)}" for name, value in parts.items() if value) or "-"


def duration_text(seconds: float | int | None) -> str:
    """A duration rounded for people: `0.25s`, `43.6s`, `2m05s`, `1h30m`, `2d03h`."""
    if seconds is None:
        return "-"
    value = float(seconds)
    if value < 0:
        return "-" + duration_text(-value)
    if value < 1:
        return f"{value:.2g}s"
    if value < 60:
        tenths = round(value, 1)
        return f"{tenths:g}s" if tenths < 60 else "1m00s"
    whole = round(value)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    minutes = round(value / 60)
    if minutes < 24 * 60:
        return f"{minutes // 60}h{minutes % 60:02d}m"
    hours = round(value / 3600)
    return f"{hours // 24}d{hours % 24:02d}h"


TPM_REASONS = frozenset(
    {
        "token_headroom_exhausted",
        "evaluator_reserve_protected",
        "forecast_exceeds_target",
        "tpm_provider_exhausted",
    }
)
"""The reasons that are about the tpm dimension itself (the other dimensions' reasons
start with their name)."""


def refused_on(dimension: str, reasons: list[str]) -> bool:
    """Whether one of `reasons` is about `dimension`'s own figures (not the gate-wide
    cooldown, coverage or staleness)."""
    if dimension == "tpm":
        return any(r in TPM_REASONS for r in reasons)
    return any(r.startswith(f"{dimension}_") for r in reasons)


def shortfall_text(
    shortfall: dict[str, Any], reasons: list[str], fmt: Callable[[Any], str] = num
) -> str | None:
    """`shortfall 12000 TPM, 1 RPM`: the dimensions a reason refused on; None when no
    dimension's own figures refused (a cooldown, a case slot: its "shortfall" would be
    a negative number that explains nothing)."""
    parts = [
        f"{fmt(value)} {UNITS.get(name, name.upper())}"
        + (" (the forecast fits the headroom)" if value <= 0 else "")
        for name, value in shortfall.items()
        if value is not None and refused_on(name, reasons)
    ]
    return f"shortfall {', '.join(parts)}" if parts else None
