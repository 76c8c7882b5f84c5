"""The supervision policy (services/supervisor/policy.py) and its counts file:
backoff, reset after health, giving up; counts that a reader never sees half of."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from services.supervisor.counts import read_counts, write_counts
from services.supervisor.policy import (
    Decision,
    GiveUp,
    History,
    Restart,
    RestartPolicy,
    after_death,
)
from services.supervisor.processes import exit_fields
from shared.settings import Settings

pytestmark = pytest.mark.regression  # issue 12 item 1: there was no restart at all

# docs/operations.md#supervision: 1 s doubling to 30 s, reset after 60 s, 5 deaths in 60 s
POLICY = RestartPolicy()


def deaths(policy: RestartPolicy, lifetimes: list[float]) -> list[Decision]:
    """Decisions for a child that lives ``lifetimes[i]`` seconds each time and is
    restarted after the delay decided."""
    history, now = History(), 0.0
    decisions: list[Decision] = []
    for lifetime in lifetimes:
        started, now = now, now + lifetime
        history, decision = after_death(policy, history, started_at=started, died_at=now)
        decisions.append(decision)
        if isinstance(decision, Restart):
            now += decision.delay_s
    return decisions


def delays(decisions: list[Decision]) -> list[float]:
    assert all(isinstance(d, Restart) for d in decisions), decisions
    return [d.delay_s for d in decisions if isinstance(d, Restart)]


def test_defaults_are_the_spec() -> None:
    assert RestartPolicy.from_settings(Settings()) == POLICY
    assert Settings().shutdown_grace_s == 30


def test_backoff_doubles_from_one_second_to_thirty() -> None:
    # A child that lives 20 s each time never dies 5 times in a minute: it backs off.
    assert delays(deaths(POLICY, [20.0] * 8)) == [1, 2, 4, 8, 16, 30, 30, 30]
    assert POLICY.backoff(10_000) == 30  # no overflow for a very long streak


def test_a_minute_of_health_resets_the_backoff() -> None:
    decisions = deaths(POLICY, [20.0, 20.0, 20.0, 60.0, 20.0, 59.9])
    assert delays(decisions) == [1, 2, 4, 1, 2, 4]


def test_five_deaths_within_a_minute_give_up() -> None:
    # Dies at once each time: restarts after 1, 2, 4, 8 s; the fifth death is 15 s in.
    decisions = deaths(POLICY, [0.0] * 5)
    assert [type(d) for d in decisions] == [Restart] * 4 + [GiveUp]
    assert decisions[-1] == GiveUp(deaths=5, window_s=60)


def test_deaths_older_than_the_window_are_forgotten() -> None:
    policy = RestartPolicy(give_up_deaths=3, give_up_window_s=10, reset_after_s=5)
    # Deaths at 1 and 3, then 12 s of life: the first two are more than 10 s old
    # when it dies at 17, so it is restarted; then at 18 and 20: three in 10 s.
    decisions = deaths(policy, [1.0, 1.0, 12.0, 0.0, 0.0])
    assert [type(d) for d in decisions] == [Restart, Restart, Restart, Restart, GiveUp]


def test_settings_make_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETTLEQ_RESTART_BACKOFF_INITIAL_S", "0.1")
    monkeypatch.setenv("SETTLEQ_RESTART_GIVE_UP_DEATHS", "2")
    policy = RestartPolicy.from_settings(Settings())
    assert (policy.backoff_initial_s, policy.give_up_deaths) == (0.1, 2)
    assert [type(d) for d in deaths(policy, [0.0, 0.0])] == [Restart, GiveUp]


def test_exit_is_a_code_or_a_signal_name() -> None:
    assert exit_fields(3) == {"exit_code": 3}
    assert exit_fields(-signal.SIGKILL) == {"signal": "SIGKILL"}


def test_counts_file_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "restarts.json"
    assert read_counts(path) is None  # no supervisor: no counts
    write_counts(path, {"relay": 2, "api": 0})
    assert read_counts(path) == {"api": 0, "relay": 2}
    write_counts(path, {"relay": 3, "api": 1})
    assert json.loads(path.read_text()) == {"restarts": {"api": 1, "relay": 3}}
    assert [p.name for p in tmp_path.iterdir()] == ["restarts.json"]  # no temporary left


@pytest.mark.parametrize("text", ["", "[]", '{"restarts": {"api": -1}}', '{"restarts": 3}'])
def test_a_file_that_holds_no_counts_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "restarts.json"
    path.write_text(text)
    with pytest.raises(ValueError):
        read_counts(path)
