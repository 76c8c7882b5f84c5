"""The pure parts of the relay's webhook fan-out and of the webhooks
scheduler: who gets an event, and a round that fails never ends either's
thread (services/relay/fanout.py, services/webhooks/scheduler.py)."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from services.relay.fanout import FanOut
from services.webhooks.scheduler import Scheduler
from shared.adapters.db.webhooks.deliveries import Subscriber, Waiting
from shared.config.settings import ProducerKey, Settings

NOW = dt.datetime(2026, 12, 4, tzinfo=dt.UTC)
KEYS = [
    ProducerKey(key_id="all", secrets=["s1"], partitions=["*"]),
    ProducerKey(key_id="vendor-a", secrets=["s2"], partitions=["VENDOR-A"]),
    ProducerKey(key_id="a-and-b", secrets=["s3"], partitions=["VENDOR-A", "VENDOR-B"]),
]
SUBSCRIBERS = [
    Subscriber("we_all", "all", ("job.completed",)),
    Subscriber("we_a", "vendor-a", ("job.completed", "dispute.resolved")),
    Subscriber("we_ab", "a-and-b", ("dispute.resolved",)),
    Subscriber("we_gone", "no-such-key", ("job.completed",)),
]


def scheduler(**settings: Any) -> Scheduler:
    return Scheduler(Settings(producer_keys=KEYS, **settings), None, lambda d, n: None)  # type: ignore[arg-type]


def fan_out(**settings: Any) -> FanOut:
    return FanOut(Settings(producer_keys=KEYS, **settings), None)  # type: ignore[arg-type]


def event(kind: str, partitions: tuple[str, ...] | None, endpoint: str | None = None) -> Waiting:
    return Waiting("evt_1", kind, "subject", partitions, endpoint, NOW)


def test_an_event_goes_to_the_keys_that_may_see_every_partition_it_tells_of() -> None:
    s = fan_out()
    assert s.targets(event("job.completed", ("VENDOR-A",)), SUBSCRIBERS) == ["we_all", "we_a"]
    # A job of two partitions: not to a key that sees only one of them.
    assert s.targets(event("job.completed", ("VENDOR-A", "VENDOR-B")), SUBSCRIBERS) == ["we_all"]
    assert s.targets(event("dispute.resolved", ("VENDOR-B",)), SUBSCRIBERS) == ["we_ab"]
    # A key no longer configured hears nothing; an unsubscribed type goes nowhere.
    assert s.targets(event("dead_letters.created", ("VENDOR-A",)), SUBSCRIBERS) == []
    # A ping goes to its one endpoint, whoever else listens.
    assert s.targets(event("ping", None, "we_ab"), SUBSCRIBERS) == ["we_ab"]


@pytest.mark.parametrize("make", [scheduler, fan_out])
def test_a_round_that_fails_does_not_end_the_thread(make: Any) -> None:
    s = make(webhook_poll_s=0.01)
    stop = threading.Event()
    rounds: list[int] = []

    def tick() -> bool:
        rounds.append(1)
        if len(rounds) == 1:
            raise KeyError("a bug in one round")
        stop.set()
        return False

    s.tick = tick  # type: ignore[method-assign]
    s.run(stop)
    assert len(rounds) == 2
