"""The whole stack as real processes: ``settleq api`` and ``settleq worker``s."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import httpx

from services.commands.client import Client
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
)

ROOT = Path(__file__).resolve().parents[2]


# How long a starting process may take to answer /readyz while it is alive: a
# cap for a hung start, not an expectation (a loaded CI machine took over 30 s).
START_CAP_S = 180.0


def wait_serving(
    process: subprocess.Popen[bytes],
    url: str,
    timeout: float = START_CAP_S,
    gave_up: Callable[[], bool] = lambda: False,
) -> None:
    """Until ``url`` answers /readyz 200. Raises RuntimeError as soon as the
    process has exited or ``gave_up`` says it cannot start (waiting on it, not
    on the clock), or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if gave_up():
            raise RuntimeError(f"gave up on {url}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready at {url} after {timeout:.0f} s")
        time.sleep(0.2)
    raise RuntimeError(f"exited with {process.returncode} before it was ready at {url}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stack:
    def __init__(
        self,
        env: ServiceEnv,
        logs: Path,
        *,
        cwd: Path = ROOT,
        omit: Collection[str] = (),
        api_address: str = "127.0.0.1",
        **overrides: Any,
    ) -> None:
        """``overrides`` are settings; ``omit`` names settings left unset (their
        defaults apply); processes run in ``cwd``, each with ``PGAPPNAME`` set to
        its name, so that PostgreSQL shows its backends under that name
        (tests/support/booking_lock.py). The API listens on ``api_address``
        (a network namespace's, for the cluster tests)."""
        self.env = env
        self.logs = logs
        self.cwd = cwd
        self.omit = omit
        self.overrides = overrides
        self.port = free_port()
        self.api_address = api_address
        self.url = f"http://{api_address}:{self.port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[Any] = []
        self._clients: list[Client] = []
        self._spawned: set[str] = set()
        self.metrics_ports: dict[str, int] = {}

    def _spawn(
        self,
        name: str,
        args: list[str],
        netns: str | None = None,
        **overrides: Any,
    ) -> subprocess.Popen[bytes]:
        """``netns`` names the network namespace it runs in (``ip netns exec``
        execs it, so the process is still the one a signal reaches)."""
        environ = self.env.environ(self.omit, **{**self.overrides, **overrides})
        environ["PGAPPNAME"] = name  # libpq names this process's backends
        # `python -m services.commands.cli` finds this tree from any working directory.
        environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
        )
        # A fresh log per run; a process restarted under its name appends to its own.
        mode = "ab" if name in self._spawned else "wb"
        self._spawned.add(name)
        log = open(self.logs / f"{name}.log", mode)  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        process = subprocess.Popen(
            [*(("ip", "netns", "exec", netns) if netns else ()), sys.executable, "-m"]
            + ["services.commands.cli", *args],
            cwd=self.cwd,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes[name] = process
        return process

    def start_api(self, netns: str | None = None) -> None:
        for _ in range(3):
            args = ["api", "--host", self.api_address, "--port", str(self.port)]
            process = self._spawn("api", args, netns=netns)
            try:
                wait_serving(process, self.url)
                return
            except RuntimeError:
                # free_port's port, released for the API to bind, can be taken
                # first by another test's process (under xdist): another one.
                if process.poll() is not None and "port_in_use" in self.log("api"):
                    self.port = free_port()
                    self.url = f"http://{self.api_address}:{self.port}"
                    continue
                raise RuntimeError(f"API did not start:\n{self.log('api')}") from None
        raise RuntimeError(f"API did not start:\n{self.log('api')}")

    def start_up(self) -> None:
        """The whole stack as one ``settleq up`` (api, both worker tiers, relay)."""
        for _ in range(3):
            # A first start truncates the log; a restart appends to it.
            seen = len(self.log("up", tail=None)) if "up" in self._spawned else 0
            process = self._spawn("up", ["up", "--port", str(self.port)])

            def taken(seen: int = seen) -> bool:
                return "port_in_use" in self.log("up", tail=None)[seen:]

            try:
                wait_serving(process, self.url, gave_up=taken)
                return
            except RuntimeError:
                # As start_api: the port free_port released can be taken first
                # (an outgoing connection's local port, another test's process);
                # up's supervisor would restart its API on it for ever.
                if not taken():
                    break
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
                self.port = free_port()
                self.url = f"http://{self.api_address}:{self.port}"
        raise RuntimeError(f"settleq up did not start:\n{self.log('up')}")

    def start_worker(
        self,
        tier: str,
        name: str | None = None,
        netns: str | None = None,
        *,
        checked: bool = False,
        **overrides: Any,
    ) -> subprocess.Popen[bytes]:
        """One worker process (not a supervisor of several: killing it kills the
        worker), serving its metrics on a port of its own. ``checked``: started
        as a supervisor starts one, without the start-up checks."""
        name = name or tier
        self.metrics_ports[name] = port = free_port()
        args = ["worker", "--queues", tier, "--processes", "1", "--metrics-port", str(port)]
        return self._spawn(name, [*args, "--checked"] if checked else args, netns, **overrides)

    def start_host(self, netns: str) -> None:
        """A worker host (tests/cluster): one worker of each tier in the network
        namespace ``netns``, named ``fast-<netns>`` and ``heavy-<netns>``."""
        self.start_worker("fast_path", name=f"fast-{netns}", netns=netns)
        self.start_worker("compute_heavy", name=f"heavy-{netns}", netns=netns)

    def scrape(self, name: str, token: str | None = VIEWER_TOKEN) -> httpx.Response:
        """GET a process's ``/metrics``: the API's (``api``) or a worker's, by name."""
        url = self.url if name == "api" else f"http://127.0.0.1:{self.metrics_ports[name]}"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        process = self.processes[name]
        # A worker serves its metrics once it has started, which on a loaded
        # machine took longer than any fixed wait: wait while it is alive.
        deadline = time.monotonic() + START_CAP_S
        while True:
            try:
                return httpx.get(f"{url}/metrics", headers=headers, timeout=10)
            except httpx.TransportError:
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited:\n{self.log(name)}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def start(self) -> Stack:
        self.start_api()
        self.start_worker("fast_path")
        self.start_worker("compute_heavy")
        return self

    def stop_one(self, name: str) -> None:
        """SIGTERM one process and wait for it to exit (a graceful stop)."""
        process = self.processes.pop(name)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise

    def kill(self, name: str) -> None:
        process = self.processes.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()
        for client in self._clients:
            client.close()
        self._clients.clear()

    def log(self, name: str, tail: int | None = 5000) -> str:
        """A process's output (its last ``tail`` characters, or all of it)."""
        path = self.logs / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return text[-tail:] if tail else text

    def client(self, **kwargs: Any) -> Client:
        """A client closed with the stack."""
        client = Client(self.url, timeout=120, **kwargs)
        self._clients.append(client)
        return client

    def producer(self) -> Client:
        return self.client(key_id=PRODUCER_ID, secret=PRODUCER_SECRET)

    def viewer(self) -> Client:
        return self.client(token=VIEWER_TOKEN)

    def operator(self) -> Client:
        return self.client(token=OPERATOR_TOKEN)


def log_events(text: str) -> list[dict[str, Any]]:
    """The events of a process's log: JSON lines, as the processes write them
    when their stderr is not a terminal (shared/logs.py)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def queue_messages(prefix: str) -> int:
    """Ready plus unacknowledged messages in every queue of this prefix."""
    out = subprocess.run(
        ["rabbitmqctl", "list_queues", "-q", "--formatter", "json", "name", "messages"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sum(q["messages"] for q in json.loads(out) if q["name"].startswith(f"{prefix}."))


def wait_until_drained(prefix: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if queue_messages(prefix) == 0:
            return
        time.sleep(0.3)
    raise AssertionError(f"queues of {prefix} did not drain in {timeout} s")


def child_pids(pid: int) -> list[int]:
    """The live children of a process (Linux: /proc/<pid>/task/*/children)."""
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(p) for p in (task / "children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return found


def role_of(pid: int) -> str | None:
    """What a ``python -m services.commands.cli ...`` child of ``settleq up`` runs: api,
    relay, or the queue families of a worker (fast_path, compute_heavy); None
    for a process that is gone (or a zombie, whose command line is empty)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None
    if state in ("Z", "X") or "services.commands.cli" not in argv:
        return None
    command = argv[argv.index("services.commands.cli") + 1]
    return argv[argv.index("--queues") + 1] if command == "worker" else command


def up_children(up: subprocess.Popen[bytes]) -> dict[str, list[int]]:
    """The live children of a ``settleq up``, by role (see ``role_of``)."""
    roles: dict[str, list[int]] = {}
    for pid in child_pids(up.pid):
        role = role_of(pid)
        if role is not None:
            roles.setdefault(role, []).append(pid)
    return {role: sorted(pids) for role, pids in roles.items()}
