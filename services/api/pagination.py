"""Cursors of list pages: one scheme for every paged endpoint.

A cursor names the last item a page showed: that item's position fields joined
by ``|``, in unpadded base64url. Clients only pass back a page's
``next_cursor``; each endpoint decodes the fields it wrote and validates every
one before it reaches SQL. Anything else is a 422 ``invalid_cursor``.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from typing import Annotated, Literal

from fastapi import Query

from services.api.errors import ApiError
from shared.wire.times import iso, parse_instant

# The query parameter of every paged endpoint (its cursors are far shorter).
CursorQuery = Annotated[
    str | None,
    Query(max_length=128, description="The `next_cursor` of the previous page (opaque)."),
]

_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
_ID = re.compile(r"[0-9]{1,18}")  # ASCII digits only, and always inside a BIGINT
_JOB_ID = re.compile(r"[0-9A-Za-z_-]{1,32}")  # jobs.id is String(32); made as uuid4().hex
_SOURCES: dict[str, Literal["ledger", "other"]] = {"ledger": "ledger", "other": "other"}


def _invalid() -> ApiError:
    return ApiError(422, "invalid_cursor", "cursor is not valid")


def _encode(*fields: str) -> str:
    return base64.urlsafe_b64encode("|".join(fields).encode()).decode().rstrip("=")


def _decode(cursor: str, count: int) -> list[str]:
    """The ``count`` fields of a cursor; 422 for anything that is not one."""
    if not _BASE64URL.fullmatch(cursor):
        raise _invalid()
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise _invalid() from None
    fields = text.split("|")
    if len(fields) != count:
        raise _invalid()
    return fields


def _id(text: str) -> int:
    if not _ID.fullmatch(text):
        raise _invalid()
    return int(text)


def encode_id_cursor(last_id: int) -> str:
    return _encode(str(last_id))


def id_cursor(cursor: str | None) -> int | None:
    """The last id a page showed (pages that go by id: dead letters, the audit log)."""
    if cursor is None:
        return None
    (last_id,) = _decode(cursor, 1)
    return _id(last_id)


def encode_document_line_cursor(line_ref: str, source: int, last_id: int) -> str:
    # The line reference in hex: any character may be in it, the separator too.
    return _encode(line_ref.encode().hex(), str(source), str(last_id))


def document_line_cursor(cursor: str | None) -> tuple[str, int, int] | None:
    """A document's lines in line order: the last line's line reference, its
    source (0 the ledger's rows, 1 the other outcomes) and its id. A cursor of
    the former two-field scheme (source, id) is refused like any other."""
    if cursor is None:
        return None
    ref, source, last_id = _decode(cursor, 3)
    if source not in ("0", "1"):
        raise _invalid()
    try:
        line_ref = bytes.fromhex(ref).decode()
    except (ValueError, UnicodeDecodeError):
        raise _invalid() from None
    return line_ref, int(source), _id(last_id)


def encode_line_cursor(
    position: int | None, source: Literal["ledger", "other"], last_id: int
) -> str:
    return _encode("" if position is None else str(position), source, str(last_id))


def line_cursor(cursor: str | None) -> tuple[int | None, Literal["ledger", "other"], int] | None:
    """A job's lines page in batch order through two sources (ledger rows, other
    outcomes): the last line's position (empty: none, a row from before
    positions), source and id. A cursor of the former two-field scheme (source,
    id) is refused like any other."""
    if cursor is None:
        return None
    position, source, last_id = _decode(cursor, 3)
    if source not in _SOURCES:
        raise _invalid()
    return (None if position == "" else _id(position)), _SOURCES[source], _id(last_id)


def encode_job_cursor(created_at: dt.datetime, job_id: str) -> str:
    return _encode(iso(created_at) or "", job_id)


def job_cursor(cursor: str | None) -> tuple[dt.datetime, str] | None:
    """Jobs page newest first: the creation time and id of the last job shown."""
    if cursor is None:
        return None
    created_at, job_id = _decode(cursor, 2)
    if not _JOB_ID.fullmatch(job_id):
        raise _invalid()
    try:
        return parse_instant(created_at), job_id
    except ValueError:
        raise _invalid() from None


_KIND = re.compile(r"[a-z0-9_]{1,32}")
_DIGEST = re.compile(r"[0-9a-f]{16}")


def encode_contract_cursor(created_at: dt.datetime, kind: str, version: int, digest: str) -> str:
    return _encode(iso(created_at) or "", kind, str(version), digest)


def contract_cursor(cursor: str | None) -> tuple[dt.datetime, str, int, str] | None:
    """Contracts page oldest first: the last one shown, by its publication time,
    kind, version and a digest of its partition (a partition is too long to carry)."""
    if cursor is None:
        return None
    created_at, kind, version, digest = _decode(cursor, 4)
    if not (_KIND.fullmatch(kind) and _DIGEST.fullmatch(digest)):
        raise _invalid()
    try:
        return parse_instant(created_at), kind, _id(version), digest
    except ValueError:
        raise _invalid() from None


_DELIVERY_ID = re.compile(r"dlv_[0-9a-f]{24}")


def encode_delivery_cursor(created_at: dt.datetime, delivery_id: str) -> str:
    return _encode(iso(created_at) or "", delivery_id)


def delivery_cursor(cursor: str | None) -> tuple[dt.datetime, str] | None:
    """An endpoint's deliveries newest first: the creation time and id of the last shown."""
    if cursor is None:
        return None
    created_at, delivery_id = _decode(cursor, 2)
    if not _DELIVERY_ID.fullmatch(delivery_id):
        raise _invalid()
    try:
        return parse_instant(created_at), delivery_id
    except ValueError:
        raise _invalid() from None


_REMITTANCE_ID = re.compile(r"rm_[0-9a-f]{24}")


def encode_remittance_cursor(received_at: dt.datetime, remittance_id: str) -> str:
    return _encode(iso(received_at) or "", remittance_id)


def remittance_cursor(cursor: str | None) -> tuple[dt.datetime, str] | None:
    """Remittances page newest first: the receipt time and id of the last one shown."""
    if cursor is None:
        return None
    received_at, remittance_id = _decode(cursor, 2)
    if not _REMITTANCE_ID.fullmatch(remittance_id):
        raise _invalid()
    try:
        return parse_instant(received_at), remittance_id
    except ValueError:
        raise _invalid() from None
