"""Secrets from files, not from environment variables every child process and
``ps e`` can see (docs/operations.md#secrets-from-files).

- ``SETTLEQ_<NAME>_FILE``: the file's content (trailing newline stripped) is
  the value of ``SETTLEQ_<NAME>``, for the names in ``FILE_SETTINGS``;
- ``SETTLEQ_SECRETS_DIR``: pydantic-settings' ``secrets_dir``, one file per
  setting named ``settleq_<name>`` (Docker and Kubernetes mount them in
  ``/run/secrets``).

An empty file is no value (compose makes an unset variable's Docker secret an
empty file). A missing or unreadable file is a ``ConfigError`` naming the
variable and the path, never the content.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SecretsSettingsSource

# The settings that hold secrets, and so may come from a file.
FILE_SETTINGS = ("producer_keys", "viewer_tokens", "operator_tokens", "internal_signing_key")
SECRETS_DIR = "SETTLEQ_SECRETS_DIR"
# The variables besides the settings' own that settleq reads.
VARIABLES = {SECRETS_DIR, *(f"SETTLEQ_{name.upper()}_FILE" for name in FILE_SETTINGS)}


class ConfigError(ValueError):
    """A setting that cannot be read; the message is one line and names no secret."""


def env_name(field: str) -> str:
    return f"SETTLEQ_{field.upper()}"


class FileSettingsSource(PydanticBaseSettingsSource):
    """``SETTLEQ_<NAME>_FILE`` variables: the named file holds the value."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every file at once

    def __call__(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for field in FILE_SETTINGS:
            variable = f"{env_name(field)}_FILE"
            path = os.environ.get(variable)
            if not path:
                continue
            if os.environ.get(env_name(field)):
                raise ConfigError(f"{env_name(field)} and {variable} are both set: keep one")
            value = read_secret(variable, path, decode_json=field == "producer_keys")
            if value != "":
                found[field] = value
        return found


def read_secret(variable: str, path: str, decode_json: bool = False) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise ConfigError(
            f"{variable} names a file that cannot be read: {path} ({reason})"
        ) from None
    if not text.strip():
        return ""  # no value
    if not decode_json:
        return text
    try:
        return json.loads(text)
    except ValueError:
        raise ConfigError(
            f"{variable}: the file {path} holds no JSON list of producer keys;"
            ' e.g. [{"key_id": "acme", "secrets": ["<secret>"], "partitions": ["*"]}]'
        ) from None


def secrets_dir_source(settings_cls: type[BaseSettings]) -> SecretsSettingsSource | None:
    """pydantic-settings' secrets_dir, at ``SETTLEQ_SECRETS_DIR`` (default: none)."""
    directory = os.environ.get(SECRETS_DIR)
    if not directory:
        return None
    if not Path(directory).is_dir():
        raise ConfigError(f"{SECRETS_DIR} names no directory: {directory}")
    return _SecretsDir(settings_cls, secrets_dir=directory)


class _SecretsDir(SecretsSettingsSource):
    """pydantic-settings' own, with an empty file taken as no value."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        value, key, complex_ = super().get_field_value(field, field_name)
        if isinstance(value, str) and not value.strip():
            return None, key, complex_
        return value, key, complex_
