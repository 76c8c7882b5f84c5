"""Several "machines" on this one: Linux network namespaces on a private bridge.

A :class:`Topology` is a bridge in the root namespace, a ``services`` namespace
and N worker-host namespaces, each on the bridge by a veth pair with an address
from a private /24 chosen here. Tests start processes inside a namespace
(``run_in``) and cut a host off the network (``cut``/``restore``). All it makes
is named ``sq<pid>...`` (interface names hold 15 characters at most) and goes at
``teardown``, which the context manager, the fixture's finalizer and ``atexit``
all call; ``sweep`` removes what a run killed outright left (its pid is gone).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any

# sq<pid>br, sq<pid>sa, sq<pid>h3b (interfaces); sq<pid>-svc, sq<pid>-h3 (namespaces).
_OURS = re.compile(r"^sq(\d+)(?:br|s[ab]|h\d+[ab]|-svc|-h\d+)$")
_TMP_PREFIX = "settleq-net-"
_TMP_DIR = re.compile(rf"^{_TMP_PREFIX}sq(\d+)-")
_ACTIVE: list[Topology] = []


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def requirements_missing() -> str | None:
    """Why this machine cannot build a topology, or None when it can."""
    if os.geteuid() != 0:
        return "the cluster tests need root (network namespaces, veth pairs, a bridge)"
    if shutil.which("ip") is None:
        return "the cluster tests need iproute2's `ip` (apt-get install -y iproute2)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`ip netns` does not work here: {probe.stderr.strip()}"
    return None


@dataclass(frozen=True)
class Namespace:
    """One namespace on the bridge: its name, its address, both ends of its veth."""

    name: str
    address: str
    veth_root: str  # the bridge's end, in the root namespace: down = cable pulled
    veth_ns: str  # the end inside the namespace, which holds ``address``


def _stale(name: str, pattern: re.Pattern[str] = _OURS) -> bool:
    """Ours (by name), and the process whose pid it carries is gone."""
    match = pattern.match(name)
    return match is not None and not Path(f"/proc/{match.group(1)}").exists()


def _kill_namespace(name: str) -> None:
    """SIGKILL whatever runs in the namespace (daemons too: epmd, postgres), then
    delete it: a namespace lives on while any process holds it."""
    deadline = time.monotonic() + 10
    while (pids := _ip("netns", "pids", name, check=False).stdout.split()) and (
        time.monotonic() < deadline
    ):
        for pid in map(int, pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    _ip("netns", "delete", name, check=False)


def sweep() -> list[str]:
    """Remove namespaces, interfaces and work directories of runs that are gone."""
    removed = [line.split(" ", 1)[0] for line in _ip("netns", "list").stdout.splitlines()]
    removed = [name for name in removed if _stale(name)]
    for name in removed:
        _kill_namespace(name)  # which takes its veth pairs along
    for line in _ip("-o", "link").stdout.splitlines():
        if _stale(name := line.split(":")[1].strip().split("@")[0]):
            _ip("link", "delete", name, check=False)
            removed.append(name)
    for path in Path(tempfile.gettempdir()).glob(f"{_TMP_PREFIX}sq*"):
        if _stale(path.name, _TMP_DIR):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


def _free_subnet(seed: int) -> str:
    """A 10.231.N.0/24 that no address or route of this machine is in yet; the
    seed (our pid) keeps two concurrent runs apart."""
    used = _ip("-4", "-o", "addr", "show").stdout + _ip("-4", "route", "show").stdout
    for step in range(230):
        third = 20 + (seed + step) % 230
        if f"10.231.{third}." not in used:
            return f"10.231.{third}"
    raise RuntimeError("no free 10.231.N.0/24 subnet for the test network")


class Topology:
    """A bridge, a ``services`` namespace and ``hosts`` worker-host namespaces."""

    def __init__(self, hosts: int = 2, root_address: bool = True) -> None:
        if not 1 <= hosts <= 9:
            raise ValueError("hosts: 1 to 9 worker-host namespaces")
        pid = os.getpid()
        if _ACTIVE:  # a second one would have the same names
            raise RuntimeError("one topology per process at a time")
        self.prefix = f"sq{pid}"
        self.subnet = _free_subnet(pid)
        self.bridge = f"{self.prefix}br"
        self.root_address = f"{self.subnet}.254" if root_address else None
        self.services = self._namespace("svc", "s", 1)
        self.hosts = [self._namespace(f"h{i}", f"h{i}", 10 + i) for i in range(1, hosts + 1)]
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{self.prefix}-"))
        self._processes: list[subprocess.Popen[Any]] = []
        self._files: list[IO[bytes]] = []
        self._lock = threading.Lock()
        self._torn_down = False
        self._old_sigterm: Any = None

    def _namespace(self, tag: str, veth: str, octet: int) -> Namespace:
        end = f"{self.prefix}{veth}"
        return Namespace(f"{self.prefix}-{tag}", f"{self.subnet}.{octet}", f"{end}a", f"{end}b")

    @property
    def cidr(self) -> str:
        return f"{self.subnet}.0/24"

    @property
    def namespaces(self) -> list[Namespace]:
        return [self.services, *self.hosts]

    def __enter__(self) -> Topology:
        self.build()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.teardown()

    def build(self) -> None:
        """Create it all; a failure part way tears down what was made."""
        _ACTIVE.append(self)
        # A SIGTERM (CI cancelling the job) ends a process without finalizers or
        # atexit: as SystemExit it unwinds through teardown instead.
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._old_sigterm = signal.signal(signal.SIGTERM, _sigterm_exit)
        try:
            _ip("link", "add", self.bridge, "type", "bridge", "forward_delay", "0")
            if self.root_address:
                _ip("addr", "add", f"{self.root_address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for ns in self.namespaces:
                self._attach(ns)
        except BaseException:
            self.teardown()
            raise

    def _attach(self, ns: Namespace) -> None:
        _ip("netns", "add", ns.name)
        _ip("link", "add", ns.veth_root, "type", "veth", "peer", "name", ns.veth_ns)
        _ip("link", "set", ns.veth_ns, "netns", ns.name)
        _ip("link", "set", ns.veth_root, "master", self.bridge, "up")
        inside = ("netns", "exec", ns.name, "ip")
        _ip(*inside, "link", "set", "lo", "up")  # a new namespace's loopback is down
        _ip(*inside, "addr", "add", f"{ns.address}/24", "dev", ns.veth_ns)
        _ip(*inside, "link", "set", ns.veth_ns, "up")

    def run_in(
        self, ns: Namespace, argv: Sequence[str], env: Mapping[str, str] | None = None, **popen: Any
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside ``ns``, in a process group of its own (teardown kills
        the group); ``env`` replaces the environment. Output goes to a log file in
        ``workdir`` unless ``popen`` (more Popen arguments: cwd, stdout, ...) says
        where, ``log_name`` naming that file."""
        if ns not in self.namespaces:
            raise ValueError(f"{ns.name} is not a namespace of this topology")
        name = popen.pop("log_name", None) or f"{ns.name}-{Path(argv[0]).name}"
        if popen.get("stdout") is None:
            log = open(self.workdir / f"{name}-{len(self._processes)}.log", "ab")  # noqa: SIM115
            self._files.append(log)  # closed at teardown
            popen.update(stdout=log, stderr=popen.get("stderr") or subprocess.STDOUT)
        popen.setdefault("stdin", subprocess.DEVNULL)
        command = ["ip", "netns", "exec", ns.name, *argv]
        process = subprocess.Popen(command, env=env, start_new_session=True, **popen)
        with self._lock:
            self._processes.append(process)
        return process

    def run(
        self, ns: Namespace, argv: Sequence[str], timeout: float = 60, **kwargs: Any
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` in ``ns`` to completion; its output captured, as text."""
        process = self.run_in(ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            out, err = process.communicate()
            raise
        text = [stream.decode(errors="replace") for stream in (out, err)]
        return subprocess.CompletedProcess(process.args, process.returncode, *text)

    def cut(self, host: Namespace) -> None:
        """Pull the host's cable: its bridge-side veth goes down, so packets to and
        from it vanish (connections hang rather than reset, as on a real network)."""
        _ip("link", "set", host.veth_root, "down")

    def restore(self, host: Namespace) -> None:
        """Plug it back in; neighbour entries that failed meanwhile are forgotten."""
        _ip("link", "set", host.veth_root, "up")
        for ns in self.namespaces:
            _ip("-n", ns.name, "neigh", "flush", "dev", ns.veth_ns, check=False)
        _ip("neigh", "flush", "dev", self.bridge, check=False)

    def drop(self, host: Namespace, loss: str = "100%") -> None:
        """Lose ``loss`` of the host's packets both ways (tc netem, whose kernel
        module not every machine has: there this raises, and ``cut`` remains)."""
        for argv in _tc(host, "replace", "netem", "loss", loss):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                self.undrop(host)
                raise RuntimeError(f"tc netem is not available here: {done.stderr.strip()}")

    def undrop(self, host: Namespace) -> None:
        for argv in _tc(host, "del"):
            subprocess.run(argv, capture_output=True, timeout=30)

    def teardown(self) -> None:
        """Kill what runs in our namespaces; delete them, the veths, the bridge. Idempotent."""
        with self._lock:
            if self._torn_down:
                return
            self._torn_down = True
        try:
            for process in self._processes:
                _kill_group(process)
            for ns in self.namespaces:
                _kill_namespace(ns.name)
                _ip("link", "delete", ns.veth_root, check=False)
            _ip("link", "delete", self.bridge, check=False)
        finally:
            for stream in self._files:
                stream.close()
            shutil.rmtree(self.workdir, ignore_errors=True)
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            if self._old_sigterm is not None:
                signal.signal(signal.SIGTERM, self._old_sigterm)


def _sigterm_exit(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(143)


def _tc(host: Namespace, verb: str, *qdisc: str) -> list[list[str]]:
    """``tc qdisc VERB`` on both ends of the host's veth: egress each way."""
    inside = ["ip", "netns", "exec", host.name]
    return [
        [*prefix, "tc", "qdisc", verb, "dev", dev, "root", *qdisc]
        for prefix, dev in (([], host.veth_root), (inside, host.veth_ns))
    ]


def _kill_group(process: subprocess.Popen[Any]) -> None:
    """SIGTERM the process group, SIGKILL it after 5 s; close the pipes we hold."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    # Not the group once its leader is reaped (the pid may be someone's by then): a
    # child that outlived it is still in one of our namespaces, _kill_namespace's.
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@atexit.register
def _teardown_active() -> None:
    for topology in list(_ACTIVE):
        topology.teardown()
