"""Secrets sealed at rest (docs/architecture.md#producer-keys).

A producer key's secret must be readable again (HMAC verifies with the secret
itself, so it cannot be stored hashed), but a copy of the database alone must
not give it away. It is sealed with keys derived from the internal signing key
(``SETTLEQ_INTERNAL_SIGNING_KEY``, or the one ``settleq migrate`` stored):
encrypt-then-MAC from the standard library alone, HMAC-SHA256 both as the
keystream (counter mode over a random nonce) and as the tag, which also binds
the row it belongs to (``bound_to``: a sealed secret copied to another key's
row does not open there).

Sealed text: ``v1.`` + urlsafe base64 of nonce (16 bytes) + ciphertext + tag (32).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

_VERSION = "v1."
_NONCE, _TAG, _BLOCK = 16, 32, 32


class SealError(ValueError):
    """Sealed text that does not open with this key (another key, or tampered)."""


def _subkey(key: bytes, purpose: bytes) -> bytes:
    return hmac.new(key, b"settleq sealed secrets: " + purpose, hashlib.sha256).digest()


def _keystream(key: bytes, nonce: bytes, length: int) -> bytes:
    blocks = (length + _BLOCK - 1) // _BLOCK
    return b"".join(
        hmac.new(key, nonce + i.to_bytes(4, "big"), hashlib.sha256).digest() for i in range(blocks)
    )[:length]


def _tag(key: bytes, bound_to: str, nonce: bytes, ciphertext: bytes) -> bytes:
    bound = bound_to.encode()
    message = len(bound).to_bytes(4, "big") + bound + nonce + ciphertext
    return hmac.new(_subkey(key, b"authenticate"), message, hashlib.sha256).digest()


def seal(key: bytes, secret: str, bound_to: str) -> str:
    """``secret`` encrypted and authenticated under ``key``, for the row ``bound_to``."""
    nonce = secrets.token_bytes(_NONCE)
    plain = secret.encode()
    stream = _keystream(_subkey(key, b"encrypt"), nonce, len(plain))
    ciphertext = bytes(a ^ b for a, b in zip(plain, stream, strict=True))
    sealed = nonce + ciphertext + _tag(key, bound_to, nonce, ciphertext)
    return _VERSION + base64.urlsafe_b64encode(sealed).decode()


def unseal(key: bytes, sealed: str, bound_to: str) -> str:
    """The secret ``seal`` sealed; ``SealError`` when it does not open (the tag
    is compared in constant time before anything is decrypted)."""
    if not sealed.startswith(_VERSION):
        raise SealError("not a sealed secret")
    try:
        raw = base64.urlsafe_b64decode(sealed[len(_VERSION) :].encode())
    except (binascii.Error, ValueError):
        raise SealError("not a sealed secret") from None
    if len(raw) < _NONCE + _TAG:
        raise SealError("not a sealed secret")
    nonce, ciphertext, tag = raw[:_NONCE], raw[_NONCE:-_TAG], raw[-_TAG:]
    if not hmac.compare_digest(tag, _tag(key, bound_to, nonce, ciphertext)):
        raise SealError("the sealed secret does not open with this key")
    stream = _keystream(_subkey(key, b"encrypt"), nonce, len(ciphertext))
    try:
        return bytes(a ^ b for a, b in zip(ciphertext, stream, strict=True)).decode()
    except UnicodeDecodeError:
        raise SealError("the sealed secret does not open with this key") from None
