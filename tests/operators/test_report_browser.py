"""The report of a goal enforcing tpm, itpm, otpm and rpm, as headless Chromium renders it
with scripts disabled (issue 29): what an operator sees must be the fold.

From the rendered page (its laid-out text and its SVG), not from the generator's data:
- every configured dimension has a chart whose title and unit are visible (laid out,
  inside the page) and name the dimension and its unit (tokens or requests per minute);
- at sampled times, each chart's stacked usage, reserved, provider-used, target and
  quota lines read back (through the chart's own y-axis labels) to what `inspect --at`
  says of that dimension, within the drawing's rounding;
- refusal markers are coloured by the dimension that bound them; the refusals table
  gives the binding dimension's figures; the config is a table, not a dump.

Chromium is a Debian package (`apt-get install chromium`); `.ci/run` installs it, and
under CI=true a missing browser fails this test instead of skipping it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from quotaledger.journal.clock import US_PER_S, format_us, parse_at
from quotaledger.render.followup import audit_line, journal_words
from tests.operators.headless import Browser, find_chromium
from tests.operators.operators_helpers import at

UNITS = {
    "tpm": "tokens per minute",
    "itpm": "tokens per minute",
    "otpm": "tokens per minute",
    "rpm": "requests per minute",
}

PAGE_JS = """JSON.stringify([...document.querySelectorAll('svg.chart')].map(svg => {
  const width = document.documentElement.scrollWidth;
  const shown = el => {
    const r = el.getBoundingClientRect(), cs = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= width
      && cs.visibility === 'visible' && cs.display !== 'none' && +cs.opacity > 0;
  };
  const texts = sel => [...svg.querySelectorAll(sel)].filter(shown)
    .map(t => ({text: t.textContent, y: +t.getAttribute('y')}));
  const shapes = sel => [...svg.querySelectorAll(sel)]
    .map(p => ({label: p.querySelector('title').textContent, points: p.getAttribute('points'),
                color: p.getAttribute('stroke') || p.getAttribute('fill')}));
  const plot = svg.querySelector('rect.plot');
  return {
    dimension: svg.dataset.dimension || null, t0: svg.dataset.t0 || null,
    x_min: +svg.dataset.xMinS, x_max: +svg.dataset.xMaxS,
    titles: texts('text.chart-title'), units: texts('text.y-unit'), ticks: texts('text.y-tick'),
    plot: [+plot.getAttribute('x'), +plot.getAttribute('y'),
           +plot.getAttribute('width'), +plot.getAttribute('height')],
    lines: shapes('polyline.line'), stacks: shapes('polygon.stack'),
    refusals: shapes('g.marker.refusal'),
  };
}))"""

ROWS_JS = """JSON.stringify({
  refusals: [...document.querySelectorAll('table.refusals tr.refusal')].map(r => r.innerText),
  audits: [...document.querySelectorAll('table.refusals tr.refusal')].map(r => [
    ...r.nextElementSibling.querySelectorAll('code.audit')].filter(c => c.offsetWidth > 0
      && c.getBoundingClientRect().right <= document.documentElement.clientWidth)
    .map(c => c.innerText)),
  admissions: [...document.querySelectorAll('table.admissions > tbody > tr')].map(
    r => r.innerText),
  configs: document.querySelector('table.configs').innerText,
  wide: [...document.querySelectorAll('table')].filter(t => !t.closest('table table')
    && t.getBoundingClientRect().right > document.documentElement.clientWidth)
    .map(t => t.className),
})"""


def _four_dimensions(path: str) -> None:
    """tpm, itpm, otpm and rpm, provider reports of itpm and rpm, a refusal bound by
    each of itpm, rpm and otpm, and one by the cooldown."""
    anthropic = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "18",
        "anthropic-ratelimit-requests-reset": at(40),
        "anthropic-ratelimit-input-tokens-limit": "80000",
        "anthropic-ratelimit-input-tokens-remaining": "30000",
        "anthropic-ratelimit-input-tokens-reset": at(35),
    }

    def forecasts(tpm: int, itpm: int, otpm: int, rpm: int) -> dict[str, int]:
        return {"forecast_tpm": tpm, "forecast_itpm": itpm, "forecast_otpm": otpm,
                "forecast_rpm": rpm}  # fmt: skip

    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=4, quota_tpm=100_000, quota_itpm=80_000,
                         quota_otpm=20_000, quota_rpm=50, target_rpm=40,
                         cached_input_weight=0.5, at=at(0))  # fmt: skip
        ledger.observe(goal="g", run="a", uncached_input=9_000, cached_input=4_000,
                       cache_write_input=2_000, output=1_500, requests=4, at=at(2))  # fmt: skip
        ledger.admit(goal="g", run="a", arm="baseline", **forecasts(30_000, 20_000, 5_000, 10),
                     at=at(3))  # fmt: skip
        ledger.admit(goal="g", run="b", arm="control", **forecasts(30_000, 25_000, 5_000, 10),
                     at=at(5))  # fmt: skip
        ledger.observe(goal="g", run="b", uncached_input=20_000, cached_input=0, output=4_000,
                       requests=12, provider_headers=anthropic, at=at(10))  # fmt: skip
        ledger.admit(goal="g", run="c", arm="treatment", **forecasts(10_000, 30_000, 2_000, 5),
                     at=at(12))  # fmt: skip
        ledger.admit(goal="g", run="d", arm="treatment", **forecasts(10_000, 5_000, 2_000, 25),
                     at=at(14))  # fmt: skip
        ledger.reject(goal="g", run="a", retry_after_s=10, at=at(20))
        ledger.admit(goal="g", run="e", arm="treatment", **forecasts(5_000, 4_000, 1_000, 2),
                     at=at(22))  # fmt: skip
        ledger.release(goal="g", run="a", at=at(45))
        ledger.observe(goal="g", run="b", uncached_input=5_000, cached_input=1_000,
                       output=9_000, requests=6, at=at(50))  # fmt: skip
        ledger.admit(goal="g", run="f", arm="treatment", **forecasts(5_000, 4_000, 12_000, 2),
                     at=at(55))  # fmt: skip


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = find_chromium()
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is missing: .ci/run installs the Debian package chromium")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return binary


def _render(chromium: str, page: Path, shots: Path) -> tuple[list[dict[str, Any]], Any]:
    browser = Browser(chromium)
    try:
        browser.open(page.resolve().as_uri())
        charts = browser.call("Runtime.evaluate", expression=PAGE_JS, returnByValue=True)
        rows = browser.call("Runtime.evaluate", expression=ROWS_JS, returnByValue=True)
        browser.screenshot(shots)
    finally:
        browser.close()
    return json.loads(charts["result"]["value"]), json.loads(rows["result"]["value"])


_SUFFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


class Axis:
    """A chart's mappings, read from what it shows: time from its plot box and x extent,
    values from its visible y-tick labels."""

    def __init__(self, chart: dict[str, Any]) -> None:
        self.t0_us = parse_at(chart["t0"])
        self.x_min, self.x_max = chart["x_min"], chart["x_max"]
        self.left, _, self.width, self.height = chart["plot"]
        ticks = []
        for tick in chart["ticks"]:
            number, suffix = re.fullmatch(r"([0-9.]+)([kMG]?)", tick["text"]).groups()
            ticks.append((float(number) * _SUFFIX[suffix], tick["y"] - 4))  # text sits 4 px low
        (v0, y0), (v1, y1) = min(ticks), max(ticks)
        self.per_px = (v1 - v0) / (y0 - y1)
        self.v0, self.y0 = v0, y0
        self.tolerance = 0.25 * self.per_px  # vertices are drawn at a tenth of a pixel

    def px(self, at_us: int) -> float:
        seconds = (at_us - self.t0_us) / US_PER_S
        return self.left + (seconds - self.x_min) / (self.x_max - self.x_min) * self.width

    def value(self, y_px: float) -> float:
        return self.v0 + (self.y0 - y_px) * self.per_px


def _vertices(points: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",") for p in points.split())]


def _step_at(vertices: list[tuple[float, float]], x_px: float) -> float | None:
    """The y of a step outline at x (the last vertex at or before it); None outside."""
    if not vertices or x_px < vertices[0][0] or x_px > vertices[-1][0]:
        return None
    return [y for x, y in vertices if x <= x_px][-1]


def _upper(points: str) -> list[tuple[float, float]]:
    """A stacked polygon's top outline: its vertices until x turns back."""
    vertices = _vertices(points)
    end = next((i for i in range(1, len(vertices)) if vertices[i][0] < vertices[i - 1][0]), None)
    return vertices[: end if end is None else end - 1]


