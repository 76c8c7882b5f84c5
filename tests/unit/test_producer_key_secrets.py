"""Producer keys' pure parts: a secret sealed at rest opens only with its key
and for its row (shared/domain/sealing.py), and the webhooks scheduler asks
the database's scope of a key before the environment's."""

from __future__ import annotations

import datetime as dt

import pytest

from services.relay.fanout import FanOut
from shared.adapters.db.webhooks.deliveries import Subscriber, Waiting
from shared.config.settings import ProducerKey, Settings
from shared.domain.sealing import SealError, seal, unseal

KEY = b"k" * 64


def test_a_sealed_secret_opens_with_its_key_for_its_row_only() -> None:
    secret = "a-secret-of-forty-three-characters-xxxxxxx"
    sealed = seal(KEY, secret, "key-1")
    assert secret not in sealed and sealed.startswith("v1.")
    assert sealed != seal(KEY, secret, "key-1")  # a fresh nonce each time
    assert unseal(KEY, sealed, "key-1") == secret
    for key, row in ((b"other" * 13, "key-1"), (KEY, "key-2")):
        with pytest.raises(SealError):
            unseal(key, sealed, row)
    tampered = sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:]
    for bad in (tampered, "v1.", "v1.!!!", secret, ""):
        with pytest.raises(SealError):
            unseal(KEY, bad, "key-1")


@pytest.mark.regression
def test_the_webhooks_scheduler_takes_a_keys_scope_from_the_database_first() -> None:
    """Issue 42 #15: it read SETTLEQ_PRODUCER_KEYS only."""
    env = [ProducerKey(key_id="env", secrets=["s1"], partitions=["*"])]
    scheduler = FanOut(Settings(producer_keys=env), None)  # type: ignore[arg-type]
    subscribers = [
        Subscriber("we_env", "env", ("job.completed",)),
        Subscriber("we_db", "db", ("job.completed",)),
    ]
    event = Waiting("evt_1", "job.completed", "job", ("V-A,B",), None, dt.datetime.now(dt.UTC))
    assert scheduler.targets(event, subscribers) == ["we_env"]
    assert scheduler.targets(event, subscribers, {"db": ("V-A,B",)}) == ["we_env", "we_db"]
    # One partition holding a comma is not two.
    assert scheduler.targets(event, subscribers, {"db": ("V-A", "B")}) == ["we_env"]
    # The database's row wins over an environment key of the same id: revoked is revoked.
    assert scheduler.targets(event, subscribers, {"env": None, "db": ("*",)}) == ["we_db"]
