from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The soak runs as long as its lines take (each chaos module bounds its CI run)."""
    if config.getoption("--soak"):
        for item in items:
            if item.path.is_relative_to(HERE):
                item.add_marker(pytest.mark.timeout(4 * 3600))
