"""`GET /openapi.json`: OpenAPI 3.1 generated from the request and answer types the
code uses (`msgspec.json.schema_components`), never written by hand."""

from typing import Any

import msgspec

from quotaledger import __version__
from quotaledger.server.routes import Route
from quotaledger.usecases.registry import USE_CASES

ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"const": False},
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        },
    },
    "required": ["ok", "error"],
}
REF = "#/components/schemas/{name}"


def document(routes: dict[str, Route]) -> bytes:
    typed = [route for route in routes.values() if route.request_type is not None]
    types = [t for route in typed for t in (route.request_type, _answer_type(route))]
    (refs, components) = msgspec.json.schema_components(types, ref_template=REF)
    components["Error"] = ERROR_SCHEMA
    paths: dict[str, Any] = {}
    for route in typed:
        request_ref = refs[typed.index(route) * 2]
        answer_ref = refs[typed.index(route) * 2 + 1]
        paths[f"/v1/{route.name}"] = _path(route, request_ref, answer_ref, components)
    for route in routes.values():
        if route.request_type is None:  # not yet typed: an object of keyword arguments
            paths[f"/v1/{route.name}"] = _path(route, {"type": "object"}, {"type": "object"}, {})
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "quotaledger", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
    return msgspec.json.encode(doc)


def _answer_type(route: Route) -> Any:
    return USE_CASES[route.name].answer_type()


def _path(route: Route, request: Any, answer: Any, components: dict[str, Any]) -> Any:
    responses = {
        "200": {"description": "the answer (a refusal too)", "content": _json(answer)},
        "default": {
            "description": "an error",
            "content": _json({"$ref": REF.format(name="Error")}),
        },
    }
    operation: dict[str, Any] = {"operationId": route.name, "responses": responses}
    if route.writes:
        operation["requestBody"] = {"required": True, "content": _json(request)}
        return {"post": operation}
    operation["parameters"] = _parameters(request, components)
    return {"get": operation}


def _parameters(request: Any, components: dict[str, Any]) -> list[dict[str, Any]]:
    ref = request.get("$ref", "")
    schema = components.get(ref.rsplit("/", 1)[-1], request)
    required = set(schema.get("required", ()))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": field}
        for name, field in schema.get("properties", {}).items()
    ]


def _json(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}
