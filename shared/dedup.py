"""Redis claims: the fast path of exactly-once (SPEC §4.4).

A claim is a short lease owned by one settle attempt (``SET key token NX PX``),
renewed while the attempt works, and turned into a ``done`` mark only after
the ledger transaction commits. A key leased by another live attempt is not
dropped: the caller retries the chunk later. Redis losing every key costs
only speed: the ledger's unique constraint remains the guard.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

DONE = "done"

# Renew or release only the keys this attempt still owns.
_RENEW = """
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2]); n = n + 1
  end
end
return n
"""
_RELEASE = """
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key); n = n + 1 end
end
return n
"""


@dataclass
class Claim:
    token: str
    keys: list[str]
    contended: list[str] = field(default_factory=list)


class ClaimStore:
    def __init__(self, client: redis.Redis, prefix: str, lease_ms: int, done_ttl_s: int) -> None:
        self._redis = client
        self._prefix = prefix
        self._lease_ms = lease_ms
        self._done_ttl_s = done_ttl_s
        self._renew: Any = client.register_script(_RENEW)
        self._release: Any = client.register_script(_RELEASE)

    def key(self, kind: str, reconciliation_key: str, contract_version: int) -> str:
        return f"{self._prefix}:claim:{kind}:{contract_version}:{reconciliation_key}"

    def claim(self, keys: Sequence[str]) -> Claim:
        """Lease every free key in one round trip; report those leased by others."""
        claim = Claim(token=uuid.uuid4().hex, keys=list(keys))
        if not keys:
            return claim
        pipe = self._redis.pipeline(transaction=False)
        for key in keys:
            # NX with GET (Redis 7): None when we took it, else the current holder.
            pipe.set(key, claim.token, nx=True, px=self._lease_ms, get=True)
        for key, holder in zip(keys, pipe.execute(), strict=True):
            if holder is not None and holder != DONE.encode():
                claim.contended.append(key)
        return claim

    def renew(self, claim: Claim) -> None:
        if claim.keys:
            self._renew(keys=claim.keys, args=[claim.token, self._lease_ms])

    def release(self, claim: Claim) -> None:
        if claim.keys:
            self._release(keys=claim.keys, args=[claim.token])

    def mark_done(self, claim: Claim) -> None:
        """After commit: the keys are in the ledger; later claims may skip them."""
        if not claim.keys:
            return
        pipe = self._redis.pipeline(transaction=False)
        for key in claim.keys:
            pipe.set(key, DONE, ex=self._done_ttl_s)
        pipe.execute()


class LeaseKeeper:
    """Renews a claim's lease every third of its length while work is under way."""

    def __init__(self, store: ClaimStore, claim: Claim, lease_ms: int) -> None:
        self._store = store
        self._claim = claim
        self._interval = lease_ms / 3000
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="lease-keeper")

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._store.renew(self._claim)
            except redis.RedisError:
                # A lost renewal only shortens the lease; the ledger still guards.
                continue
