"""The server decodes each command's request into the one request type the Python API
and the CLI decode into (issue 25: one request type per use case, decoded once where
it enters), and its OpenAPI document describes exactly those types."""

from __future__ import annotations

import pytest

from quotaledger import Ledger
from quotaledger.server import openapi, routes
from quotaledger.usecases.decode import HTTP, documented
from quotaledger.usecases.registry import SERVED, USE_CASES


@pytest.mark.parametrize("name", sorted(SERVED))
def test_a_route_decodes_the_api_methods_request_type(name: str) -> None:
    case = routes.use_case_of(f"/v1/{name}", "POST" if USE_CASES[name].writes else "GET")
    request_type = case.request_type()
    assert request_type is USE_CASES[name].request_type()
    method = getattr(Ledger, name)
    if hasattr(method, "use_case"):  # `log` streams: the API method is its own
        assert method.__doc__ == documented(request_type)
    schema = openapi.document()["components"]["schemas"][request_type.__name__]
    # named as HTTP names them (`class`, where Python's keyword is `class_`)
    assert set(schema["properties"]) == {HTTP(field) for field in request_type.__struct_fields__}


def test_every_use_case_is_served_or_named_as_not() -> None:
    assert set(SERVED) | {"verify", "repair", "checkpoint", "export", "import_", "report",
                          "probe_run"} == set(USE_CASES)  # fmt: skip
