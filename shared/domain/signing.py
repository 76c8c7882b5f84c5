"""HMAC signatures: producer requests (docs/api.md#producer-signatures) and internal chunk messages.

Producer header: ``X-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]`` with
``v1 = HMAC-SHA256(secret, f"{t}.{METHOD}.{path_and_query}.".encode() + body)``.
Every comparison is constant-time; secrets never appear in an error message.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


class SignatureError(Exception):
    """A refused signature; ``code`` is the SPEC's machine code."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


@dataclass(frozen=True)
class ParsedSignature:
    timestamp: int
    signatures: tuple[str, ...]


def signing_payload(timestamp: int, method: str, path_and_query: str, body: bytes) -> bytes:
    return f"{timestamp}.{method.upper()}.{path_and_query}.".encode() + body


def sign_request(secret: str, timestamp: int, method: str, path_and_query: str, body: bytes) -> str:
    """The ``X-Signature`` header value a producer sends."""
    mac = hmac.new(
        secret.encode(), signing_payload(timestamp, method, path_and_query, body), hashlib.sha256
    )
    return f"t={timestamp},v1={mac.hexdigest()}"


def parse_signature_header(header: str) -> ParsedSignature:
    timestamp: int | None = None
    sigs: list[str] = []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            raise SignatureError("signature_invalid", "malformed X-Signature header")
        if name == "t":
            if not _TIMESTAMP.fullmatch(value):
                raise SignatureError("signature_invalid", "malformed signature timestamp")
            timestamp = int(value)
        elif name == "v1":
            candidate = value.strip().lower()
            # Only well-formed digests are compared (compare_digest refuses non-ASCII text).
            if _HEX_DIGEST.fullmatch(candidate):
                sigs.append(candidate)
    if timestamp is None or not sigs:
        raise SignatureError("signature_invalid", "X-Signature needs t= and at least one v1=")
    return ParsedSignature(timestamp, tuple(sigs))


class StreamingVerifier:
    """Checks a producer signature over a body that arrives in parts.

    The header is checked at once (missing, malformed, stale: refused before the
    body is read); the MACs of every active secret are updated as the body
    streams, and ``verify`` compares them in constant time at the end.
    """

    def __init__(
        self,
        header: str | None,
        secrets: Iterable[str],
        method: str,
        path_and_query: str,
        now: int,
        tolerance_s: int,
    ) -> None:
        if not header:
            raise SignatureError("signature_missing", "X-Signature header is required")
        self._parsed = parse_signature_header(header)
        if abs(now - self._parsed.timestamp) > tolerance_s:
            raise SignatureError(
                "timestamp_outside_tolerance",
                f"signature timestamp is more than {tolerance_s} s away from server time",
            )
        prefix = signing_payload(self._parsed.timestamp, method, path_and_query, b"")
        self._macs = [hmac.new(secret.encode(), prefix, hashlib.sha256) for secret in secrets]

    def update(self, data: bytes) -> None:
        for mac in self._macs:
            mac.update(data)

    def verify(self) -> None:
        matched = False
        for mac in self._macs:
            expected = mac.hexdigest()
            for candidate in self._parsed.signatures:
                # Evaluate every pair so timing does not reveal which one matched.
                matched |= hmac.compare_digest(expected, candidate)
        if not matched:
            raise SignatureError("signature_invalid", "signature does not match")


def verify_request(
    header: str | None,
    secrets: Iterable[str],
    method: str,
    path_and_query: str,
    body: bytes,
    now: int,
    tolerance_s: int,
) -> None:
    """Raise ``SignatureError`` unless one ``v1`` matches one active secret."""
    verifier = StreamingVerifier(header, secrets, method, path_and_query, now, tolerance_s)
    verifier.update(body)
    verifier.verify()


def _canonical(fields: Mapping[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def sign_message(key: bytes, fields: Mapping[str, Any]) -> str:
    """Signature of an internal chunk message over its canonical JSON."""
    return hmac.new(key, _canonical(fields), hashlib.sha256).hexdigest()


def verify_message(key: bytes, fields: Mapping[str, Any], signature: str) -> bool:
    if not _HEX_DIGEST.fullmatch(signature):
        return False
    return hmac.compare_digest(sign_message(key, fields), signature)


def token_digest(token: str) -> str:
    """Bearer tokens are configured as SHA-256 hex digests, never in clear."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, digests: Iterable[str]) -> bool:
    digest = token_digest(token)
    found = False
    for candidate in digests:
        found |= hmac.compare_digest(digest, candidate.strip().lower())
    return found
