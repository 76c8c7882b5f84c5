"""The front door's handling of ``application/edi-x12`` (docs/api.md#edi-intake):
the media type in any case, the query it needs, what a file's batch is keyed
by, and how ``settleq submit`` tells an X12 file and prints its answer."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

import httpx
import pytest
from pydantic import field_validator
from typer.testing import CliRunner

from services.api.edi.ingest import EdiIngest
from services.api.edi.query import EdiQuery, edi_query
from services.api.errors import ApiError
from services.api.intake.ingest import EDI_X12, JSON, NDJSON, Ingest, media_type
from services.commands.cli import app
from services.commands.client import Client
from services.commands.intake import batches
from services.commands.intake.edi import is_x12
from shared.config.settings import ProducerKey, Settings
from shared.domain.kinds import KINDS
from shared.domain.kinds.freight_audit import FreightAudit, FreightDocument
from shared.domain.x12 import EdiRefused
from shared.domain.x12.acknowledging.answer import acknowledge
from shared.domain.x12.mapping import files as mapping
from tests.support.x12_files import Freight, freight_file

pytestmark = pytest.mark.usefixtures("restore_logging")
SETTINGS = Settings(database_url="sqlite://")
NOW = dt.datetime(2026, 3, 15, 12, 0, tzinfo=dt.UTC)
KEY = ProducerKey(key_id="k", secrets=["s"], partitions=["*"])


@pytest.mark.parametrize(
    ("header", "media"),
    [
        ("application/edi-x12", EDI_X12),
        ("Application/EDI-X12", EDI_X12),
        ("application/edi-x12; charset=utf-8", EDI_X12),
        ("  APPLICATION/edi-X12 ;charset=ISO-8859-1", EDI_X12),
        ("application/json", JSON),
        ("application/x-ndjson", NDJSON),
    ],
)
def test_the_media_type_is_read_in_any_case_and_without_parameters(header: str, media: str) -> None:
    assert media_type(header) == media


@pytest.mark.parametrize(
    "header", ["", "text/plain", "application/edi-x12x", "application/edifact"]
)
def test_any_other_media_type_is_415_naming_the_three(header: str) -> None:
    with pytest.raises(ApiError) as refused:
        media_type(header)
    assert (refused.value.status, refused.value.code) == (415, "unsupported_media_type")
    assert EDI_X12 in refused.value.message


def test_an_x12_query_carries_the_contract_version_and_the_810_defaults() -> None:
    assert edi_query({"contract_version": "3"}, EDI_X12) == EdiQuery(3)
    given = {"contract_version": "7", "partition_key": "VENDOR-1", "period": "2026-Q3"}
    assert edi_query(given, EDI_X12) == EdiQuery(7, "VENDOR-1", "2026-Q3")
    # None: the sender's trading-partner profile gives it, or the file is refused
    # edi_partner_unknown once its envelope is read (tests/integration/test_partner_files.py).
    assert edi_query({}, EDI_X12) == EdiQuery(None)


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"contract_version": "0"}, "contract_version_invalid"),
        ({"contract_version": "-1"}, "contract_version_invalid"),
        ({"contract_version": "1.0"}, "contract_version_invalid"),
        ({"contract_version": "\u0661"}, "contract_version_invalid"),  # an Arabic-Indic one
        ({"contract_version": "2147483648"}, "contract_version_invalid"),
        ({"contract_version": "1", "partition_key": ""}, "partition_key_invalid"),
        ({"contract_version": "1", "partition_key": "A|B"}, "partition_key_invalid"),
        ({"contract_version": "1", "partition_key": "A\u0085"}, "partition_key_invalid"),
        ({"contract_version": "1", "period": "Q" * 129}, "period_invalid"),
    ],
)
def test_a_bad_query_value_is_refused_whatever_the_content_type(
    params: dict[str, str], code: str
) -> None:
    for media in (EDI_X12, JSON, NDJSON):
        with pytest.raises(ApiError) as refused:
            edi_query(params, media)
        assert (refused.value.status, refused.value.code) == (422, code)


def test_a_json_body_ignores_a_valid_query() -> None:
    assert edi_query({"contract_version": "2", "period": "P"}, JSON) is None
    assert edi_query({}, NDJSON) is None


def _acknowledge(interchanges: Any, problems: Any) -> bytes:
    return acknowledge(interchanges, problems, control_numbers=[7] * len(interchanges), now=NOW)


def _ingest(body: bytes, query: EdiQuery, kinds: dict[str, Any] = KINDS) -> Any:
    ingest = EdiIngest(SETTINGS, KEY, EDI_X12, query=query, acknowledge=_acknowledge, kinds=kinds)
    half = len(body) // 2
    ingest.feed_parts([body[:half], body[half:]], lambda _: None)
    return ingest.finish()


def test_a_files_batch_is_keyed_by_its_bytes_and_known_by_its_query_too() -> None:
    body = freight_file(Freight("INV-1", "ABCD"), Freight("INV-2", "ABCD"), isa13=1234)
    batch = _ingest(body, EdiQuery(1))
    assert (batch.kind, batch.documents, batch.lines, batch.source_format) == (
        "freight_audit",
        2,
        2,
        "x12",
    )
    # The default Idempotency-Key is the SHA-256 of the raw bytes...
    assert batch.default_key == batch.edi.file_sha256 == hashlib.sha256(body).hexdigest()
    # ...and a repeat must also match the query: another contract version is
    # another submission, never the old job.
    assert batch.body_sha256 != _ingest(body, EdiQuery(2)).body_sha256
    assert batch.body_sha256 == _ingest(body, EdiQuery(1)).body_sha256
    [sender] = batch.edi.senders
    assert (sender.qualifier, sender.id, sender.control_number) == (
        "ZZ",
        "CARRIERTEST",
        "000001234",
    )
    # Its 997 is written with the batch (and the file is let go of).
    ack = batch.edi.acknowledgement.decode()
    assert ack.startswith("ISA") and "*000000007*" in ack and "AK9*A*2*2*2" in ack


def test_a_json_batch_keeps_its_body_hash_as_its_key() -> None:
    body = b'{"kind": "promo_accrual", "documents": [{"document_id": "D", "partition_key": "V",'
    body += b' "contract_version": 1, "period": "P", "lines": [{"line_no": 1, "sku": "S",'
    body += b' "promo_tier": "T1", "qualifying_units": "1", "claimed_amount": "1.00"}]}]}'
    ingest = Ingest(SETTINGS, KEY, JSON)
    ingest.feed(body)
    batch = ingest.finish()
    assert batch.default_key == batch.body_sha256 == hashlib.sha256(body).hexdigest()
    assert (batch.source_format, batch.edi) == ("json", None)


def test_a_file_naming_one_interchange_twice_is_refused() -> None:
    one = freight_file(Freight("INV-1", "ABCD"), isa13=55)
    with pytest.raises(EdiRefused) as refused:
        _ingest(one + one.replace(b"INV-1", b"INV-2"), EdiQuery(1))
    assert refused.value.code == "edi_duplicate_control"
    assert refused.value.interchanges is not None  # so its 997 can be written
    assert refused.value.problems[0].element == 13


@pytest.mark.parametrize(
    ("head", "x12"),
    [
        (b"ISA*00*", True),
        (b"\xef\xbb\xbfISA*00*", True),
        (b"\r\n  \tISA|00|", True),
        (b'{"kind": "promo_accrual"}', False),
        (b"ST*210*0001~", False),
        (b"", False),
    ],
)
def test_submit_tells_an_x12_file_by_its_content(head: bytes, x12: bool) -> None:
    assert is_x12(head) is x12


def test_the_client_signs_the_query_with_the_path() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(202, json={})

    http = httpx.Client(base_url="http://x", transport=httpx.MockTransport(handler))
    client = Client("http://x", "k", "s", http=http)
    query = {"contract_version": 2, "partition_key": "V 1/2", "period": None}
    client.submit(b"ISA", EDI_X12, query=query)
    [request] = seen
    assert request.url.raw_path == b"/v1/batches?contract_version=2&partition_key=V%201%2F2"
    assert request.headers["content-type"] == EDI_X12


class FakeClient:
    """What ``settleq submit`` calls of a client, answering as the API would."""

    def __init__(self, answer: httpx.Response) -> None:
        self.answer = answer
        self.sent: list[tuple[bytes, str, Any]] = []

    def submit(self, body: bytes, ctype: str, key: Any, query: Any) -> httpx.Response:
        self.sent.append((body, ctype, query))
        return self.answer

    def acknowledgement(self, job_id: str) -> httpx.Response:
        return httpx.Response(
            200, text="ISA*00*...*997 accepted~", headers={"content-type": EDI_X12}
        )

    def job(self, job_id: str) -> dict[str, Any]:
        return {
            "job_id": job_id,
            "kind": "freight_audit",
            "state": "completed",
            "lines": 1,
            "progress": 1,
            "chunks": {"done": 1, "total": 1},
            "outcomes": {"posted": 1, "disputed": 0, "duplicate": 0, "dead_lettered": 0},
            "amounts": {"posted": "290.00", "disputed": "0"},
        }


def _submit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, answer: httpx.Response, *args: str
) -> Any:
    fake = FakeClient(answer)
    monkeypatch.setattr(batches, "make_client", lambda *a: fake)
    path = tmp_path / "invoice.edi"
    path.write_bytes(b"\xef\xbb\xbfISA*00*...")
    result = CliRunner().invoke(app, ["submit", str(path), *args])
    return fake, result


def test_submit_sends_an_x12_file_with_its_query_and_prints_outcomes_and_997(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    accepted = {
        "job_id": "j1",
        "lines": 1,
        "skipped": [{"control_number": "0002", "reason": "no_allowance"}],
        "acknowledgement_url": "/v1/jobs/j1/acknowledgement",
    }
    fake, result = _submit(
        monkeypatch, tmp_path, httpx.Response(202, json=accepted), "--contract-version", "4"
    )
    assert result.exit_code == 0, result.output
    [(_, ctype, query)] = fake.sent
    assert ctype == EDI_X12 and query["contract_version"] == 4
    assert "skipped set 0002: no_allowance" in result.output
    assert "posted" in result.output and "290.00" in result.output  # it waited
    assert result.output.rstrip().endswith("*997 accepted~")


def test_submit_of_an_x12_file_without_a_version_leaves_it_to_the_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """No --contract-version: none in the query, the sender's trading-partner
    profile gives it (tests/e2e/test_partners_cli.py runs it for real)."""
    accepted = {"job_id": "j1", "lines": 1, "skipped": [], "acknowledgement_url": None}
    fake, result = _submit(monkeypatch, tmp_path, httpx.Response(202, json=accepted))
    assert result.exit_code == 0, result.output
    [(_, _, query)] = fake.sent
    assert query["contract_version"] is None
    assert "no 997: the partner's profile asks for none" in result.output


def test_a_refused_file_prints_its_code_each_problem_and_the_997(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    problems = [
        {"code": "edi_count_mismatch", "segment": 9, "tag": "SE", "element": 1,
         "control_number": "0001", "message": "SE01 says 8, the set has 9 segments"},
        {"code": "edi_bad_number", "segment": 4, "tag": "B3", "element": 7,
         "control_number": "0001", "message": "B3-07 holds a '.'"},
    ]  # fmt: skip
    error = {
        "code": "edi_count_mismatch",
        "message": "SE01 says 8 (and 1 more problem(s))",
        "details": problems,
        "acknowledgement": "ISA*00*...*AK5*R~",
    }
    _, result = _submit(
        monkeypatch,
        tmp_path,
        httpx.Response(422, json={"error": error}),
        "--contract-version",
        "1",
    )
    assert result.exit_code == 1
    lines = result.output.splitlines()
    # A line per problem, where it is (services/commands/errors.py), then the 997.
    assert lines[:2] == [
        "settleq: 422 edi_count_mismatch: segment 9 SE, element 1, control number 0001:"
        " SE01 says 8, the set has 9 segments",
        "settleq: 422 edi_count_mismatch: segment 4 B3, element 7, control number 0001:"
        " B3-07 holds a '.' (edi_bad_number)",
    ]
    assert "ISA*00*...*AK5*R~" in lines[-1]
    assert "Traceback" not in result.output


class _RefusingTheFirst(FreightDocument):
    @field_validator("document_id")
    @classmethod
    def _not_inv_1(cls, value: str) -> str:
        if value == "INV-1":
            raise ValueError("refused by this kind")
        return value


class _Stricter(FreightAudit):
    """The freight kind, refusing the file's first document as it would one the
    mapping let through wrongly; no screen, so every document is modelled."""

    document_model = _RefusingTheFirst
    screen = None


def _refusing_the_first(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The kinds of an ingest whose kind refuses the file's first mapped document.
    The documents take the general route (encoded, then screened or modelled):
    the fast path's bytes are valid by construction
    (tests/unit/test_edi_fast_route.py), so never modelled."""
    monkeypatch.setattr(mapping, "fast_210_line", lambda place, query: None)
    return {**KINDS, FreightAudit.name: _Stricter()}


