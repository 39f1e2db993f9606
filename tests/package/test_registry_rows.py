"""One registry row per use case (usecases/registry.py): the Python API's typed
`endpoint(...)` lines say what the rows say, and every part a row names exists."""

from __future__ import annotations

import inspect

import pytest

from quotaledger import api
from quotaledger.render.output import Output
from quotaledger.usecases.registry import USE_CASES, UseCase, resolve

CASES = list(USE_CASES.values())


def _endpoints() -> dict[str, object]:
    return {
        name: member
        for name, member in vars(api.Ledger).items()
        if callable(member) and hasattr(member, "use_case")
    }


def test_the_api_has_one_endpoint_per_row() -> None:
    """A streaming use case (`log`: its answers as they come) is a method of its own."""
    streams = {name for name, case in USE_CASES.items() if case.streams}
    assert sorted(_endpoints()) == sorted(set(USE_CASES) - streams)
    assert all(callable(getattr(api.Ledger, name)) for name in streams)


@pytest.mark.parametrize(
    "case", [c for c in CASES if not c.streams], ids=[c.name for c in CASES if not c.streams]
)
def test_an_endpoint_line_matches_its_row(case: UseCase) -> None:
    endpoint = _endpoints()[case.name]
    service_type, method = endpoint.use_case  # type: ignore[attr-defined]
    assert service_type is case.service_type()
    assert method is getattr(case.service_type(), case.name)
    assert endpoint.request_type is case.request_type()  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_row_names_parts_that_exist(case: UseCase) -> None:
    assert case.answer_type() is not None
    if case.cli is not None:
        assert resolve(f"cli.{case.cli}.register")
    renderers = [r for r in (case.text, case.output) if r is not None]
    assert len(renderers) <= 1, f"{case.name}: a text or an output, not both"
    printed_by_server = case.served and case.cli is not None
    if printed_by_server:  # a CLI client of a server prints what the server renders
        assert renderers or case.streams, f"{case.name} is served and has no renderer"
    if case.text is not None:
        parameters = inspect.signature(resolve(f"render.{case.text}")).parameters.values()
        assert [p.name for p in parameters if p.default is p.empty] == ["answer"]
    if case.output is not None:
        function = resolve(f"render.{case.output}")
        assert list(inspect.signature(function).parameters) == ["request", "answer", "shown"]
        assert inspect.signature(function).return_annotation in ("Output", Output)
