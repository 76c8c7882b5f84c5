"""A configuration error as one line: the variable, what was wrong, an example;
never the value given (it may be a secret) (docs/operations.md#configuration)."""

from __future__ import annotations

import re

from pydantic import ValidationError

from shared.config.files import env_name

_KEY_EXAMPLE = (
    '[{"key_id": "acme", "secrets": ["<secret>"], "partitions": ["*"]}]'
    " (`settleq keys create` prints one)"
)
_TOKEN_EXAMPLE = "<sha-256 hex digest>,<another> (`settleq tokens create` prints one)"
EXAMPLES = {
    "producer_keys": _KEY_EXAMPLE,
    "viewer_tokens": _TOKEN_EXAMPLE,
    "operator_tokens": _TOKEN_EXAMPLE,
    "database_url": "postgresql://settleq@127.0.0.1:5432/settleq",
    "broker_url": "amqp://guest:guest@127.0.0.1:5672/",
    "redis_url": "redis://127.0.0.1:6379/0",
    "log_format": "json",
    "log_level": "INFO",
    "queue_prefix": "settleq",
}
_FIELD = re.compile(r'field "(\w+)"')


def explain(exc: Exception) -> str:
    """One line for a ValidationError, pydantic-settings' SettingsError or a
    ConfigError raised while building ``Settings``."""
    if isinstance(exc, ValidationError):
        return "; ".join(_one(error) for error in exc.errors())
    found = _FIELD.search(str(exc))
    if found is not None and "parsing value" in str(exc):
        field = found.group(1)
        return f"{env_name(field)} is not valid JSON; e.g. {env_name(field)}={_example(field)}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _one(error: object) -> str:
    details = dict(error)  # type: ignore[call-overload]
    loc = [str(part) for part in details.get("loc", ())]
    field = loc[0] if loc else "?"
    where = (
        f" (entry {int(loc[1]) + 1}, {'.'.join(loc[2:])})" if loc[1:2] and loc[1].isdigit() else ""
    )
    msg = str(details.get("msg", "invalid")).removeprefix("Value error, ")
    secret = str(details.get("input", ""))
    if len(secret) >= 4:
        msg = msg.replace(secret, "<value>")  # messages never quote the input, but be sure
    return f"{env_name(field)}{where}: {msg}; e.g. {env_name(field)}={_example(field)}"


def _example(field: str) -> str:
    if field in EXAMPLES:
        return EXAMPLES[field]
    from shared.config.settings import Settings

    info = Settings.model_fields.get(field)
    default = None if info is None else info.default
    return (
        "<value>" if default is None or not isinstance(default, (int, float, str)) else str(default)
    )
