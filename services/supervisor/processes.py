"""Start children, restart the ones that die, stop them all on SIGTERM/SIGINT.

The decisions (delays, crash-looping) are :mod:`.policy`'s; this module owns
the processes. However often a child dies, it is restarted: only SIGTERM or
SIGINT ends :meth:`Supervisor.run`, with exit code 0 when every child stopped
within the grace and 1 when one had to be killed at the end of it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from services.supervisor.counts import write_counts
from services.supervisor.policy import History, RestartPolicy, after_death, while_up

log = logging.getLogger("settleq.supervisor")

POLL_S = 0.1
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ChildSpec:
    name: str  # unique among the children: compute_heavy-1
    component: str  # what the metric and the logs count it as: compute_heavy
    argv: Sequence[str]


@dataclass
class _Child:
    spec: ChildSpec
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float | None = None  # when a dead child is due to start again
    history: History = field(default_factory=History)


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if the supervisor itself is
    # SIGKILLed (the OOM killer), its children get SIGTERM instead of living on
    # as orphans that hold the API's port against the next `settleq up`.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def exit_fields(returncode: int) -> dict[str, object]:
    """How a process ended, for a log event: its exit code or its signal's name."""
    if returncode < 0:
        try:
            return {"signal": signal.Signals(-returncode).name}
        except ValueError:
            return {"signal": str(-returncode)}
    return {"exit_code": returncode}


def _fields(child: _Child, **extra: object) -> dict[str, object]:
    """The log fields naming a child: its component, name and (last) PID."""
    pid = child.process.pid if child.process is not None else None
    return {"component": child.spec.component, "child": child.spec.name, "pid": pid, **extra}


class Supervisor:
    def __init__(
        self,
        specs: Sequence[ChildSpec],
        policy: RestartPolicy,
        *,
        grace_s: float,
        counts_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.children = [_Child(spec) for spec in specs]
        self.policy = policy
        self.grace_s = grace_s
        self.counts_file = counts_file
        # The children's environment: this process's, plus these variables.
        self.env = {**os.environ, **env} if env else None
        self.clock = clock
        self.restarts = {spec.component: 0 for spec in specs}
        self._stop_signal: int | None = None  # set by the SIGTERM/SIGINT handler

    def run(self, started: Callable[[], None] | None = None) -> int:
        """Supervise until SIGTERM/SIGINT; the exit code. ``started`` is called
        once every child has been started."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._request_stop)
        self._publish()
        for child in self.children:
            self._start(child)
        if started is not None:
            started()
        while self._stop_signal is None:
            self._tend()
            time.sleep(POLL_S)
        log.info("stopping on %s", signal.Signals(self._stop_signal).name)
        return 1 if self._stop() else 0

    def _request_stop(self, signum: int, _frame: object) -> None:
        # Only a flag: a handler that takes a lock (Event.set, logging) can
        # deadlock against the same lock held by the code it interrupted.
        if self._stop_signal is None:
            self._stop_signal = signum

    def crash_looping(self) -> set[str]:
        """The components of which a child is crash-looping."""
        return {c.spec.component for c in self.children if c.history.crash_looping}

    def _tend(self) -> None:
        """Notice deaths and recoveries, and start what is due."""
        now = self.clock()
        looping = self.crash_looping()
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    self._restart(child)
                continue
            assert child.process is not None
            code = child.process.poll()
            if code is None:
                history = while_up(self.policy, child.history, started_at=child.started_at, now=now)
                if history != child.history:
                    log.info(
                        "%s stayed up %.0f s: no longer crash-looping",
                        child.spec.name,
                        self.policy.reset_after_s,
                        extra=_fields(child),
                    )
                child.history = history
            else:
                self._died(child, code, now)
        if self.crash_looping() != looping:
            self._publish()

    def _died(self, child: _Child, code: int, now: float) -> None:
        was_looping = child.history.crash_looping
        child.history, decision = after_death(
            self.policy, child.history, started_at=child.started_at, died_at=now
        )
        child.restart_at = now + decision.delay_s
        fields = _fields(
            child,
            **exit_fields(code),
            restart_count=self.restarts[child.spec.component] + 1,
            delay_s=decision.delay_s,
        )
        log.warning(
            "%s exited: restarting in %.1f s", child.spec.name, decision.delay_s, extra=fields
        )
        if decision.crash_looping and not was_looping:
            # Once per episode: the warnings above go on for each death.
            log.error(
                "%s died %d times within %.0f s: crash-looping, restarted every %.0f s"
                " until it stays up %.0f s; the rest of the stack goes on",
                child.spec.name,
                decision.deaths,
                self.policy.crash_loop_window_s,
                self.policy.backoff_max_s,
                self.policy.reset_after_s,
                extra={**fields, "deaths": decision.deaths},
            )

    def _start(self, child: _Child) -> None:
        preexec = _die_with_parent if sys.platform == "linux" else None
        child.process = subprocess.Popen(child.spec.argv, env=self.env, preexec_fn=preexec)  # noqa: PLW1509
        child.started_at = self.clock()
        child.restart_at = None

    def _restart(self, child: _Child) -> None:
        # Counted (and published) before the replacement starts: a restarted
        # API reads a count that already includes its own restart.
        self.restarts[child.spec.component] += 1
        self._publish()
        self._start(child)
        assert child.process is not None
        log.info(
            "%s restarted",
            child.spec.name,
            extra=_fields(child, restart_count=self.restarts[child.spec.component]),
        )

    def _publish(self) -> None:
        if self.counts_file is None:
            return
        try:
            write_counts(self.counts_file, self.restarts, self.crash_looping())
        except OSError as exc:  # for metrics and /readyz: never stop the stack for them
            log.warning("restart counts not written to %s (%s)", self.counts_file, exc)

    def _stop(self) -> bool:
        """SIGTERM every live child, SIGKILL what is left after the grace; True
        when something had to be killed."""
        alive = [
            c.process
            for c in self.children
            if c.restart_at is None and c.process is not None and c.process.poll() is None
        ]
        for process in alive:
            process.send_signal(signal.SIGTERM)
        deadline = self.clock() + self.grace_s
        while any(p.poll() is None for p in alive) and self.clock() < deadline:
            time.sleep(POLL_S)
        killed = [c for c in self.children if c.process in alive and c.process.poll() is None]
        for child in killed:
            assert child.process is not None
            child.process.kill()
            child.process.wait()
            log.error(
                "%s did not stop within %.0f s: killed",
                child.spec.name,
                self.grace_s,
                extra=_fields(child),
            )
        return bool(killed)
