"""A webhook receiver on 127.0.0.1 for tests: it records every request and
answers from a script (a status, a pause before it, a Location)."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    status: int = 200
    pause_s: float = 0.0
    location: str | None = None


@dataclass(frozen=True)
class Received:
    at: float  # time.time() when it arrived
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


@dataclass
class Receiver:
    script: deque[Answer] = field(default_factory=deque)
    default: Answer = field(default_factory=Answer)
    received: list[Received] = field(default_factory=list)
    in_flight: int = 0  # requests arrived and not yet answered

    def __post_init__(self) -> None:
        receiver = self
        self._lock = threading.Condition()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the base class's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    receiver.received.append(Received(time.time(), self.path, headers, body))
                    answer = receiver.script.popleft() if receiver.script else receiver.default
                    receiver.in_flight += 1
                    receiver._lock.notify_all()
                time.sleep(answer.pause_s)
                with receiver._lock:
                    receiver.in_flight -= 1
                try:
                    self.send_response(answer.status)
                    if answer.location:
                        self.send_header("Location", answer.location)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sender gave up first (its 10 s): what a hanging endpoint does

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        """The first ``count`` requests, once they arrived (AssertionError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self.received)} of {count} requests within {timeout} s"
                self._lock.wait(left)
            return list(self.received[:count])

    def of_type(self, event_type: str) -> list[Received]:
        import json

        with self._lock:
            return [r for r in self.received if json.loads(r.body)["type"] == event_type]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
