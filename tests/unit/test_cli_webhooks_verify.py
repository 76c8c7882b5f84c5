"""``settleq webhooks verify``: a request on stdin, yes or no and why
(docs/api.md#webhooks)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from shared.domain import webhooks

ROOT = Path(__file__).resolve().parents[2]
SECRET = webhooks.new_secret()
BODY = b'{"type":"ping","id":"msg_9","created_at":"2026-12-04T00:00:00Z","data":{}}'


def verify(request: bytes, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "services.commands.cli", "webhooks", "verify", *args],
        cwd=ROOT,
        input=request,
        capture_output=True,
        timeout=60,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def request(stamp: int, body: bytes = BODY, secret: str = SECRET) -> bytes:
    headers = webhooks.headers([secret], "msg_9", stamp, body)
    lines = ["POST /hooks/settleq HTTP/1.1", "Host: example.com", "Content-Type: application/json"]
    lines += [f"{name.title()}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_a_signed_request_is_valid_and_a_changed_one_says_why_not() -> None:
    now = int(time.time())
    ok = verify(request(now), "--secret", SECRET)
    assert (ok.returncode, ok.stdout.strip()) == (0, "valid: the signature holds")
    tampered = verify(request(now).replace(b'"ping"', b'"pong"'), "--secret", SECRET)
    assert tampered.returncode == 1
    assert tampered.stdout.strip() == "invalid: no signature matches this secret and body"
    old = verify(request(now - 3600), "--secret", SECRET)
    assert old.returncode == 1 and "too old" in old.stdout
    # A request saved earlier is checked as of its own time.
    assert verify(request(now - 3600), "--secret", SECRET, "--at", str(now - 3590)).returncode == 0
    assert not ok.stderr and SECRET not in ok.stdout + tampered.stdout + old.stdout


def test_bare_newlines_and_no_request_line_are_read_too() -> None:
    now = int(time.time())
    headers = webhooks.headers([SECRET], "msg_9", now, BODY)
    raw = "".join(f"{k}: {v}\n" for k, v in headers.items()).encode() + b"\n" + BODY
    assert verify(raw, "--secret", SECRET).returncode == 0


def test_a_secret_that_is_none_is_a_usage_error_without_a_traceback() -> None:
    done = verify(request(int(time.time())), "--secret", "sk_live_123")
    assert done.returncode == 2
    assert done.stdout.strip() == "not a webhook secret: a webhook secret starts with whsec_"
    assert "Traceback" not in done.stderr
    empty = verify(b"", "--secret", SECRET)
    assert empty.returncode == 1 and "missing header" in empty.stdout
