"""The pages the API serves load nothing from the internet (issue 29, item 16):
a site without internet gets the whole product, its API reference included."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.api.routes.dashboard import STATIC
from tests.support.infra import ServiceEnv


@pytest.fixture(scope="module")
def http(test_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(test_env.settings())) as client:
        yield client


@pytest.mark.regression
def test_docs_is_our_own_page_and_links_the_openapi_document(http: TestClient) -> None:
    # Before: FastAPI's /docs, which loads Swagger UI from cdn.jsdelivr.net.
    page = http.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'href="/openapi.json"' in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert http.get("/redoc").status_code == 404
    assert http.get("/openapi.json").status_code == 200


@pytest.mark.parametrize("path", sorted(STATIC.iterdir()), ids=lambda p: p.name)
def test_no_page_or_asset_names_another_host(path: object) -> None:
    text = path.read_text()  # type: ignore[attr-defined]
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", text), path
    assert not re.search(r"""(import|from)\s*\(?\s*["'](https?:)?//""", text), path
