"""When a child that exited unexpectedly is restarted, and when it is crash-looping.

Pure: times are plain seconds from a monotonic clock, the caller owns the
processes. A child's restarts back off exponentially (``backoff_initial_s``
doubling up to ``backoff_max_s``); a child that stayed up ``reset_after_s``
before it died starts again from the first delay.

A child that died more than ``crash_loop_deaths`` times within
``crash_loop_window_s`` is *crash-looping*: it is still restarted, at the
capped delay, for as long as the stack runs. Stopping it, or the stack, would
turn one broken component into an outage of all of them
(docs/architecture.md#one-failure-stays-one-failure); the state is reported
instead (``/readyz``, a gauge, an alert) for an operator to act on. It stays
crash-looping until it stays up ``reset_after_s``: restarted at the capped
delay, a child that dies at once each time no longer dies often enough within
the window to be counted in again, and is as broken.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shared.config.settings import Settings


@dataclass(frozen=True)
class RestartPolicy:
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    reset_after_s: float = 60.0
    crash_loop_deaths: int = 5  # more deaths than this within the window: crash-looping
    crash_loop_window_s: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RestartPolicy:
        return cls(
            backoff_initial_s=settings.restart_backoff_initial_s,
            backoff_max_s=settings.restart_backoff_max_s,
            reset_after_s=settings.restart_reset_after_s,
        )

    def backoff(self, streak: int) -> float:
        """The delay before the restart that follows ``streak`` earlier quick deaths."""
        # Capped before the power: 2.0**streak overflows a float for a long streak.
        if streak >= 64:
            return self.backoff_max_s
        return min(self.backoff_initial_s * 2.0**streak, self.backoff_max_s)


@dataclass(frozen=True)
class History:
    """One child's deaths as the policy remembers them."""

    deaths: tuple[float, ...] = ()  # when it died, within the crash-loop window
    streak: int = 0  # deaths since it last stayed up reset_after_s
    crash_looping: bool = False


@dataclass(frozen=True)
class Restart:
    delay_s: float
    crash_looping: bool
    deaths: int  # within the crash-loop window, this one included


def after_death(
    policy: RestartPolicy, history: History, *, started_at: float, died_at: float
) -> tuple[History, Restart]:
    """When to restart a child started at ``started_at`` that died at ``died_at``,
    and the history to remember for its next death. Always a restart."""
    healthy = died_at - started_at >= policy.reset_after_s
    streak = 0 if healthy else history.streak
    recent = tuple(t for t in history.deaths if died_at - t < policy.crash_loop_window_s)
    deaths = (*recent, died_at)
    looping = len(deaths) > policy.crash_loop_deaths or (history.crash_looping and not healthy)
    delay = policy.backoff_max_s if looping else policy.backoff(streak)
    remembered = History(deaths=deaths, streak=streak + 1, crash_looping=looping)
    return remembered, Restart(delay_s=delay, crash_looping=looping, deaths=len(deaths))


def while_up(policy: RestartPolicy, history: History, *, started_at: float, now: float) -> History:
    """The history of a child started at ``started_at`` and still up at ``now``:
    once it stayed up ``reset_after_s`` it is no longer crash-looping."""
    if history.crash_looping and now - started_at >= policy.reset_after_s:
        return replace(history, crash_looping=False)
    return history
