"""bench/server.py: the PostgreSQL server a benchmark runs on."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.server import production_settings, servers
from tests.support.private_services import PrivatePostgres


def test_both_runs_postgresqls_defaults_first_then_the_compose_settings() -> None:
    assert servers("both") == ["stock", "tuned"]
    assert servers("machine") == ["machine"]


def test_the_compose_command_must_be_dash_c_settings(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  postgres:\n    command: [postgres, -c, shared_buffers=1GB, -N, '50']\n"
    )
    with pytest.raises(ValueError, match="takes -c name=value, not -N"):
        production_settings(compose)


@pytest.mark.parametrize("value", ["4 GB", "1GB; rm -rf /", ""])
def test_a_private_clusters_setting_is_one_word(value: str) -> None:
    # pg_ctl hands its options to a shell: anything but one word is refused.
    with pytest.raises(ValueError, match="one word each"):
        PrivatePostgres({"shared_buffers": value})


def test_a_compose_variable_resolves_to_the_environment_or_its_default() -> None:
    assert production_settings(environ={})["shared_buffers"] == "4GB"
    assert production_settings(environ={"PG_SHARED_BUFFERS": "1GB"})["shared_buffers"] == "1GB"
