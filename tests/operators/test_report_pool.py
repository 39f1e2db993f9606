"""`report --pool P` (SPEC §12.1): each pool dimension's load stacked by member goal
against the pool's target, on every face, and as headless Chromium renders it: what
an operator sees must be the pool's fold (`inspect --pool P --at T`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from quotaledger import Error, Ledger
from quotaledger.journal.clock import format_us, parse_at
from tests.operators.operators_helpers import at
from tests.operators.test_report_browser import Axis, _render, _step_at, _upper, _vertices
from tests.server.serving import serving

MEMBERS = ("camp-a", "camp-b", "nightly")


def _three_members(path: str) -> None:
    """Two campaigns and a nightly job on one pool (tpm, rpm and a daily tpd): a
    borrower, a protected share's refusal, a 429 that cools the pool down."""

    def f(tpm: int, rpm: int, tokens: int) -> dict[str, int]:
        return {"forecast_tpm": tpm, "forecast_rpm": rpm, "forecast_tokens": tokens}

    def admitted(goal: str, run: str, t: float, *forecasts: int) -> None:
        assert ledger.admit(goal=goal, run=run, **f(*forecasts), at=at(t))["admitted"]

    with Ledger.open(path) as ledger:
        ledger.pool_configure(pool="org", quota_tpm=100_000, target_tpm=90_000, quota_rpm=100,
                              quota_tpd=5_000_000, at=at(0))  # fmt: skip
        ledger.configure(goal="camp-a", pool="org", pool_share=0.4, at=at(0))
        ledger.configure(goal="camp-b", pool="org", pool_share=0.4, pool_lending_limit=0.1,
                         at=at(0))  # fmt: skip
        ledger.configure(goal="nightly", pool="org", pool_share=0.2, at=at(0))
        ledger.configure(goal="alone", quota_tpm=1000, at=at(0))  # in no pool: not drawn
        admitted("camp-a", "a1", 2, 30_000, 20, 100_000)
        ledger.observe(goal="camp-a", run="a1", uncached_input=12_000, cached_input=0,
                       output=3_000, requests=8, at=at(8))  # fmt: skip
        admitted("camp-a", "a2", 10, 30_000, 20, 100_000)
        protected = ledger.admit(goal="nightly", run="n1", **f(15_000, 10, 100_000), at=at(14))
        assert protected["reasons"] == ["pool_share_protected"]
        ledger.observe(goal="nightly", run="n1", uncached_input=8_000, cached_input=0,
                       output=2_000, requests=5, at=at(25))  # fmt: skip
        ledger.reject(goal="nightly", run="n1", retry_after_s=10, at=at(30))
        cooling = ledger.admit(goal="camp-b", run="b1", **f(10_000, 5, 100_000), at=at(33))
        assert cooling["reasons"] == ["pool_cooldown_active"]
        ledger.release(goal="camp-a", run="a1", at=at(45))
        admitted("camp-b", "b2", 50, 25_000, 10, 100_000)
        ledger.observe(goal="camp-b", run="b2", uncached_input=20_000, cached_input=0,
                       output=5_000, requests=10, at=at(70))  # fmt: skip


def test_the_pool_report_on_the_api_and_its_bad_inputs(journal_path: str, tmp_path: Path) -> None:
    _three_members(journal_path)
    page = tmp_path / "pool.html"
    with Ledger.open(journal_path, write=False) as ledger:
        answer = ledger.report(pool="org", out=str(page))
        assert answer["pool"] == "org" and answer["goal"] is None
        assert (answer["decisions"], answer["admissions"], answer["refusals"]) == (5, 3, 2)
        assert answer["rejections"] == 1 and answer["bytes"] == page.stat().st_size
        html = page.read_text()
        assert "<script" not in html and "pool <code>org</code>" in html
        for goal in MEMBERS:
            assert f"<title>goal {goal}</title>" in html  # a stacked area per member
        assert "goal alone" not in html
        cooldowns = html.split("<h2>The pool's cooldowns</h2>")[1].split("</table>")[0]
        assert "<th>goal</th>" in cooldowns and "<td>nightly</td>" in cooldowns  # whose 429
        for name in ("tpm", "rpm", "tpd"):
            assert f'data-dimension="{name}"' in html
        ranged = ledger.report(pool="org", out=str(tmp_path / "r.html"), since=at(30),
                               until=at(40))  # fmt: skip
        assert (ranged["decisions"], ranged["rejections"]) == (1, 1)
        for bad, code in (
            ({"pool": "nope"}, "unknown_pool"),
            ({"pool": "camp-a"}, "unknown_pool"),
            ({"pool": "org", "goal": "camp-a"}, "invalid_option"),
            ({}, "invalid_option"),
            ({"pool": "org", "since": at(9), "until": at(1)}, "invalid_option"),
        ):
            out = tmp_path / "bad.html"
            with pytest.raises(Error) as raised:
                ledger.report(out=str(out), **bad)
            assert raised.value.code == code, bad
            assert not out.exists()


