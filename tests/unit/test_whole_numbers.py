"""``1.0`` is an integer to JSON Schema, so a client generated from openapi.yaml
may send ``"contract_version": 1.0`` or ``"line_no": 2.0``: the front door takes
them, and the worker reads the bytes it stored (the fast path's envelope and the
settle decoder) as the same documents, never dead-lettering them; a fraction, a
string or a boolean is still refused (docs/api.md#submitting-a-batch)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.api.errors import ApiError
from services.api.intake.ingest import JSON, NDJSON, Ingest
from services.worker.decoding import ENVELOPES
from shared.config.settings import ProducerKey, Settings
from shared.domain.kinds import KINDS
from shared.domain.pipeline.settlement import decode_chunk, document_list

KEY = ProducerKey(key_id="k", secrets=["s" * 32], partitions=["*"])


def body(media: str, kind: str, document: dict[str, Any]) -> bytes:
    if media == JSON:
        return json.dumps({"kind": kind, "documents": [document]}).encode()
    return (json.dumps({"kind": kind}) + "\n" + json.dumps(document) + "\n").encode()


def documents(kind: str, version: Any, number: Any) -> dict[str, Any]:
    if kind == "promo_accrual":
        line = {"line_no": number, "sku": "S", "promo_tier": "T1"}
        line |= {"qualifying_units": "8", "claimed_amount": "1.00"}
        extra: dict[str, Any] = {"period": "2026-Q3", "lines": [line]}
    else:
        extra = {"document_type": "PDF", "legs": [{"leg_no": number, "billed_amount": "10"}]}
    return {"document_id": "D", "partition_key": "V", "contract_version": version, **extra}


def ingest(media: str, data: bytes) -> Any:
    door = Ingest(Settings(), KEY, media)
    door.feed(data)
    return door.finish()


@pytest.mark.parametrize("media", [JSON, NDJSON])
@pytest.mark.parametrize("kind", ["promo_accrual", "freight_audit"])
def test_a_whole_number_written_as_a_float_is_accepted_and_read_back_by_the_worker(
    media: str, kind: str
) -> None:
    accepted = ingest(media, body(media, kind, documents(kind, 1.0, 2.0)))
    [chunk] = accepted.chunks
    [envelope] = ENVELOPES.decode(chunk.payload)  # the fast path's reading
    assert envelope.contract_version == 1
    decoded = decode_chunk(KINDS[kind], document_list(KINDS[kind]), chunk.payload, chunk.lines)
    assert not decoded.failures
    [document] = decoded.documents
    assert document.contract_version == 1
    [line] = KINDS[kind].lines(document)
    assert line.line_ref == "2"  # the same key as the document written with 2


@pytest.mark.parametrize("media", [JSON, NDJSON])
@pytest.mark.parametrize(("version", "number"), [(1.5, 1), ("1", 1), (True, 1), (1, 2.5)])
def test_a_fraction_a_string_or_a_boolean_is_still_refused(
    media: str, version: Any, number: Any
) -> None:
    kind = "promo_accrual"
    with pytest.raises(ApiError) as refused:
        ingest(media, body(media, kind, documents(kind, version, number)))
    assert refused.value.status == 422
