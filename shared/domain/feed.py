"""The ledger feed's positions and cursors (docs/api.md#the-ledger-feed).

A position names one ledger row in feed order: the transaction id of the unit
that wrote it (0 on SQLite, whose one writer commits in unit order), the
unit's outbox id, and the row's id. The feed gives rows in that order, and
only below the oldest transaction still running, so a row that commits late
is never behind a position already given (docs/architecture.md#the-ledger-feed).

A cursor is a position's text with a check: a cursor settleq did not make, or
one damaged in transit, is refused rather than read as another position.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

_LAST = 2**63 - 1  # past any unit or row id (both BIGINT)
_INT = re.compile(r"-?[0-9]{1,19}")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]{1,200}")
_VERSION = "f1"


# What a feed item carries: every column of the stable ledger schema
# (docs/architecture.md#ledger-schema), in its order.
COLUMNS = (
    "id",
    "reconciliation_key",
    "contract_version",
    "kind",
    "partition_key",
    "document_id",
    "line_ref",
    "job_id",
    "outcome",
    "amount",
    "claimed_amount",
    "delta",
    "supersedes_id",
    "correlation_id",
    "created_at",
    "period",
)


class InvalidCursor(ValueError):
    """Text that is not a cursor of the feed."""


@dataclass(frozen=True, order=True)
class Position:
    xid: int
    unit: int
    entry: int

    def cursor(self) -> str:
        body = f"{_VERSION}|{self.xid}|{self.unit}|{self.entry}"
        text = f"{body}|{_check(body)}"
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


# Before the first row: backfilled units (migration 0027) are at xid -1.
START = Position(-2, 0, 0)


def end_of(xid: int, unit: int = _LAST) -> Position:
    """Past every row of the units up to (``xid``, ``unit``)."""
    return Position(xid, unit, _LAST)


def parse_cursor(cursor: str) -> Position:
    if not _BASE64URL.fullmatch(cursor):
        raise InvalidCursor(cursor)
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        raise InvalidCursor(cursor) from None
    fields = text.split("|")
    if len(fields) != 5 or fields[0] != _VERSION:
        raise InvalidCursor(cursor)
    body, check = "|".join(fields[:4]), fields[4]
    if _check(body) != check:
        raise InvalidCursor(cursor)
    numbers = fields[1:4]
    if not all(_INT.fullmatch(n) for n in numbers):
        raise InvalidCursor(cursor)
    xid, unit, entry = (int(n) for n in numbers)
    if not all(-(2**63) <= n <= _LAST for n in (xid, unit, entry)):
        raise InvalidCursor(cursor)
    return Position(xid, unit, entry)


def _check(body: str) -> str:
    # A check, not a signature: a cursor only ever selects rows its holder may
    # read anyway; this catches a cursor made by hand or cut short.
    return hashlib.sha256(body.encode()).hexdigest()[:12]
