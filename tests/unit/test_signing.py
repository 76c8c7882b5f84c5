"""shared.domain.signing: producer HMAC (docs/api.md#producer-signatures), internal messages and
bearer tokens."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from shared.domain.signing import (
    ParsedSignature,
    SignatureError,
    parse_signature_header,
    sign_message,
    sign_request,
    signing_payload,
    token_digest,
    token_matches,
    verify_message,
    verify_request,
)

T = 1767225600  # the SPEC's example timestamp
SECRET = "s3cret-current"
OLD_SECRET = "s3cret-previous"
PATH = "/v1/batches"


def _hmac_hex(secret: str, payload: bytes) -> str:
    return hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


def _verify(header: str | None, secrets: list[str] | None = None, **kw: object) -> None:
    args: dict[str, object] = {
        "method": "POST",
        "path_and_query": PATH,
        "body": b"{}",
        "now": T,
        "tolerance_s": 300,
    }
    args.update(kw)
    verify_request(header, secrets if secrets is not None else [SECRET], **args)  # type: ignore[arg-type]


def _code(header: str | None, secrets: list[str] | None = None, **kw: object) -> str:
    with pytest.raises(SignatureError) as info:
        _verify(header, secrets, **kw)
    return info.value.code


# --- the signed bytes --------------------------------------------------------------------


def test_spec_example_signs_timestamp_method_path_and_body_joined_by_dots() -> None:
    assert signing_payload(T, "POST", "/v1/batches", b"{}") == b"1767225600.POST./v1/batches.{}"


def test_method_is_upper_cased_in_the_signed_bytes() -> None:
    assert signing_payload(T, "post", "/v1/batches", b"{}") == b"1767225600.POST./v1/batches.{}"


def test_body_bytes_are_appended_raw() -> None:
    body = b'{"a":"\xc3\xa9"}\n'
    assert signing_payload(T, "POST", "/x?y=1", body) == b"1767225600.POST./x?y=1." + body


def test_sign_request_header_carries_timestamp_and_hmac_of_the_spec_bytes() -> None:
    header = sign_request(SECRET, T, "POST", "/v1/batches", b"{}")
    expected = _hmac_hex(SECRET, b"1767225600.POST./v1/batches.{}")
    assert header == f"t=1767225600,v1={expected}"


# --- header parsing -----------------------------------------------------------------------


def test_header_with_several_v1_values_parses_all_of_them() -> None:
    first, second = "AB" * 32, "cd" * 32
    parsed = parse_signature_header(f"t=1767225600, v1={first} ,v1={second},v0=ignored")
    assert parsed == ParsedSignature(T, ("ab" * 32, second))


def test_malformed_v1_values_are_not_compared() -> None:
    with pytest.raises(SignatureError) as err:
        parse_signature_header("t=1767225600,v1=abcd")
    assert err.value.code == "signature_invalid"


@pytest.mark.parametrize(
    "header",
    [
        "garbage",
        "t=1767225600",
        "v1=abcd",
        "t=,v1=abcd",
        "t=-5,v1=abcd",
        "t=12.5,v1=abcd",
        "t=1234567890123,v1=abcd",  # 13 digits
        "t=1767225600,v1",
    ],
)
def test_malformed_header_is_signature_invalid(header: str) -> None:
    with pytest.raises(SignatureError) as info:
        parse_signature_header(header)
    assert info.value.code == "signature_invalid"


def test_superscript_digit_timestamp_is_signature_invalid_not_a_crash() -> None:
    assert _code("t=\u00b2,v1=abcd") == "signature_invalid"


# --- verify_request ------------------------------------------------------------------------


def test_correct_signature_is_accepted() -> None:
    _verify(sign_request(SECRET, T, "POST", PATH, b"{}"))


def test_signature_made_with_lower_case_method_is_accepted() -> None:
    _verify(sign_request(SECRET, T, "post", PATH, b"{}"), method="POST")


def test_upper_case_hex_signature_is_accepted() -> None:
    good = _hmac_hex(SECRET, signing_payload(T, "POST", PATH, b"{}"))
    _verify(f"t={T},v1={good.upper()}")


def test_one_matching_v1_among_several_is_enough() -> None:
    good = _hmac_hex(SECRET, signing_payload(T, "POST", PATH, b"{}"))
    _verify(f"t={T},v1={'0' * 64},v1={good},v1=zz")


@pytest.mark.parametrize("header", [None, ""])
def test_missing_signature_is_signature_missing(header: str | None) -> None:
    assert _code(header) == "signature_missing"


def test_wrong_secret_is_signature_invalid() -> None:
    assert _code(sign_request("not-the-secret", T, "POST", PATH, b"{}")) == "signature_invalid"


def test_tampered_body_is_signature_invalid() -> None:
    header = sign_request(SECRET, T, "POST", PATH, b"{}")
    assert _code(header, body=b'{"x":1}') == "signature_invalid"


def test_signature_cannot_be_replayed_on_another_endpoint_or_method() -> None:
    header = sign_request(SECRET, T, "POST", PATH, b"{}")
    assert _code(header, path_and_query="/v1/jobs") == "signature_invalid"
    assert _code(header, path_and_query="/v1/batches?x=1") == "signature_invalid"
    assert _code(header, method="PUT") == "signature_invalid"


def test_timestamp_cannot_be_swapped_without_re_signing() -> None:
    header = sign_request(SECRET, T, "POST", PATH, b"{}")
    forged = header.replace(f"t={T}", f"t={T + 1}")
    assert _code(forged) == "signature_invalid"


def test_no_active_secret_refuses_everything() -> None:
    assert _code(sign_request(SECRET, T, "POST", PATH, b"{}"), secrets=[]) == "signature_invalid"


@pytest.mark.parametrize("skew", [-300, 0, 300])
def test_timestamp_within_tolerance_including_the_boundary_is_accepted(skew: int) -> None:
    _verify(sign_request(SECRET, T, "POST", PATH, b"{}"), now=T + skew)


@pytest.mark.parametrize("skew", [-301, 301, 86_400])
def test_stale_or_future_timestamp_is_outside_tolerance(skew: int) -> None:
    header = sign_request(SECRET, T, "POST", PATH, b"{}")
    assert _code(header, now=T + skew) == "timestamp_outside_tolerance"


def test_rotation_accepts_either_of_two_active_secrets() -> None:
    secrets = [SECRET, OLD_SECRET]
    _verify(sign_request(SECRET, T, "POST", PATH, b"{}"), secrets=secrets)
    _verify(sign_request(OLD_SECRET, T, "POST", PATH, b"{}"), secrets=secrets)
    assert _code(sign_request("retired", T, "POST", PATH, b"{}"), secrets=secrets) == (
        "signature_invalid"
    )


def test_after_rotation_the_retired_secret_is_refused() -> None:
    header = sign_request(OLD_SECRET, T, "POST", PATH, b"{}")
    assert _code(header, secrets=[SECRET]) == "signature_invalid"


def test_error_messages_never_contain_the_secret() -> None:
    for header, now in [
        (sign_request("wrong", T, "POST", PATH, b"{}"), T),
        (sign_request(SECRET, T, "POST", PATH, b"{}"), T + 10_000),
        ("t=1", T),
    ]:
        with pytest.raises(SignatureError) as info:
            _verify(header, now=now)
        assert SECRET not in str(info.value)
        assert _hmac_hex(SECRET, signing_payload(T, "POST", PATH, b"{}")) not in str(info.value)


def test_non_ascii_signature_value_is_signature_invalid_not_a_crash() -> None:
    assert _code(f"t={T},v1=\u00e9") == "signature_invalid"


# --- internal message signing -------------------------------------------------------------

KEY = b"internal-key"


def test_message_signature_is_hmac_over_canonical_sorted_compact_json() -> None:
    fields = {"b": "2", "a": "1"}
    expected = hmac.new(KEY, b'{"a":"1","b":"2"}', hashlib.sha256).hexdigest()
    assert sign_message(KEY, fields) == expected


def test_message_signature_does_not_depend_on_key_order() -> None:
    assert sign_message(KEY, {"a": "1", "b": "2"}) == sign_message(KEY, {"b": "2", "a": "1"})


def test_verify_message_accepts_its_own_signature() -> None:
    fields = {"chunk_id": "c1", "job_id": "j1"}
    assert verify_message(KEY, fields, sign_message(KEY, fields))


def test_verify_message_refuses_a_changed_field_or_another_key() -> None:
    fields = {"chunk_id": "c1", "job_id": "j1"}
    sig = sign_message(KEY, fields)
    assert not verify_message(KEY, {**fields, "job_id": "j2"}, sig)
    assert not verify_message(b"other-key", fields, sig)
    assert not verify_message(KEY, fields, "0" * 64)


# --- bearer tokens -------------------------------------------------------------------------


def test_token_digest_is_lower_case_sha256_hex() -> None:
    assert token_digest("viewer-token") == hashlib.sha256(b"viewer-token").hexdigest()


def test_token_matches_a_configured_digest() -> None:
    digests = [token_digest("a"), token_digest("viewer-token")]
    assert token_matches("viewer-token", digests)


def test_token_matching_tolerates_upper_case_and_padded_configuration() -> None:
    assert token_matches("viewer-token", [f"  {token_digest('viewer-token').upper()} "])


def test_unknown_token_or_empty_configuration_does_not_match() -> None:
    assert not token_matches("intruder", [token_digest("viewer-token")])
    assert not token_matches("viewer-token", [])


def test_the_clear_token_itself_is_not_a_valid_digest() -> None:
    assert not token_matches("viewer-token", ["viewer-token"])
