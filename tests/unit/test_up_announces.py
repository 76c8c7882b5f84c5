"""``settleq up`` says "API on …" when the API answers, not when its process
starts (issue 42, item 17): the API took 11–15 s to answer after the line."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import services.commands.cli
from services.commands.cli import Runs, app
from tests.support.stack import free_port

pytestmark = pytest.mark.usefixtures("restore_logging")


class _Healthz(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.regression
def test_up_says_api_on_only_once_the_api_answers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    seen: dict[str, str] = {}

    def supervise(settings: Any, specs: Any, counts: Any, started: Any) -> int:
        started()  # every child started; nothing answers on the port yet
        time.sleep(1.0)
        seen["before"] = capsys.readouterr().out
        server = ThreadingHTTPServer(("127.0.0.1", port), _Healthz)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            deadline = time.monotonic() + 10
            out = ""
            while "API on" not in out and time.monotonic() < deadline:
                time.sleep(0.1)
                out += capsys.readouterr().out
            seen["after"] = out
        finally:
            server.shutdown()
            server.server_close()
        return 0

    monkeypatch.setattr(services.commands.cli.preflight, "check", lambda *args: None)
    monkeypatch.setenv("SETTLEQ_DATABASE_URL", f"sqlite:///{tmp_path}/x.db")  # migrated first
    # As the command line runs it, this process's stdout captured meanwhile.
    code = app(["up", "--port", str(port)], obj=Runs(supervise=supervise), standalone_mode=False)
    assert code == 0
    assert "API on" not in seen["before"], seen
    url = f"http://127.0.0.1:{port}"
    assert f"settleq: API on {url}, dashboard {url}/dashboard" in seen["after"], seen
