"""``settleq`` client commands as a user runs them: a process of their own, the
client settings in the environment and nothing else of this one's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from tests.support.infra import BROKER_URL, PRODUCER_ID, PRODUCER_SECRET, VIEWER_TOKEN
from tests.support.stack import ROOT

SETTLEQ = [sys.executable, "-m", "services.commands.cli"]


def client_environ(
    queue_prefix: str,
    token: str = VIEWER_TOKEN,
    key_id: str = PRODUCER_ID,
    secret: str = PRODUCER_SECRET,
) -> dict[str, str]:
    """A client's settings: its producer key, its bearer token, the stack's broker."""
    return {
        "COLUMNS": "200",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SETTLEQ_CLIENT_TOKEN": token,
        "SETTLEQ_CLIENT_KEY_ID": key_id,
        "SETTLEQ_CLIENT_SECRET": secret,
        "SETTLEQ_BROKER_URL": BROKER_URL,
        "SETTLEQ_QUEUE_PREFIX": queue_prefix,
    }


def hears_ctrl_c() -> None:
    """``preexec_fn`` of a command a test sends SIGINT: Ctrl-C at its default,
    whatever the test run inherited (a run started in the background ignores
    SIGINT, and so would the command: it never stopped)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_settleq(
    args: Sequence[str], env: dict[str, str], stdin: str = "", timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SETTLEQ, *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
