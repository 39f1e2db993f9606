"""`report`: one self-contained offline HTML file whose step charts are exact."""

from __future__ import annotations

from html.parser import HTMLParser
from itertools import pairwise
from pathlib import Path

from quotaledger.api import Ledger
from quotaledger.journal.clock import format_us
from quotaledger.projections import audit as au
from tests.operators.operators_helpers import at, random_history
from tests.support import run_cli


class Page(HTMLParser):
    """Every start tag with its attributes, and the text of each table row."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.rows: list[tuple[str, str]] = []  # (tr class, text)
        self._row: list[str] | None = None
        self._row_class = ""
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        if tag == "tr":
            self._row, self._row_class = [], dict(attrs).get("class") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._row is not None:
            self.rows.append((self._row_class, " ".join(self._row)))
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and data.strip():
            self._row.append(data.strip())

    def having(self, tag: str, css_class: str | None = None) -> list[dict[str, str]]:
        return [
            attrs
            for name, attrs in self.tags
            if name == tag and (css_class is None or css_class in attrs.get("class", "").split())
        ]


def _scenario(path: str) -> None:
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=3, quota_tpm=10_000, target_tpm=9_000,
                         cached_input_weight=0.5, at=at(0))  # fmt: skip
        ledger.observe(goal="g", run="a", uncached_input=2000, cached_input=2000, output=500,
                       at=at(1))  # fmt: skip
        ledger.admit(goal="g", run="a", arm="baseline", forecast_tpm=4000, at=at(2))
        ledger.admit(goal="g", run="b", arm="control", forecast_tpm=4000, at=at(3))
        ledger.admit(goal="g", run="c", arm="control", forecast_tpm=4000, at=at(4))
        ledger.reject(goal="g", run="a", retry_after_s=20, at=at(5))
        ledger.admit(goal="g", run="d", arm="treatment", forecast_tpm=500, at=at(6))
        ledger.release(goal="g", run="a", at=at(40))


def _parse(path: str) -> tuple[str, Page]:
    html = Path(path).read_text()
    page = Page()
    page.feed(html)
    page.close()
    return html, page


def test_report_is_self_contained_with_charts_and_refusal_rows(
    journal_path: str, tmp_path: Path
) -> None:
    _scenario(journal_path)
    out = str(tmp_path / "report.html")
    result = run_cli("report", "--journal", journal_path, "--json", "--goal", "g", "--out", out)
    assert result.code == 0, result.stdout
    body = result.json
    assert (body["admissions"], body["refusals"], body["rejections"]) == (2, 2, 1)
    html, page = _parse(out)
    assert html.startswith("<!DOCTYPE html>")
    # Offline and script-free: no script, no external resource of any kind.
    assert not page.having("script") and not page.having("link") and not page.having("img")
    assert not any("src" in attrs or "href" in attrs for _, attrs in page.tags)
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "@import" not in html and "url(" not in html
    assert not any(k.startswith("on") for _, attrs in page.tags for k in attrs)
    # The charts: stacked usage polygons, reserved/target/quota polylines, markers, shading.
    assert len(page.having("svg")) == 2
    assert len(page.having("polygon", "stack")) == 4 + 1  # four counters + active runs
    assert len(page.having("polyline", "line")) == 3
    assert len(page.having("circle", "admission")) == 2
    assert len(page.having("g", "refusal")) == 2
    assert len(page.having("polygon", "rejection")) == 1
    assert len(page.having("rect", "cooldown")) == 1
    # The refusals table: one row per refusal, with its reasons.
    refusals = [text for css, text in page.rows if css == "refusal"]
    assert len(refusals) == 2
    assert "token_headroom_exhausted" in refusals[0] and " c " in f" {refusals[0]} "
    assert "capacity_cooldown_active" in refusals[1]


def test_report_range_and_file_errors(journal_path: str, tmp_path: Path) -> None:
    _scenario(journal_path)
    out = str(tmp_path / "part.html")
    result = run_cli("report", "--journal", journal_path, "--json", "--goal", "g", "--out", out,
                     "--since", at(3.5), "--until", at(5.5))  # fmt: skip
    assert result.code == 0, result.stdout
    assert (result.json["admissions"], result.json["refusals"]) == (0, 1)
    _, page = _parse(out)
    assert len([1 for css, _ in page.rows if css == "refusal"]) == 1
    missing = run_cli("report", "--journal", journal_path, "--json", "--goal", "g",
                      "--out", str(tmp_path / "no" / "such" / "r.html"))  # fmt: skip
    assert missing.code == 2


def test_report_writes_nothing_to_the_journal(journal_path: str, tmp_path: Path) -> None:
    _scenario(journal_path)
    before = Path(journal_path).read_bytes()
    out = tmp_path / "out" / "r.html"
    out.parent.mkdir()
    assert run_cli("report", "--journal", journal_path, "--goal", "g", "--out", out).code == 0
    assert Path(journal_path).read_bytes() == before
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]


def test_the_timeline_is_exact(tmp_path: Path) -> None:
    """At every sampled point, and just before the next one, the chart's values equal
    what `inspect --at` says: the step chart is the true step function."""
    path = str(tmp_path / "j.jsonl")
    random_history(path, 120, seed=5)
    with Ledger.open(path, write=False) as ledger:
        timeline = au.Timeline("g")
        for record, payload, _ in ledger.journal.records():
            timeline.feed(record, payload)
        timeline.finish()
        points = timeline.points
        assert len(points) > 100
        checks = list(pairwise(points))[::3]
        for point, following in checks:
            for when in (point.at_us, following.at_us - 1):
                view = ledger.inspect(goal="g", at=format_us(when))["goals"]["g"]
                assert view["usage"]["uncached_input"] == point.uncached_input_tpm
                assert view["usage"]["output"] == point.output_tpm
                assert view["usage_tpm"] == point.usage_tpm
                assert view["reserved_tpm"] == point.reserved_tpm
                assert view["active_counts"]["total"] == point.active_runs
