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
_BATCH = 20_000  # keys per script call: one call per chunk, a bounded Redis pause

# Lease every free key in one call: SET NX PX with the attempt's token. Returns
# the 1-based positions of keys held by another live attempt (a done mark is
# not a conflict: the ledger will call the line a duplicate).
_CLAIM = """
local contended = {}
for i, key in ipairs(KEYS) do
  local holder = redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
  if holder and holder ~= ARGV[1] and holder ~= 'done' then
    contended[#contended + 1] = i
  end
end
return contended
"""
_DONE = """
for i, key in ipairs(KEYS) do redis.call('SET', key, 'done', 'EX', ARGV[1]) end
return #KEYS
"""
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
        self._claim: Any = client.register_script(_CLAIM)
        self._done: Any = client.register_script(_DONE)
        self._renew: Any = client.register_script(_RENEW)
        self._release: Any = client.register_script(_RELEASE)

    def key(self, kind: str, reconciliation_key: str, contract_version: int) -> str:
        return f"{self._prefix}:claim:{kind}:{contract_version}:{reconciliation_key}"

    def claim(self, keys: Sequence[str]) -> Claim:
        """Lease every free key in one round trip; report those leased by others."""
        claim = Claim(token=uuid.uuid4().hex, keys=list(keys))
        for start in range(0, len(keys), _BATCH):
            part = claim.keys[start : start + _BATCH]
            positions = self._claim(keys=part, args=[claim.token, self._lease_ms])
            claim.contended += [part[i - 1] for i in positions]
        return claim

    def renew(self, claim: Claim) -> None:
        if claim.keys:
            self._renew(keys=claim.keys, args=[claim.token, self._lease_ms])

    def release(self, claim: Claim) -> None:
        if claim.keys:
            self._release(keys=claim.keys, args=[claim.token])

    def mark_done(self, claim: Claim) -> None:
        """After commit: the keys are in the ledger; later claims may skip them."""
        for start in range(0, len(claim.keys), _BATCH):
            self._done(keys=claim.keys[start : start + _BATCH], args=[self._done_ttl_s])


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
