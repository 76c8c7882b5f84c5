"""shared.config.settings: SETTLEQ_* environment variables and the optional YAML file
(docs/operations.md#configuration)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.config.settings import RETIRED, MiB, ProducerKey, Settings

DIGEST_A = "a" * 64
DIGEST_B = "b" * 64


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No ambient SETTLEQ_* variable leaks in; run from an empty directory."""
    for name in list(os.environ):
        if name.upper().startswith("SETTLEQ_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settleq.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_match_the_spec() -> None:
    s = Settings()
    assert s.database_url == "sqlite:///./settleq.db"
    assert s.broker_url == "amqp://guest:guest@127.0.0.1:5672/"
    assert s.redis_url == "redis://127.0.0.1:6379/0"
    assert s.queue_prefix == "settleq"
    assert s.max_queue_depth == 5000
    assert s.producer_keys == []
    assert s.viewer_tokens == [] and s.operator_tokens == []
    assert s.max_body_bytes == 256 * MiB
    assert s.max_chunk_documents == 750
    assert s.max_chunk_bytes == 45 * MiB
    assert s.task_timeout_s == 180
    assert s.max_attempts == 5
    assert s.backoff_max_ms == 60_000
    assert s.signature_tolerance_s == 300
    assert s.api_host == "127.0.0.1" and s.api_port == 8000


def test_environment_variables_override_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETTLEQ_DATABASE_URL", "postgresql+psycopg://u@db/settleq")
    monkeypatch.setenv("SETTLEQ_BROKER_URL", "amqp://rabbit:5672/")
    monkeypatch.setenv("SETTLEQ_REDIS_URL", "redis://cache:6379/1")
    monkeypatch.setenv("SETTLEQ_MAX_QUEUE_DEPTH", "12")
    monkeypatch.setenv("SETTLEQ_MAX_BODY_BYTES", "1048576")
    monkeypatch.setenv("SETTLEQ_INTERNAL_SIGNING_KEY", "k-internal")
    s = Settings()
    assert s.database_url == "postgresql+psycopg://u@db/settleq"
    assert s.broker_url == "amqp://rabbit:5672/"
    assert s.redis_url == "redis://cache:6379/1"
    assert s.max_queue_depth == 12
    assert s.max_body_bytes == 1048576
    assert s.internal_signing_key == "k-internal"


def test_tokens_are_comma_separated_digests_trimmed_and_lower_cased(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SETTLEQ_VIEWER_TOKENS", f" {DIGEST_A.upper()} , {DIGEST_B},,")
    monkeypatch.setenv("SETTLEQ_OPERATOR_TOKENS", DIGEST_B)
    s = Settings()
    assert s.viewer_tokens == [DIGEST_A, DIGEST_B]
    assert s.operator_tokens == [DIGEST_B]


def test_empty_token_variable_means_no_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETTLEQ_OPERATOR_TOKENS", "")
    assert Settings().operator_tokens == []


def test_producer_keys_are_parsed_from_json(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [
        {"key_id": "k1", "secrets": ["new", "old"], "partitions": ["*"]},
        {"key_id": "k2", "secrets": ["s2"], "partitions": ["VENDOR-0042"]},
    ]
    monkeypatch.setenv("SETTLEQ_PRODUCER_KEYS", json.dumps(keys))
    s = Settings()
    assert [k.key_id for k in s.producer_keys] == ["k1", "k2"]
    k1 = s.producer_key("k1")
    assert k1 is not None and k1.secrets == ["new", "old"]
    assert k1.may_submit_for("ANY-VENDOR")
    k2 = s.producer_key("k2")
    assert k2 is not None
    assert k2.may_submit_for("VENDOR-0042")
    assert not k2.may_submit_for("VENDOR-0043")
    assert s.producer_key("k3") is None


def test_producer_key_without_partitions_may_submit_for_none() -> None:
    key = ProducerKey(key_id="k", secrets=["s"])
    assert key.partitions == []
    assert not key.may_submit_for("VENDOR-1")


@pytest.mark.parametrize(
    "keys",
    [
        [{"key_id": "k1", "secrets": [], "partitions": ["*"]}],
        [{"key_id": "k1", "secrets": ["a", "b", "c"], "partitions": ["*"]}],
        [{"key_id": "", "secrets": ["a"], "partitions": ["*"]}],
        [{"key_id": "k1", "secrets": ["a"], "partitions": ["*"], "admin": True}],
    ],
)
def test_invalid_producer_keys_are_refused(
    monkeypatch: pytest.MonkeyPatch, keys: list[dict[str, object]]
) -> None:
    monkeypatch.setenv("SETTLEQ_PRODUCER_KEYS", json.dumps(keys))
    with pytest.raises(ValidationError):
        Settings()


def test_producer_keys_that_are_not_json_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETTLEQ_PRODUCER_KEYS", "k1:secret")
    with pytest.raises(ValueError):
        Settings()


def test_queue_name_uses_the_default_prefix() -> None:
    s = Settings()
    assert s.queue_name("fast_path") == "settleq.fast_path"
    assert s.queue_name("compute_heavy") == "settleq.compute_heavy"
    assert s.queue_name("events") == "settleq.events"


def test_queue_name_uses_the_configured_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETTLEQ_QUEUE_PREFIX", "acc1")
    s = Settings()
    assert s.queue_name("fast_path") == "acc1.fast_path"
    assert s.queue_name("events") == "acc1.events"


@pytest.mark.parametrize("prefix", ["", "a.b", "has space", "x" * 65])
def test_unsafe_queue_prefix_is_refused(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    monkeypatch.setenv("SETTLEQ_QUEUE_PREFIX", prefix)
    with pytest.raises(ValidationError):
        Settings()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SETTLEQ_MAX_CHUNK_DOCUMENTS", "0"),
        ("SETTLEQ_MAX_CHUNK_BYTES", "10"),
        ("SETTLEQ_MAX_ATTEMPTS", "0"),
        ("SETTLEQ_MAX_QUEUE_DEPTH", "lots"),
    ],
)
def test_out_of_range_numbers_are_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_yaml_file_supplies_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = _yaml(
        tmp_path,
        "database_url: postgresql+psycopg://db/settleq\n"
        "queue_prefix: fromyaml\n"
        "max_queue_depth: 42\n"
        f'viewer_tokens: "{DIGEST_A.upper()}, {DIGEST_B}"\n'
        f"operator_tokens: [{DIGEST_B}]\n"
        "producer_keys:\n"
        "  - key_id: y1\n"
        "    secrets: [s1]\n"
        "    partitions: [VENDOR-1]\n",
    )
    monkeypatch.setenv("SETTLEQ_CONFIG", str(path))
    s = Settings()
    assert s.database_url == "postgresql+psycopg://db/settleq"
    assert s.queue_name("fast_path") == "fromyaml.fast_path"
    assert s.max_queue_depth == 42
    assert s.viewer_tokens == [DIGEST_A, DIGEST_B]
    assert s.operator_tokens == [DIGEST_B]
    assert s.producer_keys == [ProducerKey(key_id="y1", secrets=["s1"], partitions=["VENDOR-1"])]


def test_environment_wins_over_the_yaml_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = _yaml(tmp_path, "queue_prefix: fromyaml\nmax_queue_depth: 42\nredis_url: redis://y/0\n")
    monkeypatch.setenv("SETTLEQ_CONFIG", str(path))
    monkeypatch.setenv("SETTLEQ_QUEUE_PREFIX", "fromenv")
    monkeypatch.setenv("SETTLEQ_MAX_QUEUE_DEPTH", "7")
    s = Settings()
    assert s.queue_prefix == "fromenv"
    assert s.max_queue_depth == 7
    assert s.redis_url == "redis://y/0"  # not set in the environment: the file's value stands


def test_explicit_arguments_win_over_environment_and_yaml(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SETTLEQ_CONFIG", str(_yaml(tmp_path, "max_queue_depth: 42\n")))
    monkeypatch.setenv("SETTLEQ_MAX_QUEUE_DEPTH", "7")
    assert Settings(max_queue_depth=3).max_queue_depth == 3


def test_invalid_value_in_yaml_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SETTLEQ_CONFIG", str(_yaml(tmp_path, "queue_prefix: 'bad.prefix'\n")))
    with pytest.raises(ValidationError):
        Settings()


def test_without_settleq_config_no_yaml_is_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _yaml(tmp_path, "max_queue_depth: 42\n")  # present in the working directory, not named
    assert Settings().max_queue_depth == 5000


def test_missing_config_file_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SETTLEQ_CONFIG", str(tmp_path / "does-not-exist.yaml"))
    with pytest.raises((OSError, ValueError)):
        Settings()


def test_event_batch_max_defaults_to_1000_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().event_batch_max == 1000
    monkeypatch.setenv("SETTLEQ_EVENT_BATCH_MAX", "250")
    assert Settings().event_batch_max == 250


@pytest.mark.parametrize("value", ["0", "-1", "10001", "many"])
def test_event_batch_max_out_of_range_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("SETTLEQ_EVENT_BATCH_MAX", value)
    with pytest.raises(ValidationError):
        Settings()


def _configuration_section() -> str:
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    return text.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]


def test_every_setting_is_documented_in_the_configuration_tables() -> None:
    rows = [line for line in _configuration_section().splitlines() if line.startswith("| `")]
    documented = {name for row in rows for name in re.findall(r"`(SETTLEQ_[A-Z0-9_]+)`", row)}
    names = {f"SETTLEQ_{name.upper()}" for name in Settings.model_fields}
    assert names - documented == set(), "settings missing from docs/operations.md#configuration"


def test_a_retired_setting_is_accepted_and_named_for_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # An operator upgrading with SETTLEQ_RELAY_DEFER_MAX_S still set: the relay
    # starts (every value of it is safe now) and says to remove it.
    assert Settings.retired_in_use() == []
    monkeypatch.setenv("SETTLEQ_RELAY_DEFER_MAX_S", "30")
    settings = Settings()
    assert not hasattr(settings, "relay_defer_max_s")
    [sentence] = Settings.retired_in_use()
    assert sentence.startswith("SETTLEQ_RELAY_DEFER_MAX_S is no longer read: ")
    assert "batched" in sentence and "remove it" in sentence and "30" not in sentence


def test_a_retired_setting_in_the_yaml_file_is_named_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SETTLEQ_CONFIG", str(_yaml(tmp_path, "relay_defer_max_s: 0\n")))
    assert Settings().relay_grace_s == 2.0
    [sentence] = Settings.retired_in_use()
    assert sentence.startswith("SETTLEQ_RELAY_DEFER_MAX_S is no longer read")
    monkeypatch.setenv("SETTLEQ_CONFIG", str(_yaml(tmp_path, "relay_grace_s: 5\n")))
    assert Settings.retired_in_use() == []


def test_retired_settings_are_gone_and_named_in_the_upgrade_notes() -> None:
    notes = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    notes = notes.split("\n## Upgrade notes\n", 1)[1]
    for name in RETIRED:
        assert name not in Settings.model_fields
        assert f"`SETTLEQ_{name.upper()}`" in notes
        rows = [line for line in _configuration_section().splitlines() if line.startswith("| `")]
        assert not [row for row in rows if f"`SETTLEQ_{name.upper()}`" in row]
