"""shared.domain.pipeline.messages: signed chunk messages re-verified by the workers
(docs/architecture.md#authenticity-and-least-privilege, docs/architecture.md#fast-path-validate)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.domain.pipeline.messages import COMPUTE_HEAVY, FAST_PATH, ChunkMessage, open_message
from shared.domain.signing import sign_message
from shared.errors import StructuralError

KEY = b"internal-signing-key"
MESSAGE = ChunkMessage(
    chunk_id="chunk-1", job_id="job-1", kind="promo_accrual", payload_sha256="ab" * 32
)


def _refused(raw: Any, key: bytes = KEY) -> StructuralError:
    with pytest.raises(StructuralError) as info:
        open_message(key, raw)
    assert info.value.reason == "signature_mismatch"
    return info.value


def test_queue_families_have_the_spec_names() -> None:
    assert FAST_PATH == "fast_path"
    assert COMPUTE_HEAVY == "compute_heavy"


def test_signed_message_carries_every_field_and_a_signature() -> None:
    raw = MESSAGE.signed(KEY)
    assert set(raw) == {"chunk_id", "job_id", "kind", "payload_sha256", "sig"}
    assert raw["chunk_id"] == "chunk-1"
    fields = {k: v for k, v in raw.items() if k != "sig"}
    assert raw["sig"] == sign_message(KEY, fields)


def test_signed_message_opens_back_to_the_same_message() -> None:
    assert open_message(KEY, MESSAGE.signed(KEY)) == MESSAGE


def test_message_survives_a_json_round_trip_through_the_broker() -> None:
    raw = json.loads(json.dumps(MESSAGE.signed(KEY)))
    assert open_message(KEY, raw) == MESSAGE


def test_signature_is_stable_for_the_same_message() -> None:
    assert MESSAGE.signed(KEY) == MESSAGE.signed(KEY)


@pytest.mark.parametrize("field", ["chunk_id", "job_id", "kind", "payload_sha256"])
def test_tampered_field_is_a_signature_mismatch(field: str) -> None:
    raw = MESSAGE.signed(KEY)
    raw[field] = raw[field] + "x"
    _refused(raw)


def test_tampered_signature_is_a_signature_mismatch() -> None:
    raw = MESSAGE.signed(KEY)
    raw["sig"] = "0" * 64
    _refused(raw)


def test_message_signed_with_another_key_is_a_signature_mismatch() -> None:
    _refused(MESSAGE.signed(b"some-other-key"))


def test_extra_field_is_a_signature_mismatch() -> None:
    raw = MESSAGE.signed(KEY)
    raw["priority"] = "high"
    _refused(raw)


@pytest.mark.parametrize("field", ["chunk_id", "job_id", "kind", "payload_sha256", "sig"])
def test_missing_field_is_a_signature_mismatch(field: str) -> None:
    raw = MESSAGE.signed(KEY)
    del raw[field]
    _refused(raw)


@pytest.mark.parametrize("field", ["chunk_id", "job_id", "kind", "payload_sha256", "sig"])
@pytest.mark.parametrize("value", [None, 1, ["x"], {"a": "b"}])
def test_wrong_field_type_is_a_signature_mismatch(field: str, value: Any) -> None:
    raw = MESSAGE.signed(KEY)
    raw[field] = value
    _refused(raw)


def test_field_of_the_wrong_type_with_a_matching_signature_is_still_refused() -> None:
    # A signature computed over the non-string field must not make it acceptable.
    fields: dict[str, Any] = {
        "chunk_id": 1,
        "job_id": "job-1",
        "kind": "promo_accrual",
        "payload_sha256": "ab",
    }
    _refused({**fields, "sig": sign_message(KEY, fields)})


@pytest.mark.parametrize("raw", [None, "string", 42, [MESSAGE.signed(KEY)], b"bytes"])
def test_non_object_message_is_a_signature_mismatch(raw: Any) -> None:
    _refused(raw)


def test_refusal_does_not_leak_the_key() -> None:
    raw = MESSAGE.signed(KEY)
    raw["job_id"] = "job-2"
    error = _refused(raw)
    assert KEY.decode() not in str(error)


def test_non_ascii_signature_is_a_signature_mismatch_not_a_crash() -> None:
    raw = MESSAGE.signed(KEY)
    raw["sig"] = "\u00e9" * 64
    _refused(raw)
