"""An HTTP server on 127.0.0.1 that answers a client command as the API would,
from a script: how a unit test runs a ``settleq`` command's real client
against a chosen answer without replacing any part of the command.

``CannedApi(answer)`` calls ``answer(method, path)`` for each request and sends
its ``(status, json)``; ``requests`` records what came (method, path with its
query, lower-cased headers, body). Used as a context manager, it is shut down
on leaving; ``url`` is the base URL to give the command (``--url``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str, str], tuple[int, Any]]


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class CannedApi:
    def __init__(self, answer: Answer) -> None:
        self.requests: list[Request] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                api.requests.append(Request(self.command, self.path, headers, body))
                status, payload = answer(self.command, self.path)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def __enter__(self) -> CannedApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
