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
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from urllib.parse import urlsplit, urlunsplit

import certifi
import httpx

from shared.domain.webhooks import address_allowed


def _version() -> str:
    try:
        return metadata.version("settleq")
    except metadata.PackageNotFoundError:
        return "dev"


TIMEOUT_S = 10.0
# Who is calling, for a receiver's logs and firewall (not httpx's default).
USER_AGENT = f"settleq-webhooks/{_version()}"
ANSWER_BYTES = 1024
Resolve = Callable[[str, int], list[str]]


@dataclass(frozen=True)
class Attempt:
    """What one attempt got: an HTTP status, or an error code and why."""

    status: int | None
    error: (
        str | None
    )  # url_invalid, url_refused, address_refused, dns_failed, timeout, connect_failed
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


@dataclass(frozen=True)
class Refused:
    """Why an endpoint's URL may not be reached (an ``Attempt``'s error and detail)."""

    error: str  # url_invalid, url_refused, dns_failed, address_refused
    detail: str


_MALFORMED = "an endpoint's URL is malformed (its host or port cannot be read)"
# A host in brackets (RFC 3986's IP-literal) is the whole host: a port or
# nothing may follow it, and nothing may come before it. It holds an IPv6
# address only: no IPvFuture, and no zone id (a link-local address's, which
# the WHATWG URL standard refuses too).
_BRACKETED = re.compile(r"\[[0-9A-Fa-f:.]+\](?::[0-9]*)?")


def _bracketed_host_whole(host_and_port: str, host: str | None) -> bool:
    """Whether the host as written is plain, or one IPv6 address in brackets.
    urlsplit takes the address between the first ``[`` and the next ``]`` and
    drops the rest (``[::1]x``, ``[::1]]``, ``x[::1]`` all read as ``::1``),
    and it lets an IPvFuture literal (``[v1.x]``) through as a name."""
    if "[" not in host_and_port and "]" not in host_and_port:
        return True
    if host is None or not _BRACKETED.fullmatch(host_and_port):
        return False
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Target:
    """A URL's parts a request needs, once it parsed."""

    scheme: str
    host: str  # the name or address, without brackets
    port: int
    netloc: str  # as written, for the Host header
    path: str
    query: str


def parse(url: str) -> Target | str:
    """``url``'s parts, or why it is no URL at all (a malformed one: brackets
    that are not the whole host or not an IPv6 address, a port that is not 1
    to 65535, no host, a space or control character in the host). Never raises."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        # urlsplit's own words would repeat the input; ours say what is wrong.
        return _MALFORMED
    if not _bracketed_host_whole(parts.netloc.rpartition("@")[2], host):
        return _MALFORMED
    if not host:
        return "an endpoint's URL names a host"
    if any(c.isspace() or not c.isprintable() for c in host):
        return "an endpoint's URL has a host without spaces or control characters"
    if port == 0:
        return "an endpoint's URL has a port from 1 to 65535"
    default = 443 if parts.scheme == "https" else 80
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return Target(parts.scheme, host, port or default, netloc, parts.path, parts.query)


def url_problem(url: str, allow_private: bool) -> Refused | None:
    """Why ``url`` can never be an endpoint (before any DNS), or None:
    ``url_invalid`` for a malformed one, ``url_refused`` for one it may not
    be (not https://, credentials in it)."""
    parsed = parse(url)
    if isinstance(parsed, str):
        return Refused("url_invalid", parsed)
    schemes = ("https", "http") if allow_private else ("https",)
    if parsed.scheme not in schemes:
        why = "an endpoint's URL is https://" + (" (or http:// here)" if allow_private else "")
        return Refused("url_refused", why)
    parts = urlsplit(url)
    if parts.username or parts.password:
        return Refused("url_refused", "an endpoint's URL holds no credentials")
    return None


def destination(url: str, allow_private: bool, resolver: Resolve = resolve) -> str | Refused:
    """The address a request to ``url`` goes to, checked after DNS: every
    address the name resolves to must be allowed. At registration and at
    each attempt. A refusal names the host, never what it resolved to (that
    would let a producer map a network it may not reach)."""
    problem = url_problem(url, allow_private)
    if problem is not None:
        return problem
    target = parse(url)
    assert isinstance(target, Target)
    try:
        addresses = resolver(target.host, target.port)
    except (OSError, UnicodeError, ValueError) as exc:
        return _dns_failed(target.host, exc)
    return _judged(target.host, addresses, allow_private)


def _dns_failed(host: str, exc: BaseException) -> Refused:
    return Refused("dns_failed", f"{host} did not resolve ({type(exc).__name__})")


def _judged(host: str, addresses: list[str], allow_private: bool) -> str | Refused:
    try:
        refused = [a for a in addresses if not address_allowed(a, allow_private)]
    except ValueError:  # not an address: a resolver's oddity, never reached
        refused = addresses
    if refused or not addresses:
        return Refused("address_refused", f"{host} resolves to an address that is not public")
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
    """POST ``body`` with ``headers`` to ``url``, once, on this thread."""
    return _runner().run(
        deliver_async(
            url, body, headers, allow_private=allow_private, timeout_s=timeout_s, resolver=resolver
        )
    )


async def deliver_async(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    allow_private: bool,
    timeout_s: float = TIMEOUT_S,
    resolver: Resolve = resolve,
) -> Attempt:
    """``deliver`` on the running event loop: an attempt that waits on its
    endpoint holds no thread (the DNS question is asked on the loop's
    executor), so a webhooks process waits on many hanging endpoints at once."""
    started = time.monotonic()

    def done(status: int | None, error: str | None, detail: str, answer: bytes = b"") -> Attempt:
        latency = int((time.monotonic() - started) * 1000)
        return Attempt(status, error, detail, latency, answer[:ANSWER_BYTES])

    problem = url_problem(url, allow_private)
    if problem is not None:
        return done(None, problem.error, problem.detail)
    parts = parse(url)
    assert isinstance(parts, Target)  # url_problem parsed it
    host, port = parts.host, parts.port
    loop = asyncio.get_running_loop()
    try:
        addresses = await asyncio.wait_for(
            loop.run_in_executor(None, resolver, host, port), timeout_s
        )
    except TimeoutError:
        return done(None, "timeout", f"no answer within {timeout_s:g} s")
    except (OSError, UnicodeError, ValueError) as exc:
        refused = _dns_failed(host, exc)
        return done(None, refused.error, refused.detail)
    found = _judged(host, addresses, allow_private)
    if isinstance(found, Refused):
        return done(None, found.error, found.detail)
    address = found
    shown = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    target = urlunsplit((parts.scheme, f"{shown}:{port}", parts.path or "/", parts.query, ""))
    sent = {
        **headers,
        "Host": parts.netloc,
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
    }
    try:
        status, answer = await asyncio.wait_for(
            _post(target, host, body, sent), timeout_s - (time.monotonic() - started)
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
