"""``/favicon.ico`` is served (issue 42, item 16): every browser that opens the
dashboard asks for it, and a 404 for it was an error in each session's console."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from tests.support.infra import ServiceEnv


@pytest.fixture(scope="module")
def http(test_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(test_env.settings())) as client:
        yield client


@pytest.mark.regression
def test_the_favicon_is_served_without_a_token(http: TestClient) -> None:
    icon = http.get("/favicon.ico")
    assert icon.status_code == 200, icon.text
    assert icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.text.lstrip().startswith("<svg") and len(icon.content) < 2048
    # The page names it, so a browser need not guess.
    page = http.get("/dashboard").text
    assert 'rel="icon"' in page and 'href="/favicon.ico"' in page
