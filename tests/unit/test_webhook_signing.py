"""Webhook secrets, signatures, verification, the retry schedule and the
address rule (shared/domain/webhooks.py, docs/api.md#webhooks)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import time

import pytest

from shared.domain import webhooks

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
BODY = b'{"type":"ping","id":"msg_1","created_at":"2026-12-04T00:00:00Z","data":{}}'
NOW = 1_764_806_400


def test_a_secret_is_whsec_and_32_random_bytes() -> None:
    made = {webhooks.new_secret() for _ in range(50)}
    assert len(made) == 50
    for secret in made:
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret[6:], validate=True)) == 32


def test_the_signature_is_hmac_sha256_of_id_timestamp_and_body() -> None:
    expected = hmac.new(b"k" * 32, b"msg_1.%d." % NOW + BODY, hashlib.sha256).digest()
    assert webhooks.signature(SECRET, "msg_1", NOW, BODY) == (
        "v1," + base64.b64encode(expected).decode()
    )


def test_a_receiver_verifies_what_was_signed_and_nothing_else() -> None:
    headers = webhooks.headers([SECRET], "msg_1", NOW, BODY)
    assert webhooks.verify(SECRET, headers, BODY, NOW + 10).ok
    # Header names in any case, as HTTP has them.
    assert webhooks.verify(SECRET, {k.title(): v for k, v in headers.items()}, BODY, NOW).ok
    for changed, why in [
        ({"webhook-id": "msg_2"}, "no signature matches"),
        ({"webhook-timestamp": str(NOW + 1)}, "no signature matches"),
        ({"webhook-timestamp": "12.5"}, "not whole seconds"),
        ({"webhook-signature": "v2,abc"}, "no v1 signature"),
    ]:
        verdict = webhooks.verify(SECRET, {**headers, **changed}, BODY, NOW)
        assert not verdict.ok and why in verdict.why, (changed, verdict)
    assert "no signature matches" in webhooks.verify(SECRET, headers, BODY + b" ", NOW).why
    other = "whsec_" + base64.b64encode(b"x" * 32).decode()
    assert not webhooks.verify(other, headers, BODY, NOW).ok
    missing = {k: v for k, v in headers.items() if k != "webhook-timestamp"}
    assert webhooks.verify(SECRET, missing, BODY, NOW).why == "missing header: webhook-timestamp"


def test_an_old_or_future_timestamp_is_refused_as_a_replay_or_a_forgery() -> None:
    headers = webhooks.headers([SECRET], "msg_1", NOW, BODY)
    assert webhooks.verify(SECRET, headers, BODY, NOW + 300).ok
    assert "too old" in webhooks.verify(SECRET, headers, BODY, NOW + 301).why
    assert "in the future" in webhooks.verify(SECRET, headers, BODY, NOW - 301).why


def test_a_rotated_secret_and_its_successor_both_sign_during_the_grace() -> None:
    new = webhooks.new_secret()
    headers = webhooks.headers([new, SECRET], "msg_1", NOW, BODY)
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert webhooks.verify(SECRET, headers, BODY, NOW).ok
    assert webhooks.verify(new, headers, BODY, NOW).ok


@pytest.mark.parametrize("secret", ["sk_abc", "whsec_", "whsec_not*base64"])
def test_a_secret_that_is_not_one_is_said_so(secret: str) -> None:
    headers = webhooks.headers([SECRET], "msg_1", NOW, BODY)
    verdict = webhooks.verify(secret, headers, BODY, NOW)
    assert not verdict.ok and "webhook secret" in verdict.why
    with pytest.raises(webhooks.BadSecret):
        webhooks.signature(secret, "msg_1", NOW, BODY)


def test_the_retry_schedule_backs_off_with_jitter_then_every_12_hours() -> None:
    assert [round(webhooks.next_wait_s(n, 0.5)) for n in range(1, 8)] == [
        5,
        60,
        600,
        3600,
        21600,
        43200,
        43200,
    ]
    assert webhooks.next_wait_s(1, 0.0) == pytest.approx(4.0)
    assert webhooks.next_wait_s(1, 0.999999) == pytest.approx(6.0, rel=1e-5)
    assert not webhooks.gives_up(0, 3 * 24 * 3600 - 1)
    assert webhooks.gives_up(0, 3 * 24 * 3600)


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("::1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # the cloud metadata service
        ("100.64.0.1", False),  # carrier-grade NAT
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("fd00::1", False),
        ("fe80::1", False),
        ("::ffff:127.0.0.1", False),  # IPv4-mapped loopback
    ],
)
def test_only_public_addresses_are_reached_unless_private_ones_are_allowed(
    address: str, public: bool
) -> None:
    assert webhooks.address_allowed(address, allow_private=False) is public
    if address not in ("0.0.0.0", "224.0.0.1"):
        assert webhooks.address_allowed(address, allow_private=True)


def test_the_reference_verifier_accepts_our_signatures_and_refuses_a_changed_body() -> None:
    """Standard Webhooks' own Python verifier (the ``standardwebhooks`` package,
    tests only: settleq signs with its own code)."""
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    now = int(time.time())
    for signing in ([SECRET], [webhooks.new_secret(), SECRET]):  # one secret, or a rotation's two
        headers = webhooks.headers(signing, "msg_42", now, BODY)
        assert Webhook(SECRET).verify(BODY, headers) == json.loads(BODY)
        with pytest.raises(WebhookVerificationError):
            Webhook(SECRET).verify(BODY.replace(b"ping", b"pong"), headers)
    # And ours accepts what it signs.
    signed = Webhook(SECRET).sign("msg_43", dt.datetime.fromtimestamp(now, dt.UTC), BODY.decode())
    theirs = {"webhook-id": "msg_43", "webhook-timestamp": str(now), "webhook-signature": signed}
    assert webhooks.verify(SECRET, theirs, BODY, now).ok
