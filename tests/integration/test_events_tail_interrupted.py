"""``settleq events tail`` stopped by Ctrl-C exits 130, as ``ledger feed
--follow`` does (issue 52 item 11): one behaviour for every command that
follows something, the shell's convention for a command interrupted."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from tests.support.cli import SETTLEQ, client_environ, hears_ctrl_c
from tests.support.infra import ServiceEnv
from tests.support.stack import ROOT


@pytest.mark.regression
def test_ctrl_c_stops_events_tail_with_exit_130(test_env: ServiceEnv) -> None:
    tail = subprocess.Popen(
        [*SETTLEQ, "events", "tail"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=client_environ(test_env.queue_prefix),
        preexec_fn=hears_ctrl_c,
    )
    try:
        assert tail.stderr is not None
        deadline = time.monotonic() + 60
        while "tailing" not in tail.stderr.readline():  # bound once it says so
            assert time.monotonic() < deadline and tail.poll() is None, "events tail did not start"
        tail.send_signal(signal.SIGINT)
        _, stderr = tail.communicate(timeout=60)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
    assert tail.returncode == 130, stderr
    assert "Traceback" not in stderr
