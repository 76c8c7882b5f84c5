"""Finishing touches on the generated OpenAPI document: it must say what the
app really does (a test compares it with openapi.yaml, schemathesis with the
app). Every error body is ``ErrorBody``; outages are 503 everywhere; the
credentials each operation takes are declared."""

from __future__ import annotations

from typing import Any

from services.api.openapi.rules import publish_constraints

ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
_PUBLIC = {"/healthz", "/readyz", "/openapi.json", "/dashboard"}  # /dashboard: a page, no data
_VIEWER = ("/metrics", "/v1/dashboard", "/v1/disputes")  # viewer or operator token
SECURITY_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "viewer or operator token (docs/api.md#viewer-and-operator-tokens)",
    },
    "producerKeyId": {"type": "apiKey", "in": "header", "name": "X-Key-Id"},
    "producerSignature": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Signature",
        "description": "t=<unix>,v1=<hex HMAC-SHA256> (docs/api.md#producer-signatures)",
    },
}
_PRODUCER: dict[str, list[str]] = {"producerKeyId": [], "producerSignature": []}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ERROR_REF}}}


def finish(schema: dict[str, Any], component_schemas: dict[str, Any]) -> dict[str, Any]:
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.update(component_schemas)
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    components["securitySchemes"] = SECURITY_SCHEMES
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            if path in _PUBLIC:
                continue
            responses["422"] = _error(
                responses.get("422", {}).get("description", "invalid request")
            )
            responses.setdefault("401", _error("missing or invalid credentials"))
            responses.setdefault("503", _error("the database or the broker is unreachable"))
            if path == "/v1/batches":
                operation["security"] = [_PRODUCER]
            elif path.startswith("/v1/jobs"):
                operation["security"] = [{"bearer": []}, _PRODUCER]
            elif path.startswith(_VIEWER):
                operation["security"] = [{"bearer": []}]
            else:
                operation["security"] = [{"bearer": []}]
                responses.setdefault("403", _error("needs an operator token"))
    publish_constraints(schema)
    return schema
