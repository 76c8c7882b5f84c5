"""Redis claims: the fast path of exactly-once (docs/architecture.md#dedup-leases).

A claim is a short lease owned by one settle attempt (``SET key token NX PX``),
renewed while the attempt works, and turned into a ``done`` mark only after
the ledger transaction commits. A key leased by another live attempt is not
dropped: the caller retries the chunk later. Redis losing every key costs
only speed: the ledger's unique constraint remains the guard.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

_BATCH = 20_000  # keys per script call: one call per chunk, a bounded Redis pause

# Lease every free key in one call: SET NX PX with the attempt's token. A key
# still holding the token of a finished attempt (its done marker exists) is
# free: it is taken over. Returns the longest time (ms) any contended lease
# still has to run, then the 1-based positions of keys held by another live
# attempt. ARGV[3] is the prefix of done markers; reading a key outside KEYS is
# fine on a single Redis (not on Redis Cluster). A bare 'done' value is how
# older settleq versions marked finished keys.
_CLAIM = """
local contended = {0}
for i, key in ipairs(KEYS) do
  local holder = redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
  if holder and holder ~= ARGV[1] then
    if holder == 'done' or redis.call('EXISTS', ARGV[3] .. holder) == 1 then
      redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
    else
      contended[#contended + 1] = i
      local left = redis.call('PTTL', key)
      if left > contended[1] then contended[1] = left end
    end
  end
end
return contended
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
    # How long (ms) the longest of the contended leases still runs: a holder
    # that died lets go of it no later than that.
    contended_for_ms: int = 0


class ClaimStore:
    """Leases on reconciliation keys. After its commit an attempt sets one done
    marker for its token (not one write per key): its keys are free from then
    on, and expire with their lease."""

    def __init__(self, client: redis.Redis, prefix: str, lease_ms: int) -> None:
        self._redis = client
        self._prefix = prefix
        self._done_prefix = f"{prefix}:claimdone:"
        self._lease_ms = lease_ms
        self._claim: Any = client.register_script(_CLAIM)
        self._renew: Any = client.register_script(_RENEW)
        self._release: Any = client.register_script(_RELEASE)

    def key(self, kind: str, reconciliation_key: str, contract_version: int) -> str:
        return f"{self._prefix}:claim:{kind}:{contract_version}:{reconciliation_key}"

    def keys(self, kind: str, by_version: Mapping[int, Iterable[str]]) -> list[str]:
        """The claim keys of reconciliation keys per contract version, in
        (reconciliation key, version) order."""
        if len(by_version) == 1:  # the common case: one prefix, sorted keys
            ((version, keys),) = by_version.items()
            head = self.key(kind, "", version)
            return [head + key for key in sorted(keys)]
        idents = sorted((key, version) for version, keys in by_version.items() for key in keys)
        return [self.key(kind, key, version) for key, version in idents]

    def claim(self, keys: Sequence[str]) -> Claim:
        """Lease every free key in one round trip; report those leased by others."""
        claim = Claim(token=uuid.uuid4().hex, keys=list(keys))
        for start in range(0, len(keys), _BATCH):
            part = claim.keys[start : start + _BATCH]
            left, *positions = self._claim(
                keys=part, args=[claim.token, self._lease_ms, self._done_prefix]
            )
            claim.contended += [part[i - 1] for i in positions]
            claim.contended_for_ms = max(claim.contended_for_ms, int(left))
        return claim

    def renew(self, claim: Claim) -> None:
        if claim.keys:
            self._renew(keys=claim.keys, args=[claim.token, self._lease_ms])

    def release(self, claim: Claim) -> None:
        if claim.keys:
            self._release(keys=claim.keys, args=[claim.token])

    def mark_done(self, claim: Claim) -> None:
        """After commit: the keys are in the ledger, so later claims may take them.
        The marker outlives the keys: none was renewed after the commit."""
        if claim.keys:
            self._redis.set(self._done_prefix + claim.token, 1, px=self._lease_ms)

    def live_leases(self, keys: Sequence[str]) -> list[str]:
        """The keys leased by an attempt that has not finished (for tests and ops)."""
        if not keys:
            return []
        values: list[bytes | None] = self._redis.mget(keys)  # type: ignore[assignment]
        holders = sorted({v for v in values if v is not None and v != b"done"})
        markers = self._redis.mget([self._done_prefix.encode() + h for h in holders])
        live = {h for h, marker in zip(holders, markers, strict=True) if marker is None}
        return [k for k, v in zip(keys, values, strict=True) if v in live]


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
