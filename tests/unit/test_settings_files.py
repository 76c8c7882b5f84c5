"""Secrets from files (SETTLEQ_<NAME>_FILE, SETTLEQ_SECRETS_DIR) and the
one-line configuration error (docs/operations.md#secrets-from-files)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.config.explain import explain
from shared.config.files import ConfigError
from shared.config.settings import Settings

DIGEST = "c" * 64
KEYS = [{"key_id": "acme", "secrets": ["file-secret-0001"], "partitions": ["*"]}]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.upper().startswith("SETTLEQ_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_name_file_variables_hold_the_secrets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    files = {
        "SETTLEQ_PRODUCER_KEYS_FILE": _file(tmp_path, "keys", json.dumps(KEYS) + "\n"),
        "SETTLEQ_OPERATOR_TOKENS_FILE": _file(tmp_path, "op", DIGEST + "\n"),
        "SETTLEQ_VIEWER_TOKENS_FILE": _file(tmp_path, "view", f"{'d' * 64},{'e' * 64}\n"),
        "SETTLEQ_INTERNAL_SIGNING_KEY_FILE": _file(tmp_path, "sign", "signing-key-0001\n"),
    }
    for name, path in files.items():
        monkeypatch.setenv(name, str(path))
    s = Settings()
    key = s.producer_key("acme")
    assert key is not None and key.secrets == ["file-secret-0001"]
    assert s.operator_tokens == [DIGEST]
    assert s.viewer_tokens == ["d" * 64, "e" * 64]
    assert s.internal_signing_key == "signing-key-0001"  # trailing newline stripped


def test_secrets_dir_holds_the_secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secrets = tmp_path / "run-secrets"
    secrets.mkdir()
    _file(secrets, "settleq_producer_keys", json.dumps(KEYS) + "\n")
    _file(secrets, "settleq_operator_tokens", DIGEST + "\n")
    _file(secrets, "settleq_viewer_tokens", "")  # compose's secret of an unset variable
    monkeypatch.setenv("SETTLEQ_SECRETS_DIR", str(secrets))
    s = Settings()
    assert [k.key_id for k in s.producer_keys] == ["acme"]
    assert s.operator_tokens == [DIGEST]
    assert s.viewer_tokens == []


def test_the_environment_wins_over_the_secrets_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _file(tmp_path, "settleq_operator_tokens", DIGEST)
    monkeypatch.setenv("SETTLEQ_SECRETS_DIR", str(tmp_path))
    monkeypatch.setenv("SETTLEQ_OPERATOR_TOKENS", "f" * 64)
    assert Settings().operator_tokens == ["f" * 64]


@pytest.mark.parametrize(
    ("variable", "expected"),
    [
        ("SETTLEQ_OPERATOR_TOKENS_FILE", "SETTLEQ_OPERATOR_TOKENS_FILE names a file that cannot"),
        ("SETTLEQ_SECRETS_DIR", "SETTLEQ_SECRETS_DIR names no directory"),
    ],
)
def test_a_missing_file_is_one_line_naming_the_variable_and_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str, expected: str
) -> None:
    missing = tmp_path / "nowhere"
    monkeypatch.setenv(variable, str(missing))
    with pytest.raises(ConfigError) as raised:
        Settings()
    line = explain(raised.value)
    assert line.startswith(expected) and str(missing) in line and "\n" not in line


def test_a_bad_file_never_shows_its_content(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = _file(tmp_path, "keys", "not json: very-secret-0001\n")
    monkeypatch.setenv("SETTLEQ_PRODUCER_KEYS_FILE", str(path))
    with pytest.raises(ConfigError) as raised:
        Settings()
    line = explain(raised.value)
    assert "SETTLEQ_PRODUCER_KEYS_FILE" in line and str(path) in line
    assert "very-secret" not in line


def test_a_variable_and_its_file_together_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SETTLEQ_OPERATOR_TOKENS", DIGEST)
    monkeypatch.setenv("SETTLEQ_OPERATOR_TOKENS_FILE", str(_file(tmp_path, "op", DIGEST)))
    with pytest.raises(ConfigError, match="both set"):
        Settings()


def test_a_clear_token_is_one_line_without_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETTLEQ_OPERATOR_TOKENS", "mysecrettoken")
    with pytest.raises(ValidationError) as raised:
        Settings()
    line = explain(raised.value)
    assert "mysecrettoken" not in line and "\n" not in line
    assert line.startswith("SETTLEQ_OPERATOR_TOKENS: tokens must be SHA-256 hex digests")
    assert "settleq tokens create" in line


@pytest.mark.parametrize(
    "value",
    [
        '[{"key_id": "k", "secrets": "secret-in-clear-0001"}]',  # secrets not a list
        '[{"key_id": "k", "secrets": ["secret-in-clear-0001"], "x": 1}]',  # unknown field
        '[{"key_id": "k", "secrets": ["secret-in-clear-0001"',  # not JSON
    ],
)
def test_malformed_producer_keys_are_one_line_with_an_example(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("SETTLEQ_PRODUCER_KEYS", value)
    with pytest.raises(ValueError) as raised:
        Settings()
    line = explain(raised.value)
    assert line.startswith("SETTLEQ_PRODUCER_KEYS") and "\n" not in line
    assert '"key_id": "acme"' in line  # the example
    assert "secret-in-clear" not in line
