"""shared.faults: fault injection is no production setting. Only the environment
(``SETTLEQ_FAULT_*``) turns a knob on, never the settings object or its YAML
file, and a process that reads the knobs warns at start-up of each one on."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.faults import Faults, load_faults
from shared.settings import Settings

KNOBS = {
    "fault_settle_pause_s": ("SETTLEQ_FAULT_SETTLE_PAUSE_S", "0.4"),
    "fault_transient_attempts": ("SETTLEQ_FAULT_TRANSIENT_ATTEMPTS", "3"),
    "fault_relay_batch_pause_s": ("SETTLEQ_FAULT_RELAY_BATCH_PAUSE_S", "0.05"),
}
log = logging.getLogger("settleq.test_faults")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No ambient SETTLEQ_* variable leaks in; run from an empty directory."""
    for name in list(os.environ):
        if name.upper().startswith("SETTLEQ_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


def test_production_settings_have_no_fault_knobs() -> None:
    assert not [name for name in Settings.model_fields if "fault" in name]
    assert not [name for name in Settings().model_dump() if "fault" in name]


def test_production_settings_take_no_fault_knob_from_anywhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "settleq.yaml"
    config.write_text(
        "queue_prefix: from-yaml\n"
        + "".join(f"{name}: {value}\n" for name, (_, value) in KNOBS.items()),
        encoding="utf-8",
    )
    monkeypatch.setenv("SETTLEQ_CONFIG", str(config))
    for env, value in KNOBS.values():
        monkeypatch.setenv(env, value)
    settings = Settings(**{name: value for name, (_, value) in KNOBS.items()})
    assert settings.queue_prefix == "from-yaml"  # the file was read
    for name in KNOBS:
        assert not hasattr(settings, name)
        assert name not in settings.model_dump()


def test_faults_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Faults().active() == {}
    monkeypatch.setenv("SETTLEQ_FAULT_SETTLE_PAUSE_S", "0.4")
    monkeypatch.setenv("SETTLEQ_FAULT_TRANSIENT_ATTEMPTS", "3")
    faults = Faults()
    assert (faults.settle_pause_s, faults.transient_attempts) == (0.4, 3)
    assert faults.relay_batch_pause_s == 0.0
    assert faults.active() == {
        "SETTLEQ_FAULT_SETTLE_PAUSE_S": 0.4,
        "SETTLEQ_FAULT_TRANSIENT_ATTEMPTS": 3,
    }


def test_faults_never_come_from_the_config_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "settleq.yaml"
    config.write_text("settle_pause_s: 5\ntransient_attempts: 9\n", encoding="utf-8")
    monkeypatch.setenv("SETTLEQ_CONFIG", str(config))
    (tmp_path / ".env").write_text("SETTLEQ_FAULT_SETTLE_PAUSE_S=5\n", encoding="utf-8")
    assert Faults().active() == {}


def test_a_misspelt_fault_knob_is_refused() -> None:
    with pytest.raises(ValidationError):
        Faults(settle_pause=1.0)  # type: ignore[call-arg]


def test_start_up_warns_of_each_knob_that_is_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SETTLEQ_FAULT_SETTLE_PAUSE_S", "0.4")
    monkeypatch.setenv("SETTLEQ_FAULT_RELAY_BATCH_PAUSE_S", "0.05")
    with caplog.at_level(logging.INFO, logger=log.name):
        faults = load_faults(log)
    assert faults == Faults(settle_pause_s=0.4, relay_batch_pause_s=0.05)
    [record] = caplog.records
    assert record.levelno == logging.WARNING and record.name == log.name
    message = record.getMessage()
    assert "SETTLEQ_FAULT_SETTLE_PAUSE_S=0.4" in message
    assert "SETTLEQ_FAULT_RELAY_BATCH_PAUSE_S=0.05" in message
    assert "TRANSIENT_ATTEMPTS" not in message  # off: not named


def test_start_up_says_nothing_when_every_knob_is_off(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SETTLEQ_FAULT_TRANSIENT_ATTEMPTS", "0")  # set, but off
    with caplog.at_level(logging.DEBUG, logger=log.name):
        assert load_faults(log) == Faults()
    assert caplog.records == []
