"""A ``partition_key`` and a ``document_id`` follow one rule at every door
(docs/api.md#document-shapes, issue 29 item 6): 1-128 characters, no ``/``, no
control, format or surrogate character, no leading or trailing whitespace
(and, as for every id, no ``|``; nor ``.`` or ``..``, which a URL cannot hold
as a path segment). What the rule accepts a JSON body, an NDJSON line and an
X12 file may carry; what it refuses each refuses: 422 ``partition_key_invalid``
(``document_id_invalid``) where the field is named, the NDJSON line given;
``edi_unmappable`` at the X12 segment and element that hold it.

The oracle here is the documented rule, written out independently of the code.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from services.api.errors import ApiError
from services.api.intake.ingest import JSON, NDJSON, Ingest, Ingested
from shared.config.settings import ProducerKey, Settings
from shared.domain.kinds import KINDS
from shared.domain.kinds.ids import PartitionKey, address_problem
from shared.domain.kinds.promo_accrual import PromoDocument
from shared.domain.kinds.screen import screen
from shared.domain.x12.mapping.files import map_file
from shared.domain.x12.model import EdiRefused
from shared.domain.x12.reading.reader import read_file
from tests.unit.x12.build import freight, invoice, x12

SETTINGS = Settings(database_url="sqlite://")
KEY = ProducerKey(key_id="k", secrets=["s"], partitions=["*"])
PROMO = KINDS["promo_accrual"]
FIELDS = {"partition_key": "partition_key_invalid", "document_id": "document_id_invalid"}


def spec_allows(value: str) -> bool:
    """docs/api.md#partition-keys-and-document-ids: the product's sentence, with the
    two characters every id already refuses and the two path segments no URL keeps."""
    return (
        1 <= len(value) <= 128
        and "/" not in value
        and "|" not in value
        and value not in (".", "..")
        and not any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in value)
        and not value[0].isspace()
        and not value[-1].isspace()
    )


# Text that is often at an edge of the rule: its characters, and ordinary ones.
EDGES = "/|. \t\u00a0\u2028\u3000\u200b\u200e\u202e\u2060\ufeff\u00ad\x00\x1f\x7f\x85\x9f"
ORDINARY = "AZaz09-_:#%?&+=@~\u00e9\u0416\u4e2d\U0001f4b8"
ids = st.one_of(
    st.text(alphabet=st.sampled_from(EDGES + ORDINARY), max_size=12),
    st.text(max_size=140),
    st.text(alphabet=st.sampled_from(ORDINARY), min_size=120, max_size=135),
)
EXAMPLES = ["A/B", " V", "V ", "V\u00a0", "V\u200bX", "\ufeffV", ".", "..", "...", "", "I" * 129]


def _doc(**over: str) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "document_id": "INV-1",
        "partition_key": "VENDOR-1",
        "contract_version": 1,
        "period": "2026-Q3",
        "lines": [
            {
                "line_no": 1,
                "sku": "SKU-1",
                "promo_tier": "T1",
                "qualifying_units": "8",
                "claimed_amount": "1.00",
            }
        ],
    }
    doc.update(over)
    return doc


def _ingest(media: str, body: bytes) -> Ingested | ApiError:
    ingest = Ingest(SETTINGS, KEY, media)
    ingest.feed(body)
    try:
        return ingest.finish()
    except ApiError as exc:
        return exc


@settings(max_examples=400, deadline=None)
@given(value=ids)
@example(value="A/B")
def test_the_rule_is_the_spec(value: str) -> None:
    assert (address_problem(value) is None) == spec_allows(value)


@pytest.mark.regression
@settings(max_examples=200, deadline=None)
@given(value=ids)
@example(value="A/B")
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_json_body_takes_what_the_rule_allows_and_names_what_it_refuses(
    field: str, value: str
) -> None:
    # Both spellings of the same text: raw UTF-8 (the screen's fast path) and \u escapes.
    for ascii_only in (False, True):
        body = json.dumps(
            {"kind": "promo_accrual", "documents": [_doc(), _doc(**{field: value})]},
            ensure_ascii=ascii_only,
        ).encode("utf-8", "surrogatepass")
        answer = _ingest(JSON, body)
        if spec_allows(value):
            assert isinstance(answer, Ingested), answer
            continue
        assert isinstance(answer, ApiError)
        assert (answer.status, answer.code) == (422, FIELDS[field]), answer.details
        assert answer.details[0]["loc"] == ["documents", "1", field]


@pytest.mark.regression
@settings(max_examples=200, deadline=None)
@given(value=ids)
@example(value="A/B")
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_an_ndjson_line_is_refused_with_its_line_number(field: str, value: str) -> None:
    lines = [{"kind": "promo_accrual"}, _doc(), _doc(document_id="INV-2"), _doc(**{field: value})]
    for ascii_only in (False, True):
        body = b"\n".join(
            json.dumps(line, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
            for line in lines
        )
        answer = _ingest(NDJSON, body)
        if spec_allows(value):
            assert isinstance(answer, Ingested), answer
            continue
        assert isinstance(answer, ApiError)
        assert (answer.status, answer.code) == (422, FIELDS[field]), answer.details
        assert answer.details[0]["loc"] == ["line 4", field]


@settings(max_examples=200, deadline=None)
@given(value=ids)
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_the_screen_is_never_more_lenient_than_the_model(field: str, value: str) -> None:
    raw = json.dumps(_doc(**{field: value}), ensure_ascii=False).encode("utf-8", "surrogatepass")
    screened = screen(PROMO.screen, raw)
    try:
        PromoDocument.model_validate_json(raw)
    except ValidationError:
        assert screened is None
    if screened is not None:
        assert spec_allows(value)


# X12 elements: no delimiter of the files built here (* ~ > and line breaks), no
# control character (a file's text, not a payload).
X12_ALPHABET = [c for c in EDGES + ORDINARY if c not in "*~>" and unicodedata.category(c) != "Cc"]
x12_text = st.text(alphabet=st.sampled_from(X12_ALPHABET), min_size=1, max_size=12)


def _mapped_or_refused(data: bytes) -> list[dict[str, Any]] | EdiRefused:
    try:
        mapped = map_file(read_file(data), contract_version=1, partition_key=None, period=None)
    except EdiRefused as refused:
        return refused
    return mapped.documents


def _problems(answer: Any) -> list[tuple[str, str | None, int | None]]:
    assert isinstance(answer, EdiRefused), answer
    return [(p.code, p.tag, p.element) for p in answer.problems]


@pytest.mark.regression
@settings(max_examples=150, deadline=None)
@given(value=x12_text)
@example(value="A/B")
def test_an_x12_210_names_the_b3_element_of_an_id_the_rule_refuses(value: str) -> None:
    b3 = freight()[0]
    scac = b3.replace("*SCAC*", f"*{value}*")
    answer = _mapped_or_refused(x12([("210", "1", freight(B3=scac))]))
    if spec_allows(value.strip().upper()):
        assert [d["partition_key"] for d in answer] == [value.strip().upper()]  # type: ignore[union-attr]
    else:
        assert _problems(answer) == [("edi_unmappable", "B3", 11)]
    invoice_no = b3.replace("*INV-1*", f"*{value}*")
    answer = _mapped_or_refused(x12([("210", "1", freight(B3=invoice_no))]))
    if spec_allows(value.strip()):
        assert [d["document_id"] for d in answer] == [value.strip()]  # type: ignore[union-attr]
    else:
        assert _problems(answer) == [("edi_unmappable", "B3", 2)]


@pytest.mark.regression
@settings(max_examples=150, deadline=None)
@given(value=x12_text)
@example(value="A/B")
def test_an_x12_810_names_the_element_of_an_id_the_rule_refuses(value: str) -> None:
    answer = _mapped_or_refused(x12([("810", "1", invoice(REF=f"REF*IA*{value}"))]))
    if spec_allows(value.strip()):
        assert [d["partition_key"] for d in answer] == [value.strip()]  # type: ignore[union-attr]
    elif not value.strip():  # a blank REF names no vendor (and this 810 has no other)
        assert _problems(answer) == [("edi_unmappable", "ST", None)]
    else:
        assert _problems(answer) == [("edi_unmappable", "REF", 2)]
    big = f"BIG*20050205*{value}*20050202*3376103367"
    answer = _mapped_or_refused(x12([("810", "1", invoice(BIG=big))]))
    if spec_allows(value.strip()):
        assert [d["document_id"] for d in answer] == [value.strip()]  # type: ignore[union-attr]
    else:
        assert _problems(answer) == [("edi_unmappable", "BIG", 2)]


@settings(max_examples=400, deadline=None)
@given(value=ids)
@example(value="A/B")
def test_the_published_pattern_is_the_rule(value: str) -> None:
    """openapi.yaml's pattern (with its lengths) refuses what the server refuses."""
    schema = TypeAdapter(PartitionKey).json_schema()
    fits = schema["minLength"] <= len(value) <= schema["maxLength"]
    matches = re.fullmatch(schema["pattern"], value) is not None
    assert (fits and matches) == spec_allows(value)
