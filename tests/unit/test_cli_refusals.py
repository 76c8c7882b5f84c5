"""What a command prints when the API refuses (docs/operations.md#commands, issue
29 items 9 and 16): one line per problem with the error's code, where each detail
points (a field path, an NDJSON line, an X12 segment, the partition) and its
message, as the API sent them; the 997 a refused X12 file carries, headed by what
it says; an unknown kind answered with the kinds the registry knows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from services.commands.cli import app
from services.commands.errors import explain, refused
from services.commands.intake import edi
from shared.domain.kinds import KINDS
from shared.domain.x12.acknowledging.answer import acknowledge
from shared.domain.x12.model import EdiRefused, Problem
from shared.domain.x12.reading.reader import read_file
from tests.support.x12_files import Freight, freight_file
from tests.unit.x12.build import REALDATA

pytestmark = pytest.mark.usefixtures("restore_logging")
runner = CliRunner()


def _response(status: int, code: str, message: str, details: list[Any]) -> httpx.Response:
    body = {"error": {"code": code, "message": message, "details": details}}
    return httpx.Response(status, json=body, request=httpx.Request("POST", "http://x/v1/batches"))


def _said(status: int, code: str, message: str, details: list[Any]) -> list[str]:
    response = _response(status, code, message, details)
    error = httpx.HTTPStatusError("refused", request=response.request, response=response)
    text = explain(error)
    assert text is not None
    assert text == str(refused(response))  # one formatter, however the refusal arrives
    return text.splitlines()


# The bodies as the API sends them (services/api/errors.py, ingest.py, edi/refusal.py).
JSON_INVALID = "Invalid JSON: expected value at line 1 column 50"
EXTRA = "Extra inputs are not permitted"


@pytest.mark.regression
@pytest.mark.parametrize(
    ("status", "code", "message", "details", "lines"),
    [
        (  # the NDJSON line is the API's, not the column inside that line's JSON
            422,
            "json_invalid",
            JSON_INVALID,
            [{"loc": ["line 3"], "type": "json_invalid", "msg": JSON_INVALID}],
            [f"422 json_invalid: line 3: {JSON_INVALID}"],
        ),
        (
            422,
            "extra_forbidden",
            EXTRA,
            [
                {
                    "loc": ["documents", "1", "lines", "0", "bogus"],
                    "type": "extra_forbidden",
                    "msg": EXTRA,
                }
            ],
            [f"422 extra_forbidden: documents[1].lines[0].bogus: {EXTRA}"],
        ),
        (
            422,
            "extra_forbidden",
            EXTRA,
            [{"loc": ["line 3", "bogus"], "type": "extra_forbidden", "msg": EXTRA}],
            [f"422 extra_forbidden: line 3, bogus: {EXTRA}"],
        ),
        (  # contract put without a field the kind needs
            422,
            "missing",
            "Field required",
            [{"loc": ["tier_rates"], "type": "missing", "msg": "Field required"}],
            ["422 missing: tier_rates: Field required"],
        ),
        (
            403,
            "partition_not_allowed",
            "key scoped may not submit for 2 partition(s)",
            [{"partition_key": "V-A"}, {"partition_key": "V-B"}],
            [
                "403 partition_not_allowed: partition_key V-A: key scoped may not submit for"
                " 2 partition(s)",
                "403 partition_not_allowed: partition_key V-B: key scoped may not submit for"
                " 2 partition(s)",
            ],
        ),
        (  # each problem its line; a detail's own code follows when it is another
            422,
            "extra_forbidden",
            EXTRA,
            [
                {"loc": ["x"], "type": "extra_forbidden", "msg": EXTRA},
                {"loc": ["tier_rates"], "type": "missing", "msg": "Field required"},
            ],
            [
                f"422 extra_forbidden: x: {EXTRA}",
                "422 extra_forbidden: tier_rates: Field required (missing)",
            ],
        ),
        (
            422,
            "edi_count_mismatch",
            "SE01 is 8 (and 1 more problem(s))",
            [
                {
                    "code": "edi_count_mismatch",
                    "segment": 12,
                    "tag": "SE",
                    "element": 1,
                    "control_number": "0001",
                    "message": "SE01 is 8; the set has 9 segments",
                },
                {
                    "code": "edi_envelope",
                    "segment": 13,
                    "tag": "GX",
                    "element": None,
                    "control_number": None,
                    "message": "segment GX outside a transaction set",
                },
            ],
            [
                "422 edi_count_mismatch: segment 12 SE, element 1, control number 0001:"
                " SE01 is 8; the set has 9 segments",
                "422 edi_count_mismatch: segment 13 GX: segment GX outside a transaction set"
                " (edi_envelope)",
            ],
        ),
        (
            422,
            "unknown_query_parameter",
            "/v1/jobs takes no query parameter 'bogus'",
            [{"loc": ["query", "bogus"], "type": "unknown_query_parameter"}],
            [
                "422 unknown_query_parameter: query parameter bogus: /v1/jobs takes no query"
                " parameter 'bogus'"
            ],
        ),
        (404, "job_not_found", "no such job", [], ["404 job_not_found: no such job"]),
    ],
    ids=[
        "ndjson-line",
        "extra-field-json",
        "extra-field-ndjson",
        "missing-field",
        "partition",
        "several",
        "x12-segments",
        "query",
        "no-details",
    ],
)
def test_a_refusal_is_one_line_per_problem_saying_where(
    status: int, code: str, message: str, details: list[Any], lines: list[str]
) -> None:
    assert _said(status, code, message, details) == lines


def _ack(problems: list[Problem]) -> str:
    interchanges = read_file(freight_file(Freight("F1", "CARR")))
    now = datetime(2026, 1, 2, tzinfo=UTC)
    return acknowledge(interchanges, problems, control_numbers=[7], now=now).decode()


@pytest.mark.regression
def test_a_997_is_headed_by_what_it_says() -> None:
    # edi_no_documents faults no set: its 997 accepts every set (docs/api.md#acknowledgements).
    accepting = _ack([Problem("edi_no_documents", "nothing to settle")])
    assert "AK5*A" in accepting
    assert edi.verdict(accepting) == "997 accepting all 1 set(s)"
    assert edi.verdict(accepting.replace("\n", "")) == "997 accepting all 1 set(s)"
    assert edi.verdict("ISA*00*...*AK5*R~") == edi.verdict("") == "997 acknowledgement"
    fault = Problem("edi_total_mismatch", "totals differ", segment=5, tag="L3", element=5)
    assert edi.verdict(_ack([fault])) == "997 rejecting 1 of 1 set(s)"
    on_isa = Problem("edi_envelope", "bad ISA", segment=1, tag="ISA")
    assert edi.verdict(_ack([on_isa])) == "997 rejecting the interchange"


NOWHERE = "http://127.0.0.1:9"  # never asked: the kind is refused first


@pytest.mark.regression
@pytest.mark.parametrize(
    "args",
    [
        ["gen", "--kind", "nope"],
        ["contracts", "put", "nope", "V-1", "1", "-", "--token", "t", "--url", NOWHERE],
        ["contracts", "get", "nope", "V-1", "1", "--token", "t", "--url", NOWHERE],
        ["dlq", "list", "--kind", "nope", "--token", "t", "--url", NOWHERE],
        ["disputes", "list", "--kind", "nope", "--token", "t", "--url", NOWHERE],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_an_unknown_kind_lists_the_kinds(args: list[str]) -> None:
    result = runner.invoke(app, args, input="{}")
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.replace("│", " ").split())
    assert "'nope' is not a settlement kind" in said, result.output
    assert all(kind in said for kind in KINDS), result.output


@pytest.mark.regression
@pytest.mark.parametrize(
    ("command", "canonical", "alias"),
    [
        (["jobs", "list"], "--partition-key", "--partition"),
        (["disputes", "list"], "--partition-key", "--partition"),
        (["disputes", "list"], "--job-id", "--job"),
        (["disputes", "resolve"], "--partition-key", "--partition"),
        (["disputes", "resolve"], "--job-id", "--job"),
        (["dlq", "list"], "--partition-key", "--partition"),
        (["dlq", "list"], "--job-id", "--job"),
        (["dlq", "requeue"], "--partition-key", "--partition"),
        (["dlq", "requeue"], "--job-id", "--job"),
        (["submit"], "--partition-key", "--partition"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else value,
)
def test_one_flag_name_each_with_the_other_as_its_alias(
    command: list[str], canonical: str, alias: str
) -> None:
    """The API's names (partition_key, job_id), as docs/operations.md#commands has them."""
    from typer.main import get_command

    group: Any = get_command(app)
    for name in command:
        group = group.commands[name]
    [option] = [p for p in group.params if canonical in p.opts]
    assert option.opts[0] == canonical and alias in option.opts


@pytest.mark.regression
@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
def test_a_997_rejecting_a_group_is_never_headed_as_accepting() -> None:
    """Issue 42: DB Schenker's file (GE02 is not GS06) was printed under "997
    accepting all 1 set(s)" while its AK9 rejects the group."""
    body = (REALDATA / "x12_210/DBSchenker_SampleMotorFreightDetailsAndInvoice.txt").read_bytes()
    with pytest.raises(EdiRefused) as refused:
        read_file(body)
    assert refused.value.interchanges is not None
    data = acknowledge(
        refused.value.interchanges,
        refused.value.problems,
        control_numbers=[1],
        now=datetime(2026, 12, 5, tzinfo=UTC),
    ).decode("ascii")
    assert "AK5*A" in data and "AK9*R" in data
    assert edi.verdict(data) == "997 rejecting 1 of 1 set(s)"