def test_a_document_the_kind_refuses_makes_its_set_unmappable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kinds = _refusing_the_first(monkeypatch)
    body = freight_file(Freight("INV-1", "ABCD"), Freight("INV-2", "ABCD"), isa13=1235)
    with pytest.raises(EdiRefused) as refused:
        _ingest(body, EdiQuery(1), kinds)
    assert {p.code for p in refused.value.problems} == {"edi_unmappable"}
    assert {(p.tag, p.control_number) for p in refused.value.problems} == {("ST", "0001")}


def test_the_mappings_refusal_of_a_later_set_wins_over_the_kinds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Documents are chunked as they are mapped, yet the answer is the one the whole
    file's mapping gives: every set it refuses, as when nothing was chunked before."""
    kinds = _refusing_the_first(monkeypatch)
    body = freight_file(Freight("INV-1", "ABCD"), Freight("INV-2", "ABCD"), isa13=1236)
    due = b"*PP**20260315*29000**"
    assert body.count(due) == 2
    body = body[::-1].replace(due[::-1], b"*PP**20260315*29001**"[::-1], 1)[::-1]
    with pytest.raises(EdiRefused) as refused:
        _ingest(body, EdiQuery(1), kinds)
    assert [(p.code, p.control_number) for p in refused.value.problems] == [
        ("edi_total_mismatch", "0002")
    ]
