"""What the supervisor publishes of its children, as a small JSON file: restart
counts and the components that are crash-looping.

The API serves ``settleq_process_restarts_total{component}`` and
``settleq_process_crash_looping{component}`` and answers ``/readyz``, but the
API is itself a supervised child that may be restarted: a state kept in its
memory would go back to zero with it. So the supervisor, which outlives every
child, owns it and rewrites this file whenever it changes (before it starts
the replacement, so a restarted API already sees its own restart); the API
reads it at scrape and probe time. The file is replaced atomically (a
temporary file renamed over it): a reader never sees half of it.

Shape: ``{"restarts": {"api": 0, "fast_path": 2, ...}, "crash_looping": ["fast_path"]}``;
a file without ``crash_looping`` (an older supervisor's) has none.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Counts:
    restarts: dict[str, int]  # every supervised component, 0 when never restarted
    crash_looping: frozenset[str]


def write_counts(
    path: Path, restarts: Mapping[str, int], crash_looping: Collection[str] = ()
) -> None:
    """Replace ``path`` with these counts, atomically."""
    body = json.dumps(
        {"restarts": dict(sorted(restarts.items())), "crash_looping": sorted(crash_looping)}
    )
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(body)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_counts(path: Path) -> Counts | None:
    """The counts in ``path``; None when there is no such file (no supervisor).

    Raises ``ValueError`` when the file is not a counts file."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    loaded = json.loads(text)
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} holds no restart counts")
    restarts = loaded.get("restarts")
    looping = loaded.get("crash_looping", [])
    if not isinstance(restarts, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in restarts.items()
    ):
        raise ValueError(f"{path} holds no restart counts")
    if not isinstance(looping, list) or not all(
        isinstance(c, str) and c in restarts for c in looping
    ):
        raise ValueError(f"{path} names a crash-looping component it does not count")
    return Counts(restarts=dict(restarts), crash_looping=frozenset(looping))
