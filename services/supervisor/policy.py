"""When a child that exited unexpectedly is restarted, and when to give up.

Pure: times are plain seconds from a monotonic clock, the caller owns the
processes. A child's restarts back off exponentially (``backoff_initial_s``
doubling up to ``backoff_max_s``); a child that stayed up ``reset_after_s``
before it died starts again from the first delay. A child that died
``give_up_deaths`` times within ``give_up_window_s`` is not restarted: it will
not get better by itself, and a supervisor that spins forever hides that.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.settings import Settings


@dataclass(frozen=True)
class RestartPolicy:
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    reset_after_s: float = 60.0
    give_up_deaths: int = 5
    give_up_window_s: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RestartPolicy:
        return cls(
            backoff_initial_s=settings.restart_backoff_initial_s,
            backoff_max_s=settings.restart_backoff_max_s,
            reset_after_s=settings.restart_reset_after_s,
            give_up_deaths=settings.restart_give_up_deaths,
            give_up_window_s=settings.restart_give_up_window_s,
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

    deaths: tuple[float, ...] = ()  # when it died, within the give-up window
    streak: int = 0  # deaths since it last stayed up reset_after_s


@dataclass(frozen=True)
class Restart:
    delay_s: float


@dataclass(frozen=True)
class GiveUp:
    deaths: int  # within the window
    window_s: float


Decision = Restart | GiveUp


def after_death(
    policy: RestartPolicy, history: History, *, started_at: float, died_at: float
) -> tuple[History, Decision]:
    """What to do about a child started at ``started_at`` that died at ``died_at``,
    and the history to remember for its next death."""
    healthy = died_at - started_at >= policy.reset_after_s
    streak = 0 if healthy else history.streak
    recent = tuple(t for t in history.deaths if died_at - t < policy.give_up_window_s)
    deaths = (*recent, died_at)
    remembered = History(deaths=deaths, streak=streak + 1)
    if len(deaths) >= policy.give_up_deaths:
        return remembered, GiveUp(deaths=len(deaths), window_s=policy.give_up_window_s)
    return remembered, Restart(delay_s=policy.backoff(streak))
