"""Prices and spend over HTTP (SPEC §12.4, §12.5): `POST /v1/price_set`, `GET /v1/prices`,
the cap and the forecasts of §12.3-§12.4 in the served requests, and /openapi.json."""

from __future__ import annotations

from pathlib import Path

from tests.server.serving import serving


def test_prices_and_a_cap_through_the_server(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        priced = server.post(
            "price_set", model="gpt-4o", input_usd_per_mtok=2.5, output_usd_per_mtok=10
        )
        assert (priced.status, priced.exit_code) == (200, 0)
        assert priced.json["price"]["cached_input_usd_per_mtok"] == 2.5
        assert priced.json["event"]["kind"] == "price.set"
        listed = server.get("prices")
        assert listed.json["prices"]["gpt-4o"]["output_usd_per_mtok"] == 10.0
        assert server.post("configure", goal="g", quota_tpd=100_000, cap_usd=0.01).exit_code == 0
        observed = server.post(
            "observe", goal="g", model="gpt-4o", uncached_input=2_000, cached_input=0, output=500
        )
        assert observed.exit_code == 0
        refused = server.post(
            "admit", goal="g", run="r", forecast_tokens=1_000, forecast_requests=2
        )
        assert refused.exit_code == 1
        assert refused.json["reasons"] == ["spend_cap_reached"]
        assert refused.json["figures"]["spend"]["usd"]["spent"] == 0.01
        bad = server.post("price_set", model="m", input_usd_per_mtok=-1, output_usd_per_mtok=1)
        assert (bad.status, bad.exit_code) == (400, 2)
        assert bad.json["error"]["code"] == "invalid_usd"
        document = server.call("GET", "/openapi.json").json
        assert "/v1/price_set" in document["paths"] and "/v1/prices" in document["paths"]
