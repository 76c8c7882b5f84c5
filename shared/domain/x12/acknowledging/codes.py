"""Our ``edi_*`` problem codes as the 997's (and TA1's) standard error codes.

Where a problem points decides what reports it:

- a data segment of a set (not its ST/SE): that set's AK3, with AK304 ``8``
  and an AK4 (AK403 ``element``, or ``1`` when the element is empty) when the
  problem names an element, else AK304 ``segment``; the set's AK5 ``R`` 5;
- the set's ST or SE: its AK5 ``R`` with ``set``;
- the GS, the GE, or between two sets: the group's AK9 ``R`` with ``group``
  (no code when none fits);
- the ISA, the IEA, or outside every group: a TA1 ``R`` in that interchange
  with ``interchange`` (for an ISA element, the TA105 naming that element).

| edi_* | segment | element | set | group | interchange |
|---|---|---|---|---|---|
| edi_syntax | 1 unrecognized | 6 invalid character | 5 | - | 024 content |
| edi_envelope | 2 unexpected | 6 | 2 no trailer | 3 no trailer | 022 structure |
| edi_count_mismatch | 2 | 6 | 4 SE01 | 5 GE01 | 021 IEA01 |
| edi_control_mismatch | 2 | 6 | 3 SE02 | 4 GE02 | 001 IEA02 |
| edi_duplicate_control | 2 | 6 | 23 ST02 | 6 GS06 (as pyx12) | 025 |
| edi_duplicate_interchange | 2 | 6 | 5 | - | 025 ISA13 |
| edi_unsupported_transaction_set | 2 | 7 invalid code | 1 set | 1 group | 024 |
| edi_mixed_kinds | 2 | 7 | 1 not supported | 1 not supported | 024 |
| edi_bad_number | 8 | 6 invalid character | 5 | - | 024 |
| edi_unsupported_purpose | 2 | 7 invalid code | 5 | - | 024 |
| edi_total_mismatch, edi_unmappable, any other | 2 | 7 | 5 | - | 024 |
| edi_encoding, edi_not_x12, edi_envelope_missing | as edi_syntax | | | | |
| edi_delimiters | as edi_syntax | | | | 026 |
| edi_no_documents | rejects nothing | | | | |

edi_encoding, edi_not_x12, edi_envelope_missing and edi_delimiters come without
an envelope as a rule, and then no 997 is written.

4010's lists have no code for "the amounts do not add up" or "cannot be
mapped": 7 (invalid code value) is the nearest, the pointer (segment position
and element) is what a partner acts on, and the 422's ``details`` carry the
precise ``edi_*`` code beside the 997.
"""

from __future__ import annotations

from typing import NamedTuple


class Codes(NamedTuple):
    segment: str  # AK304 when the problem names no element
    element: str  # AK403 when it names a non-empty one
    set: str  # AK502 when it points at the set's ST or SE
    group: str | None  # AK905 when it points at the group outside its sets
    interchange: str  # TA105 when it points at the interchange outside its groups


NOT_REJECTING = frozenset({"edi_no_documents"})

_SEMANTIC = Codes("2", "7", "5", None, "024")
_SYNTAX = Codes("1", "6", "5", None, "024")
CODES: dict[str, Codes] = {
    "edi_syntax": _SYNTAX,
    "edi_encoding": _SYNTAX,
    "edi_not_x12": _SYNTAX,
    "edi_envelope_missing": _SYNTAX,
    "edi_delimiters": _SYNTAX._replace(interchange="026"),
    "edi_envelope": Codes("2", "6", "2", "3", "022"),
    "edi_count_mismatch": Codes("2", "6", "4", "5", "021"),
    "edi_control_mismatch": Codes("2", "6", "3", "4", "001"),
    "edi_duplicate_control": Codes("2", "6", "23", "6", "025"),
    "edi_duplicate_interchange": Codes("2", "6", "5", None, "025"),
    "edi_unsupported_transaction_set": Codes("2", "7", "1", "1", "024"),
    "edi_mixed_kinds": Codes("2", "7", "1", "1", "024"),
    "edi_bad_number": Codes("8", "6", "5", None, "024"),
}

# TA105 for a problem in an ISA element: the code naming that element.
ISA_ELEMENT_NOTES = {
    1: "010",
    2: "011",
    3: "012",
    4: "013",
    5: "005",
    6: "006",
    7: "007",
    8: "008",
    9: "014",
    10: "015",
    11: "016",
    12: "017",
    13: "018",
    14: "019",
    15: "020",
    16: "027",
}


def codes(code: str) -> Codes:
    return CODES.get(code, _SEMANTIC)
