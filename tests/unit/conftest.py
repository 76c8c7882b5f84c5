from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put this process's logging back as it was (the CLI's callback and
    ``shared.logs.configure`` change the root logger and structlog)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()
