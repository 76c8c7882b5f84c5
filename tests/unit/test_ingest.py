"""services.api.intake.ingest: an NDJSON body gives the same batch (or the same error)
however its parts fall, through the screen's per-part fast path or per line."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from services.api.errors import ApiError, validation_error
from services.api.intake import ingest as ingest_module
from services.api.intake.ingest import JSON, NDJSON, Ingest, Ingested
from shared.config.settings import ProducerKey, Settings
from shared.domain.kinds import BATCH
from shared.domain.kinds.promo_accrual import PromoDocument
from tests.support.workload import generate

SETTINGS = Settings(database_url="sqlite://", max_chunk_documents=7, max_chunk_lines=100)
KEY = ProducerKey(key_id="k", secrets=["s"], partitions=["*"])


def _documents() -> list[dict[str, Any]]:
    documents = generate(600, 4, lines_per_doc=5).documents
    # Valid ones the screen leaves to the model (an escape makes its part
    # unclean; an exponent), and ones in raw UTF-8 it takes (C2 A1 starts
    # like a C1 control but is not one).
    documents[3]["lines"][0]["sku"] = "SKU-\\1"
    documents[17]["lines"][2]["claimed_amount"] = "1.5E0"
    documents[40]["period"] = "Q3\u00e9"
    documents[50]["lines"][1]["sku"] = "\u00a1Ol\u00e9"
    return documents


DOCUMENTS = _documents()
LINES = [json.dumps(d, ensure_ascii=n not in (40, 50)).encode() for n, d in enumerate(DOCUMENTS)]
BODY = b'{"kind": "promo_accrual"}\r\n' + b"\n".join(
    line + (b"\r\n\n  " if n % 9 == 0 else b"") for n, line in enumerate(LINES)
)


def _ingest(body: bytes, cuts: list[int]) -> Ingested | ApiError:
    ingest = Ingest(SETTINGS, KEY, NDJSON)
    bounds = [0, *sorted(set(cuts)), len(body)]
    ingest.feed_parts(
        [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a], lambda _: None
    )
    try:
        return ingest.finish()
    except ApiError as exc:
        return exc


def _cuts(body: bytes) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(1, len(body) - 1), max_size=12)


@settings(max_examples=60, deadline=None)
@given(_cuts(BODY))
def test_parts_do_not_change_the_batch(cuts: list[int]) -> None:
    batch = _ingest(BODY, cuts)
    assert isinstance(batch, Ingested)
    # Every document stored as the producer's own bytes, in order, whole.
    stored = [json.loads(c.payload) for c in batch.chunks]
    assert [d for chunk in stored for d in chunk] == json.loads(b"[" + b",".join(LINES) + b"]")
    assert b"".join(c.payload for c in batch.chunks) == b"".join(
        b"[" + b",".join(LINES[i : i + 7]) + b"]" for i in range(0, len(LINES), 7)
    )
    assert (batch.documents, batch.lines) == (len(DOCUMENTS), 5 * len(DOCUMENTS))
    assert batch.partitions == {d["partition_key"] for d in DOCUMENTS}
    assert [(c.documents, c.lines) for c in batch.chunks][0] == (7, 35)


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("claimed_amount", 1.5, "decimal_must_be_string"),
        ("qualifying_units", "1e99", "decimal_out_of_range"),
        ("sku", "a|b", "string_pattern_mismatch"),
    ],
)
@settings(max_examples=15, deadline=None)
@given(cuts=st.lists(st.integers(1, 10_000), max_size=8), where=st.integers(0, 119))
def test_parts_do_not_change_the_error(
    field: str, value: Any, code: str, cuts: list[int], where: int
) -> None:
    documents = json.loads(json.dumps(DOCUMENTS[:120]))
    documents[where]["lines"][1][field] = value
    body = b'{"kind": "promo_accrual"}\n' + b"\n".join(json.dumps(d).encode() for d in documents)
    error = _ingest(body, [c % len(body) for c in cuts if c % len(body)])
    assert isinstance(error, ApiError)
    assert (error.status, error.code) == (422, code)
    assert error.details[0]["loc"] == [f"line {where + 2}", "lines", "1", field]


def test_a_large_body_hashed_apart_gives_the_same_digest_and_mac_input() -> None:
    documents = generate(30_000, 4, lines_per_doc=5).documents
    body = b'{"kind": "promo_accrual"}\n' + b"\n".join(json.dumps(d).encode() for d in documents)
    parts = [body[i : i + 65536] for i in range(0, len(body), 65536)]
    assert len(body) > 3 * 1024 * 1024  # several batches of 16 parts, each hashed apart
    at_once = Ingest(SETTINGS, KEY, NDJSON)
    at_once.feed(body)
    signed: list[bytes] = []
    apart = Ingest(SETTINGS, KEY, NDJSON)
    for start in range(0, len(parts), 16):
        apart.feed_parts(parts[start : start + 16], signed.append)
    one, other = at_once.finish(), apart.finish()
    assert b"".join(signed) == body
    assert one.body_sha256 == other.body_sha256 == hashlib.sha256(body).hexdigest()
    assert [c.payload for c in one.chunks] == [c.payload for c in other.chunks]
    assert (one.documents, one.lines) == (other.documents, other.lines) == (6000, 30_000)


@pytest.mark.regression(
    reason="was a BUG (issue 12 item 5): a document holding line_no 1 twice was accepted"
)
@settings(max_examples=15, deadline=None)
@given(cuts=st.lists(st.integers(1, 10_000), max_size=8), where=st.integers(0, 119))
def test_a_repeated_line_no_is_duplicate_line_however_the_parts_fall(
    cuts: list[int], where: int
) -> None:
    documents = json.loads(json.dumps(DOCUMENTS[:120]))
    documents[where]["lines"][3]["line_no"] = documents[where]["lines"][1]["line_no"]
    body = b'{"kind": "promo_accrual"}\n' + b"\n".join(json.dumps(d).encode() for d in documents)
    error = _ingest(body, [c % len(body) for c in cuts if c % len(body)])
    assert isinstance(error, ApiError)
    assert (error.status, error.code) == (422, "duplicate_line")
    (detail,) = error.details
    assert detail["loc"] == [f"line {where + 2}", "lines", "3", "line_no"]
    assert detail["document_id"] == documents[where]["document_id"]
    assert detail["value"] == str(documents[where]["lines"][1]["line_no"])
    assert documents[where]["document_id"] in error.message


@pytest.mark.regression
def test_an_unknown_kind_in_the_ndjson_header_lists_the_kinds() -> None:
    # Before (issue 29 item 16): 'the first NDJSON line must be {"kind": "<kind>"}', no list.
    refused = _ingest(b'{"kind": "promo"}\n{}\n', [])
    assert isinstance(refused, ApiError) and refused.code == "unknown_kind"
    assert refused.message.endswith("one of: promo_accrual, recipe_cost, freight_audit")


@pytest.mark.regression
def test_an_ndjson_line_that_is_not_json_is_named_by_its_line_in_the_body() -> None:
    # Before (issue 29 item 9): "... at line 1 column 2", the parser's one-line text.
    refused = _ingest(BODY.split(b"\n")[0] + b"\n" + LINES[0] + b"\n{x\n", [])
    assert isinstance(refused, ApiError) and refused.code == "json_invalid"
    assert refused.message.startswith("line 3: ") and "line 1" not in refused.message
    assert refused.details[0]["loc"][0] == "line 3" and "at column 2" in refused.details[0]["msg"]


def _json_ingest(body: bytes) -> Ingested | ApiError:
    ingest = Ingest(SETTINGS, KEY, JSON)
    ingest.feed_parts([body], lambda _: None)
    try:
        return ingest.finish()
    except ApiError as exc:
        return exc


def test_a_json_body_reads_each_document_once_and_stores_it_as_sent(monkeypatch) -> None:
    """No pass over the whole tree by the batch's model, and none writing the
    documents back out: each is screened (or, where the screen leaves it, read
    by its model) once, and its own bytes are what the chunk holds."""
    documents = DOCUMENTS[:60]
    # Spaced as a producer may space them; 40 and 50 in raw UTF-8, as LINES.
    raw = [
        json.dumps(d, indent=1, ensure_ascii=n not in (40, 50)).encode()
        for n, d in enumerate(documents)
    ]
    body = b'{"kind": "promo_accrual",\n "documents": [' + b" ,\n ".join(raw) + b"]}"
    batch_reads: list[bytes] = []
    model_reads: list[bytes] = []

    class CountingBatch:
        def validate_json(self, data: bytes) -> Any:
            batch_reads.append(data)
            return BATCH.validate_json(data)

    model = PromoDocument.model_validate_json
    monkeypatch.setattr(ingest_module, "BATCH", CountingBatch())
    monkeypatch.setattr(
        PromoDocument,
        "model_validate_json",
        lambda data, **kw: model_reads.append(data) or model(data, **kw),
    )
    batch = _json_ingest(body)
    assert isinstance(batch, Ingested)
    assert batch_reads == []
    assert model_reads == [raw[3], raw[17]]  # the two the screen leaves to the model
    assert b"".join(c.payload for c in batch.chunks) == b"".join(
        b"[" + b",".join(raw[i : i + 7]) + b"]" for i in range(0, len(raw), 7)
    )
    assert (batch.documents, batch.lines) == (60, 300)
    assert batch.partitions == {d["partition_key"] for d in documents}


def _bad_json_bodies() -> list[Any]:
    docs = [json.dumps(d).encode() for d in DOCUMENTS[:20]]
    bad = json.loads(json.dumps(DOCUMENTS[9]))
    bad["lines"][1]["claimed_amount"] = 1.5
    bad["extra"] = 1
    wrapped = b",".join([*docs[:9], json.dumps(bad).encode(), *docs[10:]])
    good = b'{"kind": "promo_accrual", "documents": [' + b",".join(docs) + b"]}"
    return [
        pytest.param(b'{"kind": "promo_accrual", "documents": [' + wrapped + b"]}", id="bad-doc"),
        pytest.param(good[:-1] + b', "note": 1}', id="extra-field"),
        pytest.param(b'{"kind": "promo_accrual", "documents": []}', id="no-documents"),
        pytest.param(b'{"kind": "promo", "documents": [' + docs[0] + b"]}", id="unknown-kind"),
        pytest.param(b'{"documents": [' + docs[0] + b"]}", id="no-kind"),
        pytest.param(good + b"}", id="trailing"),
        pytest.param(good.replace(b'"promo_accrual"', b'"recipe_cost"'), id="other-kind"),
        pytest.param(b'{"kind": "promo_accrual", "documents": [null, 7]}', id="not-objects"),
        pytest.param(good[:-2] + b',"\xff"]}', id="invalid-utf8"),
        pytest.param(b"[" + good + b"]", id="not-an-object"),
    ]


@pytest.mark.parametrize("body", _bad_json_bodies())
def test_a_refused_json_body_has_the_batch_models_own_answer(body: bytes) -> None:
    refused = _json_ingest(body)
    assert isinstance(refused, ApiError)
    with pytest.raises(ValidationError) as model:
        BATCH.validate_json(body)
    expected = validation_error(list(model.value.errors()))
    assert (refused.status, refused.code, refused.message, refused.details) == (
        422,
        expected.code,
        expected.message,
        expected.details,
    )


def test_a_json_body_with_a_repeated_line_no_is_duplicate_line_at_its_document() -> None:
    documents = json.loads(json.dumps(DOCUMENTS[:30]))
    documents[12]["lines"][3]["line_no"] = documents[12]["lines"][1]["line_no"]
    refused = _json_ingest(json.dumps({"kind": "promo_accrual", "documents": documents}).encode())
    assert isinstance(refused, ApiError) and refused.code == "duplicate_line"
    assert refused.details[0]["loc"] == ["documents", "12", "lines", "3", "line_no"]
