"""Watching a real ``settleq up`` from a test: its children killed and back,
``/healthz`` polled throughout, the supervisor's series on the API's ``/metrics``
(used by the supervised-stack chaos suite and the crash-loop e2e test)."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.support.infra import VIEWER_TOKEN
from tests.support.stack import Stack, up_children


class HealthPoller:
    """GET /healthz every 100 ms on a thread; remembers when each poll failed."""

    def __init__(self, url: str) -> None:
        self.url = f"{url}/healthz"
        self.polls = 0
        self.failures: list[float] = []  # when each failed poll started (monotonic)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthPoller:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        # A down API refuses at once; a slow answer on a loaded machine is no
        # failure of the front door (one 1 s timeout failed CI).
        with httpx.Client(timeout=10.0) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    ok = client.get(self.url).status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.polls += 1
                if not ok:
                    self.failures.append(started)
                self._stop.wait(max(0.0, 0.1 - (time.monotonic() - started)))


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    """``check()``'s first truthy value (a transport error counts as none yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except (httpx.HTTPError, OSError):
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def supervised_series(stack: Stack, metric: str) -> dict[str, float]:
    """One of the supervisor's series on the API's ``/metrics``, by component:
    ``settleq_process_restarts_total`` or ``settleq_process_crash_looping``."""
    text = httpx.get(
        f"{stack.url}/metrics", headers={"Authorization": f"Bearer {VIEWER_TOKEN}"}, timeout=10
    ).text
    found = re.findall(rf'^{metric}\{{component="(\w+)"\}} (\S+)$', text, re.M)
    return {component: float(value) for component, value in found}


def restarts(stack: Stack) -> dict[str, float]:
    return supervised_series(stack, "settleq_process_restarts_total")


def kill_and_wait_back(stack: Stack, role: str, timeout: float = 30) -> tuple[int, int]:
    """SIGKILL one child of ``role``; wait for the supervisor to start its
    replacement. The killed PID and the new one."""
    up = stack.processes["up"]
    before = up_children(up)[role]
    victim = before[0]
    subprocess.run(["kill", "-KILL", str(victim)], check=True)

    def replaced() -> list[int] | None:
        now = up_children(up).get(role, [])
        return now if len(now) == len(before) and victim not in now else None

    after = wait_for(f"{role} to be restarted", replaced, timeout=timeout)
    [new] = set(after) - set(before)
    return victim, new