def _check_chart(chart: dict[str, Any], views: dict[int, Any]) -> int:
    """Every line and the stack of one dimension's chart against `inspect --at`; returns
    the number of comparisons made."""
    name = chart["dimension"]
    axis = Axis(chart)
    lines: dict[str, list[list[tuple[float, float]]]] = {}
    for line in chart["lines"]:
        lines.setdefault(line["label"], []).append(_vertices(line["points"]))
    tops = [_upper(s["points"]) for s in chart["stacks"]]
    compared = 0
    for at_us, view in views.items():
        truth = view["dimensions"][name]
        x_px = axis.px(at_us)
        drawn = {
            "usage": _step_at(tops[-1], x_px),
            "reserved": _step_at(lines["reserved"][0], x_px),
            "target": _step_at(lines["target"][0], x_px),
            "quota": _step_at(lines["quota"][0], x_px),
        }
        providers = [_step_at(v, x_px) for v in lines.get("provider used", [])]
        if x_px >= max(x for x, _ in tops[-1]):
            drawn.pop("usage")  # the stack ends 60 s after the last observation
        drawn["provider_used"] = next((y for y in providers if y is not None), None)
        for key, y_px in drawn.items():
            expected = truth[key]
            where = f"{name} {key} at {format_us(at_us)}"
            if expected is None:
                assert y_px is None, f"{where}: drawn, but not live"
                continue
            assert y_px is not None, f"{where}: not drawn"
            assert abs(axis.value(y_px) - expected) <= axis.tolerance, (where, axis.value(y_px))
            compared += 1
        if name == "tpm":  # and each part of the tpm stack, bottom to top
            weight = view["config"]["tokens"]["cached_input_weight"]
            usage = view["usage"]
            parts = [usage["uncached_input"], usage["cache_write_input"]]
            parts += [usage["cached_input"] * weight, usage["output"]]
            heights = [_step_at(top, x_px) for top in tops]
            if None not in heights:
                below = 0.0
                for part, top in zip(parts, heights, strict=True):
                    assert abs(axis.value(top) - below - part) <= 2 * axis.tolerance
                    below = axis.value(top)
                    compared += 1
    return compared


