"""A child that keeps dying is crash-looping, never given up on
(docs/operations.md#a-component-keeps-restarting, services/supervisor/policy.py;
issue 29 item 4): restarted at the capped backoff for as long as it keeps
dying, reported until it stays up the reset time; and the settings that made a
supervisor give up are retired."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.supervisor.counts import Counts, read_counts, write_counts
from services.supervisor.policy import History, Restart, RestartPolicy, after_death, while_up
from shared.config.settings import RETIRED, RETIRED_SUPERVISION, Settings

pytestmark = pytest.mark.regression

# docs/operations.md#supervision: 1 s doubling to 30 s, reset after 60 s, > 5 deaths in 60 s
POLICY = RestartPolicy()


def dies_at_once(policy: RestartPolicy, times: int) -> tuple[History, list[Restart], float]:
    """A child that dies as soon as it starts, ``times`` times, restarted after
    each delay decided: its history, the decisions and the time of its last death."""
    history, now, decisions = History(), 0.0, []
    for _ in range(times):
        history, decision = after_death(policy, history, started_at=now, died_at=now)
        decisions.append(decision)
        now += decision.delay_s
    return history, decisions, now - decisions[-1].delay_s


def test_the_sixth_quick_death_is_crash_looping_and_still_restarted() -> None:
    # Restarts after 1, 2, 4, 8, 16 s: the sixth death is 31 s in, within the minute.
    history, decisions, _ = dies_at_once(POLICY, 6)
    assert [d.delay_s for d in decisions] == [1, 2, 4, 8, 16, 30]
    assert [d.crash_looping for d in decisions] == [False] * 5 + [True]
    assert decisions[-1].deaths == 6
    assert history.crash_looping


def test_a_crash_looping_child_is_restarted_at_the_cap_for_as_long_as_it_dies() -> None:
    # At the capped delay it dies only twice a minute: still crash-looping.
    _, decisions, _ = dies_at_once(POLICY, 200)
    assert all(isinstance(d, Restart) for d in decisions)
    assert {(d.delay_s, d.crash_looping) for d in decisions[5:]} == {(30, True)}


def test_the_cap_is_the_delay_once_crash_looping_even_below_the_doubling() -> None:
    # With a short first delay the doubling is far below the cap at the sixth
    # death: a crash-looping child still waits the cap (SPEC: every 30 s).
    policy = RestartPolicy(backoff_initial_s=0.01, backoff_max_s=5.0)
    _, decisions, _ = dies_at_once(policy, 7)
    assert [d.delay_s for d in decisions] == [0.01, 0.02, 0.04, 0.08, 0.16, 5.0, 5.0]


def test_five_quick_deaths_are_not_yet_crash_looping() -> None:
    history, decisions, _ = dies_at_once(POLICY, 5)
    assert not history.crash_looping and not any(d.crash_looping for d in decisions)


def test_deaths_spread_over_more_than_the_window_are_no_crash_loop() -> None:
    # A child that lives 20 s each time: at most three deaths in any minute.
    history, now = History(), 0.0
    for _ in range(20):
        started, now = now, now + 20
        history, decision = after_death(POLICY, history, started_at=started, died_at=now)
        assert not decision.crash_looping
        now += decision.delay_s


def test_staying_up_the_reset_time_ends_the_crash_loop() -> None:
    history, decisions, last_death = dies_at_once(POLICY, 6)
    started = last_death + decisions[-1].delay_s
    # Up, but not yet for the reset time: still crash-looping.
    assert while_up(POLICY, history, started_at=started, now=started + 59.9) == history
    recovered = while_up(POLICY, history, started_at=started, now=started + 60)
    assert not recovered.crash_looping
    # Its next death starts the backoff over, and is no crash loop.
    _, decision = after_death(POLICY, recovered, started_at=started, died_at=started + 61)
    assert (decision.delay_s, decision.crash_looping) == (1, False)


def test_a_death_after_the_reset_time_ends_the_crash_loop_too() -> None:
    # The supervisor's loop may not have looked between its health and its death.
    history, decisions, last_death = dies_at_once(POLICY, 6)
    started = last_death + decisions[-1].delay_s
    _, decision = after_death(POLICY, history, started_at=started, died_at=started + 60)
    assert (decision.delay_s, decision.crash_looping) == (1, False)


def test_a_short_life_does_not_end_the_crash_loop() -> None:
    history, decisions, last_death = dies_at_once(POLICY, 6)
    started = last_death + decisions[-1].delay_s
    _, decision = after_death(POLICY, history, started_at=started, died_at=started + 59)
    assert (decision.delay_s, decision.crash_looping) == (30, True)


def test_the_settings_make_the_policy_and_give_up_is_no_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert RestartPolicy.from_settings(Settings()) == POLICY
    monkeypatch.setenv("SETTLEQ_RESTART_BACKOFF_MAX_S", "4")
    monkeypatch.setenv("SETTLEQ_RESTART_RESET_AFTER_S", "15")
    monkeypatch.setenv("SETTLEQ_RESTART_GIVE_UP_DEATHS", "2")
    policy = RestartPolicy.from_settings(Settings())  # accepted, and ignored
    assert (policy.backoff_max_s, policy.reset_after_s) == (4, 15)
    assert policy.crash_loop_deaths == 5
    _, decisions, _ = dies_at_once(policy, 8)
    assert all(isinstance(d, Restart) for d in decisions)


@pytest.mark.parametrize("name", RETIRED_SUPERVISION)
def test_the_give_up_settings_are_retired_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    assert name in RETIRED and name not in Settings.model_fields
    variable = f"SETTLEQ_{name.upper()}"
    monkeypatch.setenv(variable, "5")
    Settings()  # no refusal
    [sentence] = Settings.retired_in_use(RETIRED_SUPERVISION)
    assert sentence.startswith(f"{variable} is no longer read: ") and "remove it" in sentence
    assert "crash-looping" in sentence and "\n" not in sentence
    # A relay names its own retired settings only: `up` warned of these.
    assert Settings.retired_in_use(["relay_defer_max_s"]) == []
    monkeypatch.delenv(variable)
    config = tmp_path / "settleq.yaml"
    config.write_text(f"{name}: 5\nrestart_backoff_max_s: 10\n")
    monkeypatch.setenv("SETTLEQ_CONFIG", str(config))
    assert Settings().restart_backoff_max_s == 10
    [sentence] = Settings.retired_in_use(RETIRED_SUPERVISION)
    assert sentence.startswith(f"{variable} is no longer read: ")


def test_the_counts_file_carries_the_crash_looping_components(tmp_path: Path) -> None:
    path = tmp_path / "restarts.json"
    write_counts(path, {"fast_path": 6, "api": 0}, {"fast_path"})
    assert read_counts(path) == Counts({"api": 0, "fast_path": 6}, frozenset({"fast_path"}))
    # An older supervisor's file (restarts only): nothing crash-looping.
    path.write_text('{"restarts": {"api": 1}}')
    assert read_counts(path) == Counts({"api": 1}, frozenset())


@pytest.mark.parametrize(
    "text",
    [
        '{"restarts": {"api": 0}, "crash_looping": "api"}',
        '{"restarts": {"api": 0}, "crash_looping": ["relay"]}',
        '{"restarts": {"api": 0}, "crash_looping": [["api"]]}',
    ],
)
def test_a_crash_looping_list_that_is_not_one_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "restarts.json"
    path.write_text(text)
    with pytest.raises(ValueError):
        read_counts(path)