def test_the_pool_report_on_the_cli_and_the_server(
    journal_path: str, tmp_path: Path, cli: Any
) -> None:
    _three_members(journal_path)
    out = tmp_path / "cli.html"
    done = cli("report", "--pool", "org", "--out", str(out))
    assert done.code == 0 and done.json["pool"] == "org" and out.exists()
    both = cli("report", "--pool", "org", "--goal", "camp-a", "--out", str(tmp_path / "x.html"))
    assert both.code == 2 and both.json["error"]["code"] == "invalid_option"
    with serving(journal_path) as server:
        page = server.call("GET", "/report?pool=org")
        assert page.status == 200 and b'data-dimension="tpd"' in page.body
        assert server.call("GET", "/report?pool=nope").status == 400
        document = server.call("GET", "/openapi.json").json
        params = document["paths"]["/report"]["get"]["parameters"]
        assert "pool" in {p["name"] for p in params}


@pytest.fixture(scope="module")
def chromium() -> str:
    from tests.operators.headless import find_chromium

    binary = find_chromium()
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is missing: .ci/run installs the Debian package chromium")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return binary


def test_the_pool_report_reads_as_the_pools_fold_in_chromium(
    chromium: str, journal_path: str, tmp_path: Path
) -> None:
    _three_members(journal_path)
    page = tmp_path / "pool.html"
    with Ledger.open(journal_path, write=False) as ledger:
        ledger.report(pool="org", out=str(page))
        # Sampled 0.7 s past each second: never on a step's edge.
        times_us = [parse_at(at(s + 0.7)) for s in range(0, 125, 3)]
        views = {t: ledger.inspect(pool="org", at=format_us(t))["pools"]["org"] for t in times_us}
    shots = Path(os.environ.get("QUOTALEDGER_SCREENSHOT_DIR", tmp_path))
    charts, _ = _render(chromium, page, shots / "report-pool.png")
    by_dimension = {c["dimension"]: c for c in charts if c["dimension"]}
    assert list(by_dimension) == ["tpm", "rpm", "tpd"]
    compared = 0
    for name, chart in by_dimension.items():
        titles = [t["text"] for t in chart["titles"]]
        assert len(titles) == 1 and titles[0].startswith(f"{name.upper()}:"), titles
        assert "load by goal" in titles[0] and len(chart["ticks"]) >= 3
        assert [s["label"] for s in chart["stacks"]] == [f"goal {g}" for g in MEMBERS]
        axis = Axis(chart)
        tops = [_upper(s["points"]) for s in chart["stacks"]]
        lines = {line["label"]: _vertices(line["points"]) for line in chart["lines"]}
        for at_us, view in views.items():
            x_px = axis.px(at_us)
            below = 0.0
            for goal, top in zip(MEMBERS, tops, strict=True):
                y_px = _step_at(top, x_px)
                assert y_px is not None, (name, goal, format_us(at_us))
                load = view["members"][goal]["dimensions"][name]["load"]
                assert abs(axis.value(y_px) - below - load) <= 2 * axis.tolerance, (
                    name, goal, format_us(at_us), axis.value(y_px) - below, load,
                )  # fmt: skip
                below = axis.value(y_px)
                compared += 1
            for key in ("target", "quota"):
                y_px = _step_at(lines[key], x_px)
                assert y_px is not None
                expected = view["dimensions"][name][key]
                assert abs(axis.value(y_px) - expected) <= axis.tolerance, (name, key)
        # Refusal markers: a goal's, coloured by the pool dimension that bound it.
        labels = sorted(m["label"].split(":", 1)[0] for m in chart["refusals"])
        assert labels == ["goal camp-b", "goal nightly"], labels
    assert compared == 3 * 3 * len(times_us)
