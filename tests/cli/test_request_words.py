"""A request's fields carry their own words (issue 36): each field of a runner's
per-event requests has a description, and `--help`, /openapi.json and the Python
API's docstring all print that one text (the CLI's options are made from it)."""

from __future__ import annotations

import pytest

from quotaledger import Ledger
from quotaledger.server import openapi
from quotaledger.usecases.capacity import (
    AdmitRequest,
    ObserveRequest,
    RejectRequest,
    ReleaseRequest,
)
from quotaledger.usecases.decode import CLI, HTTP, Request, field_descriptions
from tests.support import run_cli

REQUESTS = {
    "observe": ObserveRequest,
    "admit": AdmitRequest,
    "reject": RejectRequest,
    "release": ReleaseRequest,
}
API_ONLY = {"provider", "wait_s"}
"""A report already resolved: the CLI reads the provider's headers instead; a wait in
seconds: the CLI says `--wait [--wait-timeout-s N]`."""


def _flat(text: str) -> str:
    """Text with its line breaks and indentation as one space (help wraps lines)."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def schemas() -> dict[str, dict]:
    return openapi.document()["components"]["schemas"]


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_every_field_has_a_description(name: str) -> None:
    request_type: type[Request] = REQUESTS[name]
    assert set(field_descriptions(request_type)) == set(request_type.__struct_fields__)


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_help_openapi_and_the_api_print_each_description(name: str, schemas: dict) -> None:
    request_type = REQUESTS[name]
    done = run_cli(name, "--help")
    assert done.code == 0, done.stderr
    help_text = _flat(done.stdout)
    properties = schemas[request_type.__name__]["properties"]
    api_doc = _flat(getattr(Ledger, name).__doc__ or "")
    for field, description in field_descriptions(request_type).items():
        # The help puts a value default before the sentence's end: "[default: solver]."
        words = _flat(description).removesuffix(".")
        if field not in API_ONLY:
            flag = CLI(field)
            assert flag in help_text
            after_flag = help_text[help_text.index(flag + " ") :]
            assert words in after_flag, (field, words)
        assert properties[HTTP(field)]["description"] == description  # `class` over HTTP
        assert f"{field}: {_flat(description)}" in api_doc


def test_the_finder_reads_the_outermost_description() -> None:
    # A field's type may carry its own description (a token count's range): the
    # field's, written outside it, is the one msgspec's schema shows and the one read.
    assert field_descriptions(AdmitRequest)["forecast_rpm"] == "Requests per minute it will make."
