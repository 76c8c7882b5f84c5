"""Cursors of list pages: opaque to clients, validated before they reach SQL."""

from __future__ import annotations

import re

from services.api.errors import ApiError

_ID = re.compile(r"[0-9]{1,18}")  # ASCII digits only, and always inside a BIGINT


def id_cursor(cursor: str | None) -> int | None:
    """The last id a page showed (pages go by id); 422 for anything else."""
    if cursor is None:
        return None
    if not _ID.fullmatch(cursor):
        raise ApiError(422, "invalid_cursor", "cursor is not valid")
    return int(cursor)
