"""Redis leases against a real Redis (docs/architecture.md#dedup-leases)."""

from __future__ import annotations

import time

import redis

from shared.adapters.leases import ClaimStore, LeaseKeeper
from tests.support.factories import uid


def store(client: redis.Redis, lease_ms: int = 1000) -> ClaimStore:
    return ClaimStore(client, uid("tclaims"), lease_ms=lease_ms)


def test_free_keys_are_leased_and_others_see_them_contended(redis_client):
    claims = store(redis_client)
    keys = [claims.key("promo_accrual", uid(), 1) for _ in range(3)]
    mine = claims.claim(keys)
    assert mine.contended == []
    theirs = claims.claim(keys)
    assert theirs.contended == keys
    claims.release(theirs)  # releasing what it does not own changes nothing
    assert claims.claim(keys).contended == keys
    claims.release(mine)
    assert claims.claim(keys).contended == []


def test_done_keys_are_not_contended(redis_client):
    claims = store(redis_client)
    keys = [claims.key("promo_accrual", uid(), 1)]
    first = claims.claim(keys)
    assert claims.live_leases(keys) == keys
    claims.mark_done(first)
    assert claims.live_leases(keys) == []
    second = claims.claim(keys)
    assert second.contended == []
    assert redis_client.get(keys[0]) == second.token.encode()  # taken over


def test_keys_marked_done_by_an_older_version_are_free(redis_client):
    claims = store(redis_client)
    keys = [claims.key("promo_accrual", uid(), 1)]
    redis_client.set(keys[0], "done", ex=60)
    assert claims.claim(keys).contended == []


def test_a_dead_workers_lease_expires(redis_client):
    claims = store(redis_client, lease_ms=200)
    keys = [claims.key("promo_accrual", uid(), 1)]
    claims.claim(keys)
    time.sleep(0.3)
    assert claims.claim(keys).contended == []


def test_a_working_attempt_keeps_its_lease(redis_client):
    # Renewed every 0.5 s, it outlives 2.5 leases; a scheduler stall shorter than
    # a second on a loaded machine cannot let it lapse (a 300 ms lease did).
    claims = store(redis_client, lease_ms=1500)
    keys = [claims.key("promo_accrual", uid(), 1)]
    mine = claims.claim(keys)
    with LeaseKeeper(claims, mine, 1500):
        time.sleep(3.8)
        assert claims.claim(keys).contended == keys
