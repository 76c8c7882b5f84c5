"""An API served in a thread of the test's own process, on a free port: for
tests that drive it with the command line (a subprocess) and read its ledger
directly."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from services.api.app import create_app
from shared.config.settings import Settings
from tests.support.stack import free_port


@contextmanager
def api_in_thread(settings: Settings) -> Iterator[str]:
    """The API of ``settings`` serving until the block ends: its base URL."""
    port = free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="warning", log_config=None
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="api", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
