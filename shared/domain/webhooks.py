"""Webhooks as Standard Webhooks defines them (docs/api.md#webhooks): secrets,
signatures, their verification, the retry schedule, and which addresses a
delivery may reach. Pure: the clock, the randomness of jitter and the DNS
answers are the caller's.

A secret is ``whsec_`` + base64 of 32 random bytes; the signing key is those
bytes. A request is signed over ``{webhook-id}.{webhook-timestamp}.{body}``
with HMAC-SHA256; ``webhook-signature`` holds ``v1,<base64>`` once per secret
still signing (two while a rotated secret's grace runs), space-separated.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
# How far a request's timestamp may be from the receiver's clock (Standard
# Webhooks' default): older ones are replays, newer ones forged.
TOLERANCE_S = 5 * 60
# Retries after the first attempt, in seconds (about 5 s, 1 min, 10 min, 1 h,
# 6 h, then every 12 h) for 3 days; then the delivery is failed.
SCHEDULE_S = (5, 60, 600, 3600, 6 * 3600)
EVERY_S = 12 * 3600
GIVE_UP_AFTER_S = 3 * 24 * 3600
JITTER = 0.2  # each wait is drawn from [1 - JITTER, 1 + JITTER] of its step
# An endpoint failing every delivery for this long is disabled.
DISABLE_AFTER_S = 5 * 24 * 3600
HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
# What an endpoint may subscribe to (``ping`` is sent by a test, to anyone).
EVENT_TYPES = (
    "job.completed",
    "dispute.resolved",
    "dead_letters.created",
    # A payer's remittance (docs/api.md#remittances-and-deductions).
    "remittance.received",
    "deduction.matched",
    "deduction.disputed",
)
# How long a rotated secret keeps signing beside its successor.
ROTATION_GRACE_S = 24 * 3600


class BadSecret(ValueError):
    """Not a ``whsec_`` secret of base64 bytes."""


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise BadSecret("a webhook secret starts with whsec_")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise BadSecret("a webhook secret is whsec_ and base64") from None
    if not key:
        raise BadSecret("a webhook secret holds at least one byte")
    return key


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of a request."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(signing: Iterable[str], message_id: str, timestamp: int, body: bytes) -> str:
    """``webhook-signature``: a signature for each secret still signing."""
    return " ".join(signature(s, message_id, timestamp, body) for s in signing)


def headers(signing: Iterable[str], message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(signing, message_id, timestamp, body),
    }


@dataclass(frozen=True)
class Verdict:
    ok: bool
    why: str  # what holds, or what does not


def verify(secret: str, request_headers: Mapping[str, str], body: bytes, now: float) -> Verdict:
    """Whether a request's signature holds for ``secret`` (as a receiver checks):
    the three headers present, the timestamp within ``TOLERANCE_S`` of ``now``,
    and one of its ``v1`` signatures equal (compared in constant time)."""
    lowered = {k.lower(): v for k, v in request_headers.items()}
    missing = [name for name in HEADERS if not lowered.get(name)]
    if missing:
        return Verdict(False, f"missing header: {', '.join(missing)}")
    message_id, stamp, signatures = (lowered[name].strip() for name in HEADERS)
    if not stamp.isascii() or not stamp.isdigit():
        return Verdict(False, "webhook-timestamp is not whole seconds since the epoch")
    timestamp = int(stamp)
    if abs(now - timestamp) > TOLERANCE_S:
        direction = "old" if timestamp < now else "in the future"
        return Verdict(False, f"webhook-timestamp is too {direction} (more than 5 min)")
    try:
        expected = signature(secret, message_id, timestamp, body).encode()
    except BadSecret as exc:
        return Verdict(False, str(exc))
    offered = [s.encode() for s in signatures.split() if s.startswith("v1,")]
    if not offered:
        return Verdict(False, "no v1 signature in webhook-signature")
    if any(hmac.compare_digest(expected, candidate) for candidate in offered):
        return Verdict(True, "the signature holds")
    return Verdict(False, "no signature matches this secret and body")


def next_wait_s(attempt: int, draw: float) -> float:
    """Seconds before attempt ``attempt + 1`` (``attempt`` 1 is the first),
    ``draw`` a number in [0, 1) for the jitter."""
    step = SCHEDULE_S[attempt - 1] if attempt <= len(SCHEDULE_S) else EVERY_S
    return step * (1 - JITTER + 2 * JITTER * draw)


def address_allowed(address: str, allow_private: bool) -> bool:
    """Whether a delivery may connect to ``address`` (an IP, after DNS): never
    a loopback, private, link-local (169.254.169.254, the cloud metadata
    service, is one), multicast, reserved, site-local or unspecified one unless
    ``allow_private`` (development and tests). An IPv6 address that embeds an
    IPv4 one is judged by the IPv4 address. ``ValueError`` for no address."""
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _SITE_LOCAL and not allow_private:
            return False  # deprecated, but routed inside a site; not global
        ip = _embedded_ipv4(ip) or ip
    if allow_private:
        return not ip.is_unspecified and not ip.is_multicast
    return ip.is_global and not ip.is_multicast


_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215: local use, not global


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries to an IPv4 host: IPv4-mapped
    (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``), NAT64
    (``64:ff9b::/96``) or 6to4 (``2002::/16``); a local-use NAT64 address
    reaches an unknown IPv4 one, so it reads as ``0.0.0.0`` (never public)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _LOCAL_NAT64:
        return ipaddress.IPv4Address(0)
    if ip in _NAT64 or (ip in _COMPATIBLE and int(ip) > 1):  # not :: nor ::1
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def gives_up(first_attempt_at: float, now: float, scale: float = 1.0) -> bool:
    """Whether a delivery has been retried long enough to be marked failed (on
    a schedule shortened ``scale`` times: tests only)."""
    return now - first_attempt_at >= GIVE_UP_AFTER_S * scale


def envelope(event_type: str, event_id: str, created_at: str, data: str) -> bytes:
    """The body of a delivery: ``{"type", "id", "created_at", "data"}`` with
    ``data`` (JSON text) as rendered once, so that every attempt sends the same
    bytes."""
    head = json.dumps({"type": event_type, "id": event_id, "created_at": created_at})
    return (head[:-1] + ', "data": ' + data + "}").encode()
