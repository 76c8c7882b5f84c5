"""Issue 42's webhook edges, pure: a malformed URL is a refusal by name and
never an exception, an IPv6 address is judged by the IPv4 one it embeds, and
a refusal never tells what a name resolved to (shared/domain/webhooks.py,
shared/adapters/webhook_delivery.py, docs/api.md#webhooks)."""

from __future__ import annotations

import pytest

from shared.adapters.webhook_delivery import Refused, Target, deliver, destination, parse
from shared.domain import webhooks

MALFORMED = [
    "https://[127.0.0.1]/",
    "https://[::1:8420/",
    "https://a]b/",
    "https://[]/",
    "https://[::1]:99999/",
    "https://h.example:abc/",
    "https://h.example:0/",
    "https://",
    "https://h\x00.example/",
    "https://h .example/",
]


@pytest.mark.regression
@pytest.mark.parametrize("url", MALFORMED)
def test_a_malformed_url_is_url_invalid_at_every_attempt_never_an_exception(url: str) -> None:
    """urlsplit raised ValueError out of the check (a 500 at registration, an
    attempt that never ended at delivery)."""
    for allow_private in (False, True):
        found = destination(url, allow_private, resolver=lambda h, p: ["93.184.216.34"])
        assert isinstance(found, Refused) and found.error == "url_invalid", (url, found)
        tried = deliver(url, b"{}", {}, allow_private=allow_private)
        assert tried.error == "url_invalid" and tried.status is None


# Brackets that are not the whole host, or hold no IPv6 address: urlsplit read
# the address between them and dropped the rest, so these were registered
# (issue 52 item 6).
MALFORMED_BRACKETS = [
    "https://[2606:4700:4700::1111]x/",
    "https://[::ffff:1.1.1.1]x/",
    "http://[::1]]/x",
    "https://[2606:4700::1111]]/",
    "https://[2606:4700::1111]]:443/",
    "https://[2606:4700::1111]x:443/",
    "https://[2606:4700::1111]:443x/",
    "https://x[2606:4700::1111]/",
    "https://x.[2606:4700::1111]/",
    "https://[2606:4700::1111]..example/",
    "https://[2606:4700::1111] /",
    "https://[2606:4700::1111]\\x/",
    "https://[[2606:4700::1111]]/",
    "https://[2606:4700::1111]:443]/",
    "https://[v1.fe]/",  # IPvFuture: no address to reach
    "https://[2606:4700::1111%25eth0]/",  # a zone id
    "https://[2606:4700::1111%eth0]/",
    "https://[1.1.1.1]/",
    "https://[2606:4700::1111/",
    "https://2606:4700::1111]/",
]


@pytest.mark.regression
@pytest.mark.parametrize("url", MALFORMED_BRACKETS)
def test_brackets_that_are_not_the_whole_host_are_url_invalid(url: str) -> None:
    for allow_private in (False, True):
        found = destination(url, allow_private, resolver=lambda h, p: ["2606:4700::1111"])
        assert isinstance(found, Refused) and found.error == "url_invalid", (url, found)
        assert parse(url) == found.detail


@pytest.mark.parametrize(
    ("url", "host", "port", "netloc"),
    [
        ("https://[2606:4700::1111]/h", "2606:4700::1111", 443, "[2606:4700::1111]"),
        ("https://[2606:4700::1111]:8443/h", "2606:4700::1111", 8443, "[2606:4700::1111]:8443"),
        ("https://[2606:4700::1111]:/h", "2606:4700::1111", 443, "[2606:4700::1111]:"),
        ("https://[::FFFF:1.1.1.1]/h", "::ffff:1.1.1.1", 443, "[::FFFF:1.1.1.1]"),
        ("https://[2606:4700::1111]/a]b?q=[x]#[", "2606:4700::1111", 443, "[2606:4700::1111]"),
        ("https://h.example/[x]", "h.example", 443, "h.example"),
    ],
)
def test_a_bracketed_ipv6_host_with_a_port_or_none_is_read_whole(
    url: str, host: str, port: int, netloc: str
) -> None:
    found = parse(url)
    assert isinstance(found, Target), found
    assert (found.host, found.port, found.netloc) == (host, port, netloc)


@pytest.mark.regression
@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("::127.0.0.1", False),  # IPv4-compatible loopback
        ("::10.0.0.1", False),
        ("::ffff:10.0.0.1", False),  # IPv4-mapped
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of the metadata service
        ("64:ff9b::808:808", True),  # NAT64 of 8.8.8.8
        ("2002:7f00:1::1", False),  # 6to4 of 127.0.0.1
        ("2002:c0a8:101::1", False),  # 6to4 of 192.168.1.1
        ("2002:808:808::1", True),  # 6to4 of 8.8.8.8
        ("fec0::1", False),  # site-local
        ("fefe::1", False),
    ],
)
def test_an_ipv6_address_is_judged_by_the_ipv4_address_it_embeds(
    address: str, public: bool
) -> None:
    assert webhooks.address_allowed(address, allow_private=False) is public


@pytest.mark.regression
def test_a_refusal_never_says_what_a_name_resolved_to() -> None:
    found = destination(
        "https://inside.example/h", False, resolver=lambda h, p: ["93.184.216.34", "10.9.8.7"]
    )
    assert isinstance(found, Refused) and found.error == "address_refused"
    assert "10.9.8.7" not in found.detail and "93.184.216.34" not in found.detail
    assert "inside.example" in found.detail


@pytest.mark.regression
def test_a_delivery_names_the_product_as_its_user_agent() -> None:
    """It was httpx's ``python-httpx/...``."""
    from tests.support.receiver import Receiver

    receiver = Receiver()
    try:
        tried = deliver(receiver.url, b"{}", {"webhook-id": "msg_1"}, allow_private=True)
        assert tried.delivered
        [got] = receiver.wait_for(1)
    finally:
        receiver.close()
    assert got.headers["user-agent"].startswith("settleq-webhooks/")
