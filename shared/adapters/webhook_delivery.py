"""One webhook delivery attempt: a signed POST to an endpoint, judged as
Standard Webhooks and docs/api.md#webhooks say (a 2xx within 10 s).

What it refuses to reach is decided after DNS, at each attempt: every address
the endpoint's name resolves to must be allowed (``webhooks.address_allowed``),
and the request goes to the address that was checked, not to the name again,
so a name that answers a public address to the check and 127.0.0.1 to the
connection (DNS rebinding) reaches nothing. TLS still verifies the name's
certificate (SNI). Redirects are not followed: a 3xx is a failed attempt.
The whole attempt, from the DNS question to the answer's first KiB, has
``timeout_s``; no more than ``ANSWER_BYTES`` of the answer is read.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import certifi
import httpx

from shared.domain.webhooks import address_allowed

TIMEOUT_S = 10.0
ANSWER_BYTES = 1024
Resolve = Callable[[str, int], list[str]]


@dataclass(frozen=True)
class Attempt:
    """What one attempt got: an HTTP status, or an error code and why."""

    status: int | None
    error: str | None  # address_refused, url_refused, dns_failed, timeout, connect_failed
    detail: str
    latency_ms: int
    answer: bytes  # at most ANSWER_BYTES

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def url_problem(url: str, allow_private: bool) -> str | None:
    """Why ``url`` can never be an endpoint (before any DNS), or None."""
    parts = urlsplit(url)
    schemes = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in schemes:
        return "an endpoint's URL is https://" + (" (or http:// here)" if allow_private else "")
    if not parts.hostname:
        return "an endpoint's URL names a host"
    if parts.username or parts.password:
        return "an endpoint's URL holds no credentials"
    try:
        port = parts.port
    except ValueError:
        return "an endpoint's URL has a port from 1 to 65535"
    if port == 0:
        return "an endpoint's URL has a port from 1 to 65535"
    return None


@dataclass(frozen=True)
class Refused:
    """Why an endpoint's URL may not be reached (an ``Attempt``'s error and detail)."""

    error: str  # url_refused, dns_failed, address_refused
    detail: str


def destination(url: str, allow_private: bool, resolver: Resolve = resolve) -> str | Refused:
    """The address a request to ``url`` goes to, checked after DNS: every
    address the name resolves to must be allowed. At registration and at
    each attempt."""
    problem = url_problem(url, allow_private)
    if problem is not None:
        return Refused("url_refused", problem)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = resolver(host, port)
    except (OSError, UnicodeError) as exc:
        return Refused("dns_failed", f"{host} did not resolve ({type(exc).__name__})")
    refused = [a for a in addresses if not address_allowed(a, allow_private)]
    if refused or not addresses:
        what = ", ".join(refused) or "nothing"
        return Refused("address_refused", f"{host} resolves to {what}: not a public address")
    return addresses[0]


def deliver(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    allow_private: bool,
    timeout_s: float = TIMEOUT_S,
    resolver: Resolve = resolve,
) -> Attempt:
    """POST ``body`` with ``headers`` to ``url``, once."""
    started = time.monotonic()

    def done(status: int | None, error: str | None, detail: str, answer: bytes = b"") -> Attempt:
        latency = int((time.monotonic() - started) * 1000)
        return Attempt(status, error, detail, latency, answer[:ANSWER_BYTES])

    found = destination(url, allow_private, resolver)
    if isinstance(found, Refused):
        return done(None, found.error, found.detail)
    address = found
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    shown = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    target = urlunsplit((parts.scheme, f"{shown}:{port}", parts.path or "/", parts.query, ""))
    sent = {**headers, "Host": parts.netloc.rsplit("@", 1)[-1], "Content-Type": "application/json"}
    try:
        status, answer = _runner().run(
            asyncio.wait_for(
                _post(target, host, body, sent), timeout_s - (time.monotonic() - started)
            )
        )
    except TimeoutError:
        return done(None, "timeout", f"no answer within {timeout_s:g} s")
    except httpx.HTTPError as exc:
        return done(None, "connect_failed", f"{type(exc).__name__}: {exc}"[:200])
    return done(status, None, f"HTTP {status}", answer)


_THREAD = threading.local()


def _runner() -> asyncio.Runner:
    """This thread's event loop, kept for its next attempt: a new loop an
    attempt cost more CPU than the attempt's own HTTP (bench/webhooks.py)."""
    runner: asyncio.Runner | None = getattr(_THREAD, "runner", None)
    if runner is None:
        runner = _THREAD.runner = asyncio.Runner()
    return runner


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context a process: building one loads the CA bundle, 26 ms of
    CPU, which was most of an attempt's cost (a client per attempt)."""
    return ssl.create_default_context(cafile=certifi.where())


async def _post(
    target: str, host: str, body: bytes, headers: Mapping[str, str]
) -> tuple[int, bytes]:
    async with httpx.AsyncClient(
        follow_redirects=False, timeout=None, trust_env=False, verify=_tls()
    ) as client:
        request = client.build_request(
            "POST", target, content=body, headers=headers, extensions={"sni_hostname": host}
        )
        response = await client.send(request, stream=True)
        try:
            answer = bytearray()
            async for chunk in response.aiter_raw():
                answer += chunk
                if len(answer) >= ANSWER_BYTES:
                    break
            return response.status_code, bytes(answer)
        finally:
            await response.aclose()
