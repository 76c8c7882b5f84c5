"""The server's real constraints, published in the OpenAPI document, so that a
client generated from ``openapi.yaml`` cannot build a request the server
refuses for its shape (docs/api.md#the-exact-contract):

- every string parameter refuses C0 controls and DEL, as the
  ``RefuseControlCharacters`` middleware does;
- a cursor is unpadded base64url (services/api/pagination.py) of at most 128
  characters: the shape of a ``next_cursor``; only one the server issued names
  a position, so any other is still 422 ``invalid_cursor``;
- ``PUT /v1/contracts/{kind}/...`` is published once per kind, each with its
  kind's contract schema as its body (the route is one: an unknown kind is 404);
- a map's keys are judged by ``propertyNames`` (pydantic writes their pattern
  as ``patternProperties``, which lets any other key through).
"""

from __future__ import annotations

import copy
from typing import Any

from shared.domain.kinds import KINDS

NO_CONTROL_CHARACTERS = r"^[^\x00-\x1f\x7f]*$"
CURSOR = {
    "type": "string",
    "minLength": 2,
    "maxLength": 128,
    "pattern": r"^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2,3})?$",
}
CONTRACT_PATH = "/v1/contracts/{kind}/{partition_key}/{version}"


def contract_schemas() -> dict[str, Any]:
    """Each kind's contract body schema (and its definitions), for components."""
    found: dict[str, Any] = {}
    for kind in KINDS.values():
        model = kind.contract_model
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        found.update(schema.pop("$defs", {}))
        found[model.__name__] = schema
    return found


def _keys_by_name(node: Any) -> None:
    """``{"patternProperties": {P: S}}`` -> ``propertyNames`` with P, values S."""
    if isinstance(node, list):
        for item in node:
            _keys_by_name(item)
    if not isinstance(node, dict):
        return
    patterns = node.get("patternProperties")
    if isinstance(patterns, dict) and len(patterns) == 1 and "additionalProperties" not in node:
        [(pattern, values)] = node.pop("patternProperties").items()
        node["propertyNames"] = {**node.get("propertyNames", {}), "pattern": pattern}
        node["additionalProperties"] = values
    for value in node.values():
        _keys_by_name(value)


def _strings(schema: dict[str, Any]) -> list[dict[str, Any]]:
    if schema.get("type") == "string":
        return [schema]
    return [s for option in schema.get("anyOf", []) for s in _strings(option)]


def _parameters(operation: dict[str, Any]) -> None:
    for parameter in operation.get("parameters", []):
        for string in _strings(parameter.get("schema", {})):
            if parameter["name"] == "cursor":
                string.update(CURSOR)
            else:
                string.setdefault("pattern", NO_CONTROL_CHARACTERS)
                if parameter["in"] == "path":
                    string.setdefault("minLength", 1)


def _per_kind_contracts(paths: dict[str, Any]) -> None:
    put = paths.get(CONTRACT_PATH, {}).pop("put", None)
    if put is None:
        return
    for name, kind in KINDS.items():
        operation = copy.deepcopy(put)
        operation["operationId"] = f"{put['operationId']}_{name}"
        operation["summary"] = f"Put a {name} contract version"
        operation["parameters"] = [p for p in operation["parameters"] if p["name"] != "kind"]
        ref = {"$ref": f"#/components/schemas/{kind.contract_model.__name__}"}
        operation["requestBody"]["content"]["application/json"]["schema"] = ref
        paths[CONTRACT_PATH.replace("{kind}", name)] = {"put": operation}


def publish_constraints(schema: dict[str, Any]) -> None:
    paths: dict[str, Any] = schema.get("paths", {})
    for operations in paths.values():
        for operation in operations.values():
            _parameters(operation)
    _per_kind_contracts(paths)
    schema["components"]["schemas"].update(contract_schemas())
    _keys_by_name(schema["components"]["schemas"])
