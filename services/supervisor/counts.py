"""The supervisor's restart counts, published as a small JSON file.

The API serves ``settleq_process_restarts_total{component}``, but the API is
itself a supervised child that may be restarted: a count kept in its memory
would go back to zero with it. So the supervisor, which outlives every child,
owns the counts and rewrites this file whenever one changes (before it starts
the replacement, so a restarted API already sees its own restart); the API
reads it at scrape time. The file is replaced atomically (a temporary file
renamed over it): a reader never sees half of it.

Shape: ``{"restarts": {"api": 0, "fast_path": 2, ...}}``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path


def write_counts(path: Path, restarts: Mapping[str, int]) -> None:
    """Replace ``path`` with these counts, atomically."""
    body = json.dumps({"restarts": dict(sorted(restarts.items()))})
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(body)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_counts(path: Path) -> dict[str, int] | None:
    """The counts in ``path``; None when there is no such file (no supervisor).

    Raises ``ValueError`` when the file is not a counts file."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    loaded = json.loads(text)
    restarts = loaded.get("restarts") if isinstance(loaded, dict) else None
    if not isinstance(restarts, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in restarts.items()
    ):
        raise ValueError(f"{path} holds no restart counts")
    return dict(restarts)
