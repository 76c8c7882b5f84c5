"""Small X12 files for the tests, written with ``*`` and ``~`` and re-delimited on request.

``x12(sets)`` wraps transaction sets (code, control number, body segments) in
an ISA/GS/GE/IEA envelope with correct counts, so each test changes only what
it is about.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec

from shared.domain.kinds.freight_audit import FreightDocument
from shared.domain.x12.mapping.freight_210.document import map_210
from shared.domain.x12.mapping.freight_210.fast import fast_210, fast_210_line
from shared.domain.x12.mapping.sets import Place, Query
from shared.domain.x12.model import Interchange
from shared.domain.x12.problems import Problems

# The repository is a sibling of shared/ (../shared/realdata); absent on a
# clean checkout elsewhere, so the tests that need it skip.
REALDATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "realdata"
DATA = Path(__file__).resolve().parents[2] / "data" / "x12"


def isa(
    control: str = "000000001",
    *,
    sender: str = "SENDER",
    version: str = "00401",
    isa11: str = "U",
    component: str = ">",
) -> str:
    """A padded 106-character ISA without its terminator."""
    fields = [
        "ISA", "00", " " * 10, "00", " " * 10, "ZZ", sender.ljust(15), "ZZ", "RECEIVER".ljust(15),
        "260101", "1200", isa11, version, control, "0", "P", component,
    ]  # fmt: skip
    return "*".join(fields)


def transaction(code: str, number: str, body: Sequence[str]) -> list[str]:
    return [f"ST*{code}*{number}", *body, f"SE*{len(body) + 2}*{number}"]


def group(
    sets: Sequence[tuple[str, str, Sequence[str]]], number: str = "1", code: str = "IM"
) -> list[str]:
    segments = [f"GS*{code}*SENDER*RECEIVER*20260101*1200*{number}*X*004010"]
    for set_code, set_number, body in sets:
        segments += transaction(set_code, set_number, body)
    return [*segments, f"GE*{len(sets)}*{number}"]


def interchange(
    groups: Sequence[list[str]], control: str = "000000001", **isa_fields: str
) -> list[str]:
    return [
        isa(control, **isa_fields),
        *(s for g in groups for s in g),
        f"IEA*{len(groups)}*{control}",
    ]


def write(
    segments: Sequence[str], *, element: str = "*", terminator: str = "~", after: str = "\n"
) -> bytes:
    """The segments joined: ``terminator`` then ``after`` ends each (``terminator=""``
    with ``after="\\r\\n"``: line breaks end segments)."""
    text = "".join(segment.replace("*", element) + terminator + after for segment in segments)
    return text.encode("utf-8")


def x12(
    sets: Sequence[tuple[str, str, Sequence[str]]],
    *,
    element: str = "*",
    terminator: str = "~",
    after: str = "\n",
    **isa_fields: str,
) -> bytes:
    """One interchange of one group holding ``sets``."""
    segments = interchange([group(sets)], **isa_fields)
    return write(segments, element=element, terminator=terminator, after=after)


def freight(**over: str) -> list[str]:
    """The body of a 210 like 210-MGCTLYST-SAMPLE.EDI's: cwt linehaul, customs, fuel,
    discount, totals 659.40. ``over`` replaces a segment by its tag (``L3=None`` drops)."""
    body = {
        "B3": "B3**INV-1*75027674*TP**20160707*65940**20160708*035*SCAC*20160707",
        "LX1": "LX*1",
        "L0": "L0*1***7889*G***3*PCS",
        "L1": "L1*1*46.09*PH*363604",
        "LX2": "LX*2",
        "L1CUS": "L1*2***1500****CUS",
        "LX3": "LX*3",
        "L1FUE": "L1*3*26.27*FR*2627****FUE",
        "LX4": "LX*4",
        "L1DSC": "L1*4***-301791****DSC",
        "L3": "L3*7889*G***65940******3",
    }
    body.update(over)
    return [segment for segment in body.values() if segment]


def invoice(*lines: Sequence[str], **over: str) -> list[str]:
    """The body of an 810 like Example5_Walmart.txt's; ``lines`` are IT1 loops
    (default: one IT1 with one allowance of 23.50 on 1,080 units)."""
    header = {
        "BIG": "BIG*20050205*6463367*20050202*3376103367",
        "REF": "REF*IA*123456170",
        "N1SU": "N1*SU*SUPPLIER NAME",
        "N1ST": "N1*ST*WAL-MART 100*UL*0078742000992",
    }
    header.update(over)
    loops = lines or (
        ["IT1**1080*EA*3.61**IN*001719653*UP*022108955228*UK*00221089552284", "SAC*A*I410***2350"],
    )
    body = [s for s in header.values() if s]
    for loop in loops:
        body += loop
    return [*body, "TDS*387530", "CTT*1"]


def fast_and_slow_agree(interchanges: Sequence[Interchange], contract_version: int = 1) -> int:
    """The 210 fast path answers only what map_210 answers: for each 210 set it maps,
    map_210 maps it the same, without a problem, its bytes are msgspec's of map_210's
    document, and that document is valid for FreightDocument (the front door stores
    the fast path's bytes unscreened: freight_fast's docstring). Returns how many it
    mapped."""
    query = Query(contract_version, None, None)
    mapped = 0
    for interchange_ in interchanges:
        for group_ in interchange_.groups:
            for transaction_set in group_.sets:
                place = Place(interchange_, group_, transaction_set)
                line = fast_210_line(place, query)
                if transaction_set.code.strip() != "210" or line is None:
                    continue
                problems = Problems()
                document = map_210(place, query, problems)
                assert document is not None and not problems.items
                assert document == fast_210(place, query)
                assert msgspec.json.encode(document) == line.json
                assert (line.document_id, line.partition_key) == (
                    document["document_id"],
                    document["partition_key"],
                )
                valid = FreightDocument.model_validate_json(line.json)
                assert valid.model_dump(mode="json", exclude_unset=True) == document
                mapped += 1
    return mapped
