"""A dead letter's payload in a few hundred characters, for a list an operator
scans (the whole payload is ``GET /admin/dead-letters/{id}``)."""

from __future__ import annotations

import json
from typing import Any

EXCERPT_CHARS = 240


def excerpt(payload: str, line_index: int | None) -> str:
    """The failed line when the letter names one (else its document), as compact
    JSON, cut at ``EXCERPT_CHARS`` with an ellipsis."""
    text = payload
    try:
        document: Any = json.loads(payload)
    except ValueError:
        document = None  # an unreadable chunk: its text as stored
    if isinstance(document, dict):
        lines = document.get("lines")
        picked = (
            lines[line_index]
            if isinstance(lines, list) and line_index is not None and 0 <= line_index < len(lines)
            else document
        )
        text = json.dumps(picked, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"
