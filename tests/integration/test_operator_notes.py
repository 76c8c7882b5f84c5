"""An operator's note over HTTP (docs/api.md#disputes): a resolution's or a
discard's note of only invisible characters is 422 ``note_required``, before
anything is read or written (issue 29, G8)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from tests.support.infra import OPERATOR_TOKEN, ServiceEnv

OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture(scope="module")
def http(test_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(test_env.settings())) as client:
        yield client


@pytest.mark.regression
@pytest.mark.parametrize("note", ["\u200b", " \u200b\u2060 ", "\ufeff\u200d"])
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/admin/disputes/1/resolve", {"decision": "accept_model"}),
        ("/admin/disputes/resolve", {"decision": "accept_model", "limit": 1}),
        ("/admin/dead-letters/1/discard", {}),
    ],
    ids=["resolve", "bulk-resolve", "discard"],
)
def test_an_invisible_note_is_note_required(
    http: TestClient, path: str, body: dict[str, object], note: str
) -> None:
    # Before: 404 for the unknown dispute or dead letter (the note had passed),
    # and 200 {"resolved": 0} for the bulk resolve.
    response = http.post(path, json={**body, "note": note}, headers=OPERATOR)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "note_required"
