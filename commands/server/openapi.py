"""The OpenAPI 3.1 document of the HTTP API, generated from the request and answer
types the code decodes and encodes (msgspec's JSON Schema), never written by hand."""

from __future__ import annotations

import types
import typing
from typing import Any

import msgspec

from quotaledger import __version__
from quotaledger.server.routes import ReportPageRequest
from quotaledger.usecases.decode import HTTP_KEY_OF_FIELD
from quotaledger.usecases.registry import SERVED

REF = "#/components/schemas/{name}"


class ErrorDetail(msgspec.Struct):
    """What went wrong: a public code (docs/errors.md) and a message; some errors add
    members of their own (the parameter, the goal, ...)."""

    code: str
    message: str


class ErrorAnswer(msgspec.Struct):
    """Every error's body: `--json`'s error object (`Quotaledger-Exit-Code` 2, 3 or 4)."""

    ok: bool
    error: ErrorDetail


ERROR_STATUSES = {
    "400": "Invalid input (exit 2)",
    "401": "No valid bearer token",
    "500": "The journal is corrupt (exit 3)",
    "503": "Storage failure, lock timeout or shutting down (exit 4)",
}


def _http_keys(schema: dict[str, Any]) -> None:
    properties = schema.get("properties", {})
    for field, key in HTTP_KEY_OF_FIELD.items():
        if field in properties:
            schema["properties"] = {
                (key if name == field else name): value for name, value in properties.items()
            }
            properties = schema["properties"]
            if field in schema.get("required", ()):
                schema["required"] = [key if n == field else n for n in schema["required"]]


def document() -> dict[str, Any]:
    cases = list(SERVED.values())
    types: list[Any] = [ErrorAnswer, ReportPageRequest]
    for case in cases:
        types += [case.request_type(), *_members(case.answer_type())]
    types += [t for t in dict.fromkeys(_EXTRA) if t not in types]
    refs, components = msgspec.json.schema_components(types, ref_template=REF)
    for case in cases:  # a body or query key as HTTP names it (`class`, not `class_`)
        _http_keys(components[case.request_type().__name__])
    schema_of: dict[Any, dict[str, Any]] = dict(zip(types, refs, strict=True))
    for case in cases:
        answer_type = case.answer_type()
        if answer_type not in schema_of:  # a union of answer shapes, or a described copy
            members = [schema_of[t] for t in _members(answer_type)]
            schema_of[answer_type] = members[0] if len(members) == 1 else {"anyOf": members}
    paths: dict[str, Any] = {}
    for case in cases:
        request_type, answer_type = case.request_type(), case.answer_type()
        operation: dict[str, Any] = {
            "operationId": case.name,
            "summary": (request_type.__doc__ or case.name).strip().split("\n")[0],
            "responses": _responses(case.name, schema_of[answer_type], schema_of[ErrorAnswer]),
        }
        if case.writes:
            # Inline, not a $ref: a generator cannot tell a shared component is only
            # ever a request, and reads a field with a default as always present.
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": components[request_type.__name__]}},
            }
            paths[f"/v1/{case.name}"] = {"post": operation}
        else:
            operation["parameters"] = _query(components[request_type.__name__])
            paths[f"/v1/{case.name}"] = {"get": operation}
    paths["/report"] = {
        "get": {
            "operationId": "report",
            "summary": "The goal's (or, with pool, the pool's) report page (offline HTML)",
            "parameters": _query(components["ReportPageRequest"]),
            "responses": {"200": {"description": "The page", "content": {"text/html": {}}}},
        }
    }
    paths.update(_plain_routes())
    return {
        "openapi": "3.1.0",
        "info": {"title": "quotaledger", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }


def _members(answer_type: Any) -> list[Any]:
    """An answer type, or the members of a union of answer shapes (msgspec describes
    a union of untagged Structs only one member at a time)."""
    return [_describable(t) for t in typing.get_args(answer_type) or [answer_type]]


_DESCRIBABLE: dict[Any, Any] = {}


def _describable(struct_type: Any) -> Any:
    """`struct_type`, or where one of its fields (at any depth) is a union of several
    untagged Structs, a copy whose such fields say `anyOf` their members' schemas:
    msgspec decodes such a union one member at a time, so it describes none."""
    if not (isinstance(struct_type, type) and issubclass(struct_type, msgspec.Struct)):
        return struct_type
    if struct_type in _DESCRIBABLE:
        return _DESCRIBABLE[struct_type]
    _DESCRIBABLE[struct_type] = struct_type  # a recursive type refers to itself
    fields = msgspec.structs.fields(struct_type)
    types = [_field_type(field.type) for field in fields]
    if all(new is field.type for new, field in zip(types, fields, strict=True)):
        return struct_type
    copy = msgspec.defstruct(
        struct_type.__name__,
        [
            (field.name, new, msgspec.field(default=field.default))
            if field.default is not msgspec.NODEFAULT
            else (field.name, new)
            for field, new in zip(fields, types, strict=True)
        ],
        kw_only=True,
    )
    copy.__doc__ = struct_type.__doc__
    _DESCRIBABLE[struct_type] = copy
    return copy


def _field_type(hint: Any) -> Any:
    args = typing.get_args(hint)
    if not args:
        return _describable(hint)
    structs = [a for a in args if isinstance(a, type) and issubclass(a, msgspec.Struct)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and len(structs) > 1:
        members = [_describable(a) for a in structs]
        one_of = {"anyOf": [{"$ref": REF.format(name=m.__name__)} for m in members]}
        _EXTRA.extend(members)
        rest = [a for a in args if a not in structs]
        described = typing.Annotated[Any, msgspec.Meta(extra_json_schema=one_of)]
        return typing.Union[tuple([described, *rest])] if rest else described  # noqa: UP007
    new = tuple(_field_type(a) for a in args)
    if new == args or origin is None:
        return hint
    if origin is typing.Annotated:
        return hint
    return origin[new] if origin not in (typing.Union, types.UnionType) else typing.Union[new]  # noqa: UP007


_EXTRA: list[Any] = []
"""Members of the unions `_field_type` replaced: described beside the other types."""


def _responses(name: str, answer: dict[str, Any], error: dict[str, Any]) -> dict[str, Any]:
    media = "application/jsonl" if name == "log" else "application/json"
    ok = {
        "description": "The answer (exit 0) or a refusal (exit 1): Quotaledger-Exit-Code says",
        "content": {media: {"schema": answer}},
    }
    responses: dict[str, Any] = {"200": ok}
    for status, description in ERROR_STATUSES.items():
        responses[status] = {
            "description": description,
            "content": {"application/json": {"schema": error}},
        }
    return responses


def _query(schema: dict[str, Any]) -> list[dict[str, Any]]:
    required = set(schema.get("required", ()))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": field}
        for name, field in schema.get("properties", {}).items()
    ]


def _plain_routes() -> dict[str, Any]:
    def get(operation: str, summary: str, media: str) -> dict[str, Any]:
        return {
            "get": {
                "operationId": operation,
                "summary": summary,
                "responses": {"200": {"description": summary, "content": {media: {}}}},
            }
        }

    return {
        "/metrics": get("metrics_exposition", "Prometheus text exposition", "text/plain"),
        "/healthz": get("healthz", "The process answers", "application/json"),
        "/readyz": get("readyz", "Journal open, last commit succeeded", "application/json"),
        "/openapi.json": get("openapi", "This document", "application/json"),
    }


def encoded() -> bytes:
    return msgspec.json.encode(document())
