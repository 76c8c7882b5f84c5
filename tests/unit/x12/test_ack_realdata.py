"""The 997 of real partner files (../shared/realdata), read and mapped by our own
reader and mappings, judged by pyx12.

pyx12 judges with HIPAA's 997 map: it knows only HIPAA's ISA qualifiers (not
02 = SCAC, 12 = phone or 16 = DUNS+4, which most of these partners use), and it
has no 997 map for GS08 versions other than 004010's. The files below are the
real 210s and 810s whose envelope it can judge; the rest are answered by the
same code (tests/unit/x12/test_ack.py covers each placement and code).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.domain.x12.acknowledging.answer import acknowledge
from shared.domain.x12.mapping.files import map_file
from shared.domain.x12.model import EdiRefused, Interchange, Problem
from shared.domain.x12.reading.reader import read_file
from tests.unit.x12.build import REALDATA
from tests.unit.x12.pyx12_peer import map_dir, validate_997

NOW = datetime(2026, 10, 2, 9, 30, tzinfo=UTC)

# file: the AK5s and AK9s its 997 must hold, in order
JUDGED = {
    "x12_210/ts210_80char.edi": ["AK5*A", "AK9*A*1*1*1"],
    # GE02 24 is not GS06 1: the group is rejected, its one set well formed
    "x12_210/DBSchenker_SampleMotorFreightDetailsAndInvoice.txt": ["AK5*A", "AK9*R*1*1*1*4"],
    # valid 810s without an allowance: refused as edi_no_documents, every set A
    "x12_810/Example1_CaliforniaISO.txt": ["AK5*A", "AK9*A*1*1*1"],
    "x12_810/simple810.edi": ["AK5*A", "AK5*A", "AK9*A*2*2*2"],
    "x12_810/x12.810a.edi": ["AK5*A", "AK9*A*1*1*1"],
    "x12_810/x12.810d.edi": ["AK5*A", "AK9*A*1*1*1"],
}

needs_realdata = pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata absent")


def read_and_map(data: bytes) -> tuple[tuple[Interchange, ...], list[Problem]]:
    try:
        interchanges = read_file(data)
        map_file(interchanges, contract_version=1, partition_key=None, period=None)
    except EdiRefused as refused:
        assert refused.interchanges is not None
        return refused.interchanges, refused.problems
    return interchanges, []


@needs_realdata
@pytest.mark.parametrize("name", sorted(JUDGED))
def test_the_997_of_a_real_file_is_valid_to_pyx12(name: str, tmp_path: Path) -> None:
    interchanges, problems = read_and_map((REALDATA / name).read_bytes())
    answer = acknowledge(interchanges, problems, control_numbers=[1], now=NOW)
    assert validate_997(answer, map_dir(tmp_path)) == []
    rows = answer.decode("ascii").split("~\n")
    assert [r for r in rows if r.startswith(("AK5", "AK9"))] == JUDGED[name]
    received = interchanges[0]
    isa = rows[0].split("*")
    assert (isa[5], isa[6].strip()) == (received.receiver_qualifier, received.receiver_id)
    assert (isa[7], isa[8].strip()) == (received.sender_qualifier, received.sender_id)
