"""One webhook delivery attempt against real receivers on localhost
(shared/adapters/webhook_delivery.py, docs/api.md#webhooks): what counts as
delivered, the answer read up to 1 KiB, the 10 s budget, no redirect
followed, and no loopback, private or metadata address reached unless
private addresses are allowed (development and tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from shared.adapters.webhook_delivery import ANSWER_BYTES, deliver
from shared.domain import webhooks

SECRET = webhooks.new_secret()
BODY = b'{"type":"ping","id":"msg_1","created_at":"2026-12-04T00:00:00Z","data":{}}'


class Receiver:
    """A receiver on 127.0.0.1 answering each request with the next of ``answers``
    (status, headers, body, delay), and keeping what it was sent."""

    def __init__(self, *answers: tuple[int, dict[str, str], bytes, float]) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                outer.requests.append(
                    ({k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
                )
                status, headers, body, delay = outer.answers[
                    min(len(outer.requests), len(outer.answers)) - 1
                ]
                time.sleep(delay)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for receiver in made:
        receiver.close()


def receiver(made: list[Receiver], *answers: tuple[int, dict[str, str], bytes, float]) -> Receiver:
    made.append(Receiver(*answers))
    return made[-1]


def signed(now: int) -> dict[str, str]:
    return webhooks.headers([SECRET], "msg_1", now, BODY)


def test_a_2xx_is_delivered_with_a_signature_that_verifies(receivers: list[Receiver]) -> None:
    r = receiver(receivers, (204, {}, b"", 0))
    now = int(time.time())
    attempt = deliver(r.url, BODY, signed(now), allow_private=True)
    assert attempt.delivered and attempt.status == 204 and attempt.error is None
    [(headers, body)] = r.requests
    assert body == BODY and headers["content-type"] == "application/json"
    assert headers["host"] == r.url.split("/")[2]
    assert webhooks.verify(SECRET, headers, body, now).ok


def test_anything_but_a_2xx_is_not_delivered_and_the_answer_is_kept_to_1_kib(
    receivers: list[Receiver],
) -> None:
    r = receiver(receivers, (500, {}, b"x" * 100_000, 0), (400, {}, b"bad", 0))
    first = deliver(r.url, BODY, signed(int(time.time())), allow_private=True)
    assert (first.status, first.delivered, len(first.answer)) == (500, False, ANSWER_BYTES)
    second = deliver(r.url, BODY, signed(int(time.time())), allow_private=True)
    assert (second.status, second.answer) == (400, b"bad")


def test_a_redirect_is_not_followed(receivers: list[Receiver]) -> None:
    inside = receiver(receivers, (200, {}, b"secret inside", 0))
    r = receiver(receivers, (302, {"Location": inside.url}, b"", 0))
    attempt = deliver(r.url, BODY, signed(int(time.time())), allow_private=True)
    assert attempt.status == 302 and not attempt.delivered
    assert inside.requests == []


def test_an_attempt_has_its_time_and_no_more(receivers: list[Receiver]) -> None:
    r = receiver(receivers, (200, {}, b"late", 3.0))
    started = time.monotonic()
    attempt = deliver(r.url, BODY, signed(int(time.time())), allow_private=True, timeout_s=1.0)
    assert attempt.error == "timeout" and not attempt.delivered
    assert 0.9 <= time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("url", "resolved", "error"),
    [
        ("https://127.0.0.1:8443/hooks", None, "address_refused"),
        ("https://localhost:8443/hooks", None, "address_refused"),  # resolves to 127.0.0.1
        # A public-looking name that resolves to the metadata service or a private network.
        ("https://hooks.example.com/x", ["169.254.169.254"], "address_refused"),
        ("https://hooks.example.com/x", ["93.184.216.34", "10.0.0.7"], "address_refused"),
        ("http://hooks.example.com/x", ["93.184.216.34"], "url_refused"),  # https only
        ("https://user:pw@hooks.example.com/x", ["93.184.216.34"], "url_refused"),
        ("https://no-such-host.invalid/x", None, "dns_failed"),
    ],
)
def test_without_private_addresses_only_public_https_endpoints_are_reached(
    url: str, resolved: list[str] | None, error: str
) -> None:
    def resolver(host: str, port: int) -> list[str]:
        assert resolved is not None
        return resolved

    kwargs: dict[str, Any] = {} if resolved is None else {"resolver": resolver}
    attempt = deliver(url, BODY, signed(int(time.time())), allow_private=False, **kwargs)
    assert attempt.error == error and not attempt.delivered, attempt


def test_the_checked_address_is_the_one_connected_to(receivers: list[Receiver]) -> None:
    """A name whose first answer is checked and whose second would be
    127.0.0.1 (DNS rebinding) is reached at the checked address only."""
    r = receiver(receivers, (200, {}, b"", 0))
    port = int(r.url.split(":")[2].split("/")[0])
    answers = iter([["127.0.0.1"], ["10.9.9.9"]])  # a second lookup would go elsewhere
    attempt = deliver(
        f"http://hooks.test:{port}/hooks",
        BODY,
        signed(int(time.time())),
        allow_private=True,
        resolver=lambda host, p: next(answers),
    )
    assert attempt.delivered
    [(headers, _)] = r.requests
    assert headers["host"] == f"hooks.test:{port}"
