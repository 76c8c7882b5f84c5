"""Fault injection for the failure tests and the bench: every knob off unless set.

Not a setting of settleq (shared/settings.py has none of them): only the
environment turns a knob on (``SETTLEQ_FAULT_*``, never the YAML config file),
and each process that acts on them (worker, relay) logs a WARNING at start-up
naming every knob that is on.
"""

from __future__ import annotations

import logging

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

ENV_PREFIX = "SETTLEQ_FAULT_"


class Faults(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    # Seconds a settle pauses after claiming its keys and before committing: the
    # most delicate point of the exactly-once protocol.
    settle_pause_s: float = 0.0
    # The first N settle attempts of every chunk fail transiently.
    transient_attempts: int = 0
    # Seconds the relay pauses after each batch (to be killed mid-stream).
    relay_batch_pause_s: float = 0.0
    # Seconds a worker pauses between a unit's commit and publishing its events
    # (to be killed there, or raced by the relay).
    publish_pause_s: float = 0.0
    # A worker leaves every unit's events to the relay, as though it died right
    # after each commit (the relay's own tests).
    skip_publish_at_commit: bool = False

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings)  # the environment only: never a file

    def active(self) -> dict[str, float | int]:
        """The knobs that are on, by their environment variable."""
        return {f"{ENV_PREFIX}{name.upper()}": v for name, v in self.model_dump().items() if v}


def load_faults(log: logging.Logger) -> Faults:
    """This process's fault injection, from the environment; when any knob is on,
    a WARNING naming each with its value (nothing when all are off)."""
    faults = Faults()
    active = faults.active()
    if active:
        log.warning(
            "FAULT INJECTION ACTIVE (tests and bench only, never production): %s",
            ", ".join(f"{name}={value}" for name, value in active.items()),
        )
    return faults