def test_four_dimension_report_reads_as_the_fold_in_chromium(
    chromium: str, journal_path: str, tmp_path: Path
) -> None:
    _four_dimensions(journal_path)
    page = tmp_path / "report.html"
    with Ledger.open(journal_path) as ledger:
        ledger.report(goal="g", out=str(page))
    shots = Path(os.environ.get("QUOTALEDGER_SCREENSHOT_DIR", tmp_path))
    charts, tables = _render(chromium, page, shots / "report-four-dimensions.png")

    by_dimension = {c["dimension"]: c for c in charts if c["dimension"]}
    assert list(by_dimension) == ["tpm", "itpm", "otpm", "rpm"]
    for name, chart in by_dimension.items():
        titles = [t["text"] for t in chart["titles"]]
        assert len(titles) == 1 and titles[0].startswith(f"{name.upper()}:"), titles
        assert UNITS[name] in titles[0] and [u["text"] for u in chart["units"]] == [UNITS[name]]
        assert len(chart["ticks"]) >= 3  # a readable y-axis

    # Sampled 0.7 s past each second: never on a step's edge (events fall on whole seconds).
    times_us = [parse_at(at(s + 0.7)) for s in range(0, 110, 3)]
    with Ledger.open(journal_path, write=False) as ledger:
        views = {t: ledger.inspect(goal="g", at=format_us(t))["goals"]["g"] for t in times_us}
    compared = sum(_check_chart(c, views) for c in by_dimension.values())
    assert compared > 4 * 4 * len(times_us) // 2

    # Refusal markers: one colour per binding dimension, the same on every chart.
    colours: dict[str, set[str]] = {}
    for chart in by_dimension.values():
        for marker in chart["refusals"]:
            bound = re.match(r"refused(?: \(binding (\w+)\))?:", marker["label"])
            assert bound is not None, marker["label"]
            colours.setdefault(bound.group(1) or "-", set()).add(marker["color"])
    assert set(colours) == {"ITPM", "RPM", "OTPM", "-"}
    assert all(len(c) == 1 for c in colours.values())
    assert len({c for cs in colours.values() for c in cs}) == 4

    # Every table fits the page's width: nothing is read by scrolling sideways.
    assert tables["wide"] == [], tables["wide"]

    # The refusals table speaks of the binding dimension, in its figures.
    itpm, rpm, cooldown, otpm = tables["refusals"]
    assert "itpm_headroom_exhausted" in itpm and "ITPM (tokens per minute) binding" in itpm
    assert (
        "\tload 50,000 (max of usage 33,000, reserved 45,000, provider used 50,000) + "
        "forecast 30,000 vs target 72,000; headroom 22,000 ITPM\t" in itpm
    ), itpm
    assert "RPM (requests per minute) binding" in rpm and "rpm_provider_exhausted" in rpm
    assert "capacity_cooldown_active" in cooldown and "TPM (tokens per minute)\t" in cooldown
    assert "OTPM (tokens per minute) binding" in otpm
    assert "{" not in tables["configs"] and "ITPM\t80,000\t72,000" in tables["configs"]

    # Every refusal carries its audit as a complete command, which runs as pasted
    # (into /bin/sh, from another directory) and audits that very refusal.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    seqs = [int(row.split("\t", 1)[0]) for row in tables["refusals"]]
    for seq, audits in zip(seqs, tables["audits"], strict=True):
        assert audits == [audit_line(seq, journal_words(journal_path))], audits
        pasted = _paste(audits[0], elsewhere)
        assert pasted.returncode == 0, pasted.stderr
        assert pasted.stdout.startswith(f"audit of seq {seq} capacity.refused"), pasted.stdout

    # The admissions table gives every configured dimension's figures, not TPM alone:
    # run a's forecasts were 30,000 TPM, 20,000 ITPM, 5,000 OTPM, 10 RPM.
    first = tables["admissions"][0]
    for dimension, forecast in (("TPM", "30,000"), ("ITPM", "20,000"), ("OTPM", "5,000"),
                                ("RPM", "10")):  # fmt: skip
        assert re.search(rf"\b{dimension}\t{forecast}\t", first), (dimension, first)


def _paste(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUOTALEDGER_JSON": "0"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["/bin/sh", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
