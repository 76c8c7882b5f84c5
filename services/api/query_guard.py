"""A query parameter an operation does not publish is refused (docs/api.md#errors).

Ignored, a misspelt ``partition_key=`` on an X12 submission would settle the
file under the partition its own segments name, and a misspelt filter would
list more than the caller asked for: 422 ``unknown_query_parameter``, naming
what the operation takes. What it takes is what ``openapi.yaml`` says, read
from the app's own document once.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.routing import APIRoute

from services.api.errors import ApiError

_API = ("/v1/", "/admin/")  # the dashboard's pages keep their own query (a job id)


def _published(app: FastAPI) -> dict[tuple[str, str], frozenset[str]]:
    known: dict[tuple[str, str], frozenset[str]] | None = getattr(
        app.state, "published_queries", None
    )
    if known is None:  # read once per app (kept on it, so it goes with the app)
        known = app.state.published_queries = _read(app)
    return known


def _read(app: FastAPI) -> dict[tuple[str, str], frozenset[str]]:
    paths: dict[str, dict[str, Any]] = app.openapi().get("paths", {})
    return {
        (method.upper(), path): frozenset(
            p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"
        )
        for path, item in paths.items()
        for method, operation in item.items()
        if isinstance(operation, dict)
    }


async def refuse_unknown_query(request: Request) -> None:
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not route.path_format.startswith(_API):
        return
    names = _published(request.app).get((request.method, route.path_format))
    if names is None:
        return
    unknown = sorted(set(request.query_params.keys()) - names)
    if unknown:
        takes = ", ".join(sorted(names)) or "none"
        raise ApiError(
            422,
            "unknown_query_parameter",
            f"{route.path_format} takes no query parameter {unknown[0][:64]!r} (it takes: {takes})",
            [
                {"loc": ["query", name[:64]], "type": "unknown_query_parameter"}
                for name in unknown[:20]
            ],
        )
