"""The supervision policy (services/supervisor/policy.py) and its counts file:
backoff, reset after health; counts that a reader never sees half of. A child
that keeps dying: tests/unit/test_supervisor_crash_loop.py."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from services.supervisor.counts import Counts, read_counts, write_counts
from services.supervisor.policy import History, Restart, RestartPolicy, after_death
from services.supervisor.processes import exit_fields
from shared.config.settings import Settings

pytestmark = pytest.mark.regression  # issue 12 item 1: there was no restart at all

# docs/operations.md#supervision: 1 s doubling to 30 s, reset after 60 s
POLICY = RestartPolicy()


def deaths(policy: RestartPolicy, lifetimes: list[float]) -> list[Restart]:
    """Decisions for a child that lives ``lifetimes[i]`` seconds each time and is
    restarted after the delay decided."""
    history, now = History(), 0.0
    decisions: list[Restart] = []
    for lifetime in lifetimes:
        started, now = now, now + lifetime
        history, decision = after_death(policy, history, started_at=started, died_at=now)
        decisions.append(decision)
        now += decision.delay_s
    return decisions


def delays(decisions: list[Restart]) -> list[float]:
    return [d.delay_s for d in decisions]


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


def test_deaths_older_than_the_window_are_forgotten() -> None:
    policy = RestartPolicy(crash_loop_deaths=2, crash_loop_window_s=10, reset_after_s=5)
    # Deaths at 1 and 3, then 12 s of life: the first two are more than 10 s old
    # when it dies at 17, so it is one death; then at 18 and 20: three in 10 s.
    decisions = deaths(policy, [1.0, 1.0, 12.0, 0.0, 0.0])
    assert [d.deaths for d in decisions] == [1, 2, 1, 2, 3]
    assert [d.crash_looping for d in decisions] == [False, False, False, False, True]


def test_settings_make_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETTLEQ_RESTART_BACKOFF_INITIAL_S", "0.1")
    policy = RestartPolicy.from_settings(Settings())
    assert policy.backoff_initial_s == 0.1
    assert delays(deaths(policy, [0.0, 0.0])) == [0.1, 0.2]


def test_exit_is_a_code_or_a_signal_name() -> None:
    assert exit_fields(3) == {"exit_code": 3}
    assert exit_fields(-signal.SIGKILL) == {"signal": "SIGKILL"}


def test_counts_file_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "restarts.json"
    assert read_counts(path) is None  # no supervisor: no counts
    write_counts(path, {"relay": 2, "api": 0})
    assert read_counts(path) == Counts({"api": 0, "relay": 2}, frozenset())
    write_counts(path, {"relay": 3, "api": 1}, ["relay"])
    assert json.loads(path.read_text()) == {
        "restarts": {"api": 1, "relay": 3},
        "crash_looping": ["relay"],
    }
    assert [p.name for p in tmp_path.iterdir()] == ["restarts.json"]  # no temporary left


@pytest.mark.parametrize("text", ["", "[]", '{"restarts": {"api": -1}}', '{"restarts": 3}'])
def test_a_file_that_holds_no_counts_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "restarts.json"
    path.write_text(text)
    with pytest.raises(ValueError):
        read_counts(path)
