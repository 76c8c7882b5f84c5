"""A producer key's webhook endpoints and their secrets
(shared/adapters/db/webhooks/endpoints.py, docs/api.md#webhooks), on both ledgers."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine

from shared.adapters.db.webhooks import endpoints
from shared.domain import webhooks
from tests.support.factories import uid

pytestmark = pytest.mark.both_backends

NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)


def test_a_key_creates_reads_and_deletes_its_own_endpoints_only(engine: Engine) -> None:
    mine, theirs = uid("K-"), uid("K-")
    first, secret = endpoints.create(
        engine, mine, "https://a.example/hooks", ["job.completed", "job.completed"], None, NOW
    )
    assert first.id.startswith("we_") and first.status == "enabled"
    assert first.events == ("job.completed",)
    assert secret.startswith("whsec_") and first.signing_secrets(NOW) == [secret]
    second, _ = endpoints.create(
        engine, mine, "https://b.example/h", ["dispute.resolved", "job.completed"], "ERP", NOW
    )
    assert second.events == ("dispute.resolved", "job.completed")
    other, _ = endpoints.create(engine, theirs, "https://c.example/h", ["job.completed"], None, NOW)

    # Oldest first; created at the same time: by id.
    assert [e.id for e in endpoints.list_for(engine, mine)] == sorted([first.id, second.id])
    assert endpoints.get(engine, other.id, mine) is None  # another key's reads as none
    assert endpoints.get(engine, other.id, None) == other  # an operator sees every key's
    assert not endpoints.remove(engine, other.id, mine)
    assert endpoints.remove(engine, first.id, mine)
    assert endpoints.get(engine, first.id, mine) is None
    assert {e.id for e in endpoints.list_for(engine, None)} >= {second.id, other.id}


def test_an_endpoint_never_shows_its_secrets_in_its_repr(engine: Engine) -> None:
    endpoint, secret = endpoints.create(
        engine, uid("K-"), "https://a.example/h", ["job.completed"], None, NOW
    )
    rotated = endpoints.rotate(engine, endpoint.id, endpoint.key_id, NOW)
    assert rotated is not None
    shown = repr(endpoints.get(engine, endpoint.id, None))
    assert secret not in shown and rotated not in shown and "whsec_" not in shown


def test_a_rotated_secret_signs_beside_its_successor_for_24_hours(engine: Engine) -> None:
    endpoint, old = endpoints.create(
        engine, uid("K-"), "https://a.example/h", ["job.completed"], None, NOW
    )
    assert endpoints.rotate(engine, endpoint.id, "another key", NOW) is None
    new = endpoints.rotate(engine, endpoint.id, endpoint.key_id, NOW)
    assert new is not None and new != old
    after = endpoints.get(engine, endpoint.id, endpoint.key_id)
    assert after is not None
    assert after.signing_secrets(NOW + dt.timedelta(hours=23, minutes=59)) == [new, old]
    assert after.signing_secrets(NOW + dt.timedelta(hours=24)) == [new]
    # A request signed during the grace verifies with either secret.
    body = b"{}"
    headers = webhooks.headers(after.signing_secrets(NOW), "msg_1", int(NOW.timestamp()), body)
    assert webhooks.verify(old, headers, body, NOW.timestamp()).ok
    assert webhooks.verify(new, headers, body, NOW.timestamp()).ok


def test_unknown_events_are_refused_and_an_operator_disables(engine: Engine) -> None:
    with pytest.raises(endpoints.UnknownEvent):
        endpoints.create(engine, uid("K-"), "https://a.example/h", ["job.started"], None, NOW)
    with pytest.raises(endpoints.UnknownEvent):
        endpoints.create(engine, uid("K-"), "https://a.example/h", [], None, NOW)
    endpoint, _ = endpoints.create(
        engine, uid("K-"), "https://a.example/h", ["dead_letters.created"], None, NOW
    )
    assert endpoints.disable(engine, endpoint.id, "operator")
    after = endpoints.get(engine, endpoint.id, None)
    assert after is not None and (after.status, after.disabled_reason) == ("disabled", "operator")
    assert not endpoints.disable(engine, "we_none", "operator")
