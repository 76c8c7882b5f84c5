"""Secrets sealed at rest (docs/architecture.md#producer-keys).

A producer key's secret must be readable again (HMAC verifies with the secret
itself, so it cannot be stored hashed), but a copy of the database alone must
not give it away. It is sealed with AES-256-GCM (``cryptography``) under a key
derived from the internal signing key (``SETTLEQ_INTERNAL_SIGNING_KEY``, or the
one ``settleq migrate`` stored), with the row it belongs to as associated data
(``bound_to``: a sealed secret copied to another key's row does not open there).

Sealed text: ``v1.`` + urlsafe base64 of nonce (12 bytes) + ciphertext and tag.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_VERSION = "v1."
_NONCE = 12


class SealError(ValueError):
    """Sealed text that does not open with this key (another key, or tampered)."""


def _cipher(key: bytes) -> AESGCM:
    # A key of its own for sealing, whatever the internal key's length.
    return AESGCM(hmac.new(key, b"settleq sealed secrets", hashlib.sha256).digest())


def seal(key: bytes, secret: str, bound_to: str) -> str:
    """``secret`` encrypted and authenticated under ``key``, for the row ``bound_to``."""
    nonce = secrets.token_bytes(_NONCE)
    sealed = nonce + _cipher(key).encrypt(nonce, secret.encode(), bound_to.encode())
    return _VERSION + base64.urlsafe_b64encode(sealed).decode()


def unseal(key: bytes, sealed: str, bound_to: str) -> str:
    """The secret ``seal`` sealed; ``SealError`` when it does not open."""
    if not sealed.startswith(_VERSION):
        raise SealError("not a sealed secret")
    try:
        raw = base64.urlsafe_b64decode(sealed[len(_VERSION) :].encode())
    except (binascii.Error, ValueError):
        raise SealError("not a sealed secret") from None
    if len(raw) <= _NONCE:
        raise SealError("not a sealed secret")
    try:
        plain = _cipher(key).decrypt(raw[:_NONCE], raw[_NONCE:], bound_to.encode())
        return plain.decode()
    except (InvalidTag, UnicodeDecodeError):
        raise SealError("the sealed secret does not open with this key") from None
