"""Times in query strings (docs/api.md#disputes): whatever instant or text a
client sends, the answer is the page (or CSV) or 422 ``invalid_datetime``,
never a 500, on each ledger backend. ``opened_before`` is the API's only time
parameter; documents' dates and times are checked in tests/unit."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.api.app import create_app
from tests.support.infra import VIEWER_TOKEN, ServiceEnv

pytestmark = pytest.mark.both_backends
AUTH = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
CSV = {**AUTH, "Accept": "text/csv"}


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings()), raise_server_exceptions=False) as client:
        yield client


def opened_before(http: TestClient, text: str, headers: dict[str, str]) -> tuple[int, str]:
    response = http.get(f"/v1/disputes?opened_before={quote(text, safe='')}", headers=headers)
    code = response.json()["error"]["code"] if response.status_code != 200 else ""
    return response.status_code, code


@pytest.mark.regression
@pytest.mark.parametrize(
    "text",
    [
        "0001-01-01T00:00:00+01:00",  # an instant in year 0 once in UTC
        "9999-12-31T23:59:59-01:00",  # ... in year 10000
        "0001-01-01T00:00:00+23:59",
        "9999-12-31T23:59:59.999999-23:59",
    ],
)
@pytest.mark.parametrize("headers", [AUTH, CSV], ids=["json", "csv"])
def test_a_time_outside_the_utc_calendar_is_422_not_500(
    http: TestClient, text: str, headers: dict[str, str]
) -> None:
    # Before: 500 internal_error (astimezone's OverflowError was not caught).
    assert opened_before(http, text, headers) == (422, "invalid_datetime")


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z"])
@pytest.mark.parametrize("headers", [AUTH, CSV], ids=["json", "csv"])
def test_the_calendars_first_and_last_instants_are_answered(
    http: TestClient, text: str, headers: dict[str, str]
) -> None:
    assert opened_before(http, text, headers) == (200, "")


_OFFSETS = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda minutes: dt.timezone(dt.timedelta(minutes=minutes))
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    local=st.datetimes(min_value=dt.datetime.min, max_value=dt.datetime.max),
    zone=_OFFSETS,
    csv=st.booleans(),
)
def test_any_time_with_any_offset_is_answered_or_422(
    http: TestClient, local: dt.datetime, zone: dt.timezone, csv: bool
) -> None:
    status = opened_before(http, local.replace(tzinfo=zone).isoformat(), CSV if csv else AUTH)
    assert status in {(200, ""), (422, "invalid_datetime")}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=40))
def test_any_text_is_answered_or_422(http: TestClient, text: str) -> None:
    # A control character is refused before the route reads the time.
    refusals = {(422, "invalid_datetime"), (422, "invalid_characters")}
    assert opened_before(http, text, AUTH) in {(200, ""), *refusals}
