"""Cursors of list pages: opaque to clients, validated before they reach SQL."""

from __future__ import annotations

import re
from typing import Literal

from services.api.errors import ApiError

_ID = re.compile(r"[0-9]{1,18}")  # ASCII digits only, and always inside a BIGINT


def id_cursor(cursor: str | None) -> int | None:
    """The last id a page showed (pages go by id); 422 for anything else."""
    if cursor is None:
        return None
    if not _ID.fullmatch(cursor):
        raise ApiError(422, "invalid_cursor", "cursor is not valid")
    return int(cursor)


_LINE = re.compile(r"([lo])([0-9]{1,18})")


def line_cursor(cursor: str | None) -> tuple[Literal["ledger", "other"], int] | None:
    """A job's lines page through two sources (ledger rows, then other outcomes):
    the cursor is the source's letter and the last id shown; 422 for anything else."""
    if cursor is None:
        return None
    match = _LINE.fullmatch(cursor)
    if match is None:
        raise ApiError(422, "invalid_cursor", "cursor is not valid")
    return ("ledger" if match[1] == "l" else "other"), int(match[2])


def encode_line_cursor(source: str, last_id: int) -> str:
    return f"{source[0]}{last_id}"
