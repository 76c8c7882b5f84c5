"""read_file's fast ways (one scan for an interchange without syntax problems, one
regex match for a regular ST or SE, a set's ST and SE read again from its bytes)
against its general path (``fast=False``), on the fuzz test's mutated real files and
on mutations aimed at the envelopes of many-set files: the same interchanges, the
same problems, the same values from every accessor a consumer uses."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.domain.x12.model import (
    Delimiters,
    EdiRefused,
    Interchange,
    Segment,
    TransactionSet,
)
from shared.domain.x12.reading import reader
from shared.domain.x12.reading.lazy import lazy_bytes, raw_bytes, tagged
from shared.domain.x12.reading.reader import read_file
from shared.domain.x12.synthetic import freight_210_file
from tests.unit.x12.build import freight, x12
from tests.unit.x12.test_fuzz import SEEDS, mutated


def _segment(segment: Segment) -> tuple[Any, ...]:
    return segment.position, segment.tag, segment.elements


def _set(ts: TransactionSet) -> tuple[Any, ...]:
    lazy = lazy_bytes(ts)
    return (
        _segment(ts.st),
        _segment(ts.se),
        ts.code,
        ts.control_number,
        None if lazy is None else lazy[1:],
        raw_bytes(ts),
        [_segment(s) for s in tagged(ts, ("B3", "L1", "BIG", "IT1", "SE", "ST"))],
        [_segment(s) for s in ts.segments],
    )


def _st_and_se(raw: bytes, delimiters: Delimiters) -> tuple[tuple[str, ...], ...]:
    """A set's ST's and SE's elements read from its bytes as sent, apart from the
    reader (``ReadSet`` makes them again from offsets, or from ST01 and ST02)."""
    t, e = delimiters.segment.encode(), delimiters.element.encode()
    pieces = raw.split(t)
    first, last = pieces[0], pieces[-2] if raw.endswith(t) else pieces[-1]
    if t == b"\n":  # line breaks end segments: blanks before them are not data
        first, last = first.rstrip(b" \t\r"), last.strip(b" \t\r")
    else:  # line breaks are not data (they are after a terminator, or a hard wrap)
        first, last = (p.replace(b"\r", b"").replace(b"\n", b"") for p in (first, last))
        last = last.lstrip(b" \t")
    return tuple(
        tuple(piece.decode("utf-8", "replace").split(e.decode())[1:]) for piece in (first, last)
    )


def _interchanges(interchanges: tuple[Interchange, ...] | None) -> Any:
    if interchanges is None:
        return None
    for ic in interchanges:
        for ts in (ts for g in ic.groups for ts in g.sets):
            raw = raw_bytes(ts)
            assert raw is not None
            assert _st_and_se(raw, ic.delimiters) == (ts.st.elements, ts.se.elements)
    return [
        (
            _segment(ic.isa),
            _segment(ic.iea),
            ic.delimiters,
            [(_segment(g.gs), _segment(g.ge), [_set(s) for s in g.sets]) for g in ic.groups],
        )
        for ic in interchanges
    ]


def _read(data: bytes, *, fast: bool) -> tuple[Any, ...]:
    try:
        interchanges = read_file(data, fast=fast)
    except EdiRefused as exc:
        return "refused", [p.detail() for p in exc.problems], _interchanges(exc.interchanges)
    return "read", interchanges, _interchanges(interchanges)


def _agree(data: bytes) -> None:
    fast, general = _read(data, fast=True), _read(data, fast=False)
    assert fast == general
    if fast[0] == "read":  # and each set equals the general path's, both ways
        assert fast[1] == general[1] and general[1] == fast[1]


def _synthetic(layout: str) -> tuple[bytes, bytes]:
    """A 40-set file of two interchanges laid out as ``layout``, and its terminator."""
    data = freight_210_file(40, seed=3, carriers=2, sets_per_group=15, groups_per_interchange=2)
    if layout == "crlf":
        return data.replace(b"~\n", b"~\r\n"), b"~"
    if layout == "one line":
        return data.replace(b"~\n", b"~"), b"~"
    if layout == "line breaks end segments":
        return data.replace(b"~\n", b"\n"), b"\n"
    return data, b"~"


_LAYOUTS = ["lf", "crlf", "one line", "line breaks end segments"]
_SYNTHETIC = [_synthetic(layout) for layout in _LAYOUTS]
# What an envelope segment may become: irregular, out of place or wrong.
_ENVELOPES = [
    b"ST*210*0001", b"ST*210*0001*005010X210", b"ST*210* 0001", b"ST*210*0001 ", b"ST**0001",
    b"ST*210*", b"ST", b"SE*3*0001", b"SE*03*0001", b"SE*25*0001*X", b"SE", b"SE*25*0001 ",
    b"SE*25*0001\r", b"GS*IM*A*B*20260101*1200*1*X*004010", b"GE*1*1", b"IEA*1*1", b"ISA",
    b"", b" ", b"N1*SH*X", b"\r\n", b"ST\t*210*0001", b"SE*25*\xc3\xa9",
]  # fmt: skip


@st.composite
def envelope_mutated(draw: st.DrawFn) -> bytes:
    data, terminator = draw(st.sampled_from(_SYNTHETIC + SEEDS))
    pieces = data.split(terminator)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(pieces) - 1))
        how = draw(st.sampled_from(["insert", "replace", "edit", "swap"]))
        if how == "insert":
            pieces.insert(at, draw(st.sampled_from(_ENVELOPES)))
        elif how == "replace":
            pieces[at] = draw(st.sampled_from(_ENVELOPES))
        elif how == "swap":
            other = draw(st.integers(0, len(pieces) - 1))
            pieces[at], pieces[other] = pieces[other], pieces[at]
        else:  # one byte of an ST or an SE (or of whatever is there) changed
            piece = pieces[at]
            cut = draw(st.integers(0, len(piece)))
            new = draw(
                st.sampled_from([b"", b" ", b"0", b"9", b"*", b"a", b"\r", b"\xa0", b"\x1c"])
            )
            pieces[at] = piece[:cut] + new + piece[cut + 1 :]
    return terminator.join(pieces)


_SETTINGS = settings(
    max_examples=600,
    deadline=None,  # an example's time depends on the machine's load (test_fuzz)
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@_SETTINGS
@given(mutated())
def test_the_fast_ways_agree_with_the_general_path_on_mutated_real_files(data: bytes) -> None:
    _agree(data)


@_SETTINGS
@given(envelope_mutated())
def test_the_fast_ways_agree_with_the_general_path_on_mutated_envelopes(data: bytes) -> None:
    _agree(data)


def test_the_fast_ways_agree_on_each_layout_and_on_the_seeds() -> None:
    for data, _ in _SYNTHETIC + SEEDS:
        _agree(data)
    _agree(x12([("210", "1", freight()), ("210", "2", freight())], after="\r\n  "))


def test_a_read_sets_st_and_se_are_read_again_equal_each_time() -> None:
    data, _ = _SYNTHETIC[0]
    interchanges = read_file(data)
    ts = interchanges[0].groups[0].sets[1]
    assert ts.st == ts.st and ts.st is not ts.st  # made when asked for, not held
    assert ts.st == Segment(ts.st.position, "ST", ("210", ts.control_number))
    assert ts.se.get(1) == str(len(ts.segments)) and ts.se.get(2) == ts.control_number
    assert interchanges == read_file(data, fast=False)


@pytest.mark.parametrize("layout", _LAYOUTS)
def test_a_clean_file_is_read_in_one_scan(layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data, _ = _synthetic(layout)
    want = read_file(data, fast=False)

    def general(*args: object) -> None:
        raise AssertionError("the general path")

    monkeypatch.setattr(reader, "find_region", general)
    assert read_file(data) == want


@pytest.mark.parametrize(
    "st",
    ["ST*210", "ST*210 ", "ST*210\t", "ST*2101", "ST**0001", "ST*210*0001*X", "ST*é", "ST*é*1",
     "ST*210*é", "ST*210*0001 ", "ST*210* ", "ST", "ST*\xa0*1"],
)  # fmt: skip
@pytest.mark.parametrize("after", ["\n", "\r\n", "~\n", "~\r\n", "~"])
def test_an_odd_st_reads_the_same_both_ways(st: str, after: str) -> None:
    terminator, after = ("~", after[1:]) if after.startswith("~") else ("", after)
    data = x12([("210", "0001", freight())], terminator=terminator, after=after)
    _agree(data.replace(b"ST*210*0001", st.encode(), 1))
