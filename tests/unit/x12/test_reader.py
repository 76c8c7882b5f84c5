"""shared.domain.x12.reading.reader.read_file on the oddities of real files
(docs/architecture.md#edi-intake) and on each way an envelope can be wrong."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from shared.domain.x12.model import EdiRefused, Segment, TransactionSet
from shared.domain.x12.reading.lazy import raw_bytes, tagged
from shared.domain.x12.reading.reader import read_file
from tests.unit.x12.build import freight, group, interchange, isa, write, x12

FILE = x12([("210", "0001", freight())])


def _sets(data: bytes) -> list[TransactionSet]:
    return [s for i in read_file(data) for g in i.groups for s in g.sets]


def _refused(data: bytes) -> EdiRefused:
    with pytest.raises(EdiRefused) as caught:
        read_file(data)
    return caught.value


def _first(data: bytes) -> tuple[str, int | None, str | None, int | None]:
    problem = _refused(data).problems[0]
    return problem.code, problem.segment, problem.tag, problem.element


def test_a_plain_file_reads_into_its_envelopes() -> None:
    [interchange_] = read_file(FILE)
    assert interchange_.delimiters.element == "*"
    assert interchange_.delimiters.component == ">"
    assert interchange_.delimiters.segment == "~"
    assert interchange_.delimiters.repetition is None
    assert (interchange_.sender_id, interchange_.control_number) == ("SENDER", "000000001")
    [group_] = interchange_.groups
    [set_] = group_.sets
    assert (set_.code, set_.control_number) == ("210", "0001")
    assert set_.st.position == 3 and set_.se.position == 3 + len(freight()) + 1
    assert set_.body[0] == Segment(4, "B3", tuple(freight()[0].split("*")[1:]))
    assert [s.position for s in set_.segments] == list(range(3, set_.se.position + 1))
    assert interchange_.iea.position == set_.se.position + 2


@pytest.mark.parametrize("terminator", ["~", "|", ".", "*", "^", "'", "\x1c"])
def test_the_terminator_is_whatever_follows_isa16(terminator: str) -> None:
    element = "^" if terminator == "*" else "*"
    body = [s.replace(".", "") if terminator == "." else s for s in freight()]
    data = x12([("210", "0001", body)], element=element, terminator=terminator, after="\r\n")
    [set_] = _sets(data)
    assert set_.body[0].tag == "B3" and set_.body[0].get(2) == "INV-1"
    assert read_file(data)[0].delimiters.segment == terminator


@pytest.mark.parametrize("after", ["", "\n", "\r\n", "\r\n    ", "\n\t\t", " \r\n", "\r"])
def test_line_breaks_and_indentation_after_terminators_are_not_data(after: str) -> None:
    [set_] = _sets(x12([("210", "0001", freight())], after=after))
    assert [s.tag for s in set_.body] == [s.split("*")[0] for s in freight()]
    assert set_.body[-1].elements[-1] == "3"


@pytest.mark.parametrize("after", ["\n", "\r\n", " \r\n", "\t\n", "\r"])
def test_line_breaks_alone_can_end_segments(after: str) -> None:
    data = x12([("210", "0001", freight())], terminator="", after=after)
    [interchange_] = read_file(data)
    assert interchange_.delimiters.segment == "\n"
    [set_] = interchange_.groups[0].sets
    assert set_.body[-1].elements[-1] == "3"  # trailing blanks are not data here
    assert set_.se.get(2) == "0001"


def test_a_bom_blank_lines_before_and_padding_after_are_ignored() -> None:
    data = b"\xef\xbb\xbf\r\n  " + FILE + b" " * 79 + b"\r\n\x00\x1a"
    assert _sets(data)[0].control_number == "0001"


def test_two_segments_on_one_line() -> None:
    body = freight()
    text = FILE.replace(b"~\nLX*2~\n", b"~LX*2~")
    assert text != FILE
    assert [s.tag for s in _sets(text)[0].body] == [s.split("*")[0] for s in body]


def test_unpadded_and_no_break_space_padded_isas() -> None:
    short = FILE.replace(
        isa().encode(), b"ISA*00**00**ZZ*SENDER*ZZ*RECEIVER*260101*1200*U*00401*000000001*0*P*>"
    )
    nbsp = FILE.replace(b"SENDER         ", "SENDER\u00a0\u00a0\u00a0".encode())
    assert read_file(short)[0].sender_id == "SENDER"
    assert read_file(short)[0].isa.get(2) == ""
    [interchange_] = read_file(nbsp)
    assert interchange_.sender_id == "SENDER"
    assert interchange_.isa.get(6) == "SENDER\u00a0\u00a0\u00a0"  # as sent


def test_a_file_hard_wrapped_at_80_columns_is_read_as_if_it_were_not() -> None:
    flat = x12([("210", "0001", freight())], after="")
    wrapped = b"\n".join(flat[i : i + 80] for i in range(0, len(flat), 80)) + b"\n"
    [want], [got] = _sets(flat), _sets(wrapped)
    assert got == want
    assert read_file(wrapped)[0].isa == read_file(flat)[0].isa
    assert wrapped[80:81] == b"\n"  # inside the 106-character ISA
    assert raw_bytes(got) in wrapped and b"\n" in raw_bytes(got)  # as sent, wraps and all
    assert raw_bytes(got).replace(b"\n", b"") == raw_bytes(want)


def test_a_line_break_inside_a_segment_of_an_unwrapped_file_is_a_missing_terminator() -> None:
    data = FILE.replace(b"LX*2~\n", b"LX*2\n")
    code, segment, tag, _ = _first(data)
    assert (code, tag) == ("edi_syntax", "LX")
    assert segment == 3 + freight().index("LX*2") + 1
    assert _refused(data).interchanges is None


def test_several_interchanges_groups_and_sets_each_with_its_own_delimiters() -> None:
    first = interchange(
        [
            group([("210", "1", freight()), ("210", "2", freight())], "7"),
            group([("210", "1", freight())], "8"),
        ],
        "000000011",
    )
    second = interchange([group([("210", "1", freight())], "9")], "000000012", component=":")
    data = write(first) + write(second, element="^", terminator="|", after="\r\n")
    one, two = read_file(data)
    assert [g.control_number for g in one.groups] == ["7", "8"]
    assert [s.control_number for s in one.groups[0].sets] == ["1", "2"]
    assert (two.delimiters.element, two.delimiters.segment, two.delimiters.component) == (
        "^",
        "|",
        ":",
    )
    assert two.isa.position == one.iea.position + 1
    assert two.groups[0].sets[0].body[0].get(2) == "INV-1"


@pytest.mark.parametrize(
    ("version", "isa11", "repetition"),
    [
        ("00401", "U", None),
        ("00200", "^", None),
        ("00040", "U", None),
        ("00402", "^", "^"),
        ("00501", "!", "!"),
        ("00501", "U", None),
    ],
)
def test_isa11_separates_repetitions_only_from_00402(
    version: str, isa11: str, repetition: str | None
) -> None:
    body = freight(B3="B3**INV-1*75027674*TP**20160707*65940**20160708*035*CNRU*20160707")
    [interchange_] = read_file(x12([("210", "1", body)], version=version, isa11=isa11))
    assert interchange_.delimiters.repetition == repetition
    # Elements are kept as sent: an ISA11 of "U" never turns SCAC CNRU into CNR.
    assert interchange_.groups[0].sets[0].body[0].get(11) == "CNRU"


def test_raw_bytes_are_the_set_as_sent_from_st_through_ses_terminator() -> None:
    data = b"\xef\xbb\xbf" + x12([("210", "1", freight()), ("210", "2", freight())], after="\r\n  ")
    first, second = _sets(data)
    start = data.index(b"ST*210*1")
    assert raw_bytes(first) == data[start : data.index(b"SE*13*1~", start) + 8]
    assert raw_bytes(second).startswith(b"ST*210*2~\r\n  B3") and raw_bytes(second).endswith(
        b"SE*13*2~"
    )
    newline = x12([("210", "1", freight())], terminator="", after="\r\n")
    [set_] = _sets(newline)
    assert raw_bytes(set_).endswith(b"SE*13*1\r\n")  # the line break is its terminator
    assert raw_bytes(TransactionSet(set_.st, set_.se, set_.body)) is None


def test_a_set_read_lazily_is_a_transaction_set_like_any_other() -> None:
    [set_] = _sets(FILE)
    plain = TransactionSet(set_.st, set_.se, tuple(set_.body))
    assert set_ == plain and plain == set_ and hash(set_) == hash(plain)
    assert pickle.loads(pickle.dumps(set_)) == plain
    assert copy.deepcopy(set_) == plain
    replaced = dataclasses.replace(set_, se=Segment(99, "SE", ("13", "0001")))
    assert replaced.body == set_.body and replaced.se.position == 99
    [fresh] = _sets(FILE)
    assert tagged(fresh, ("L1", "L3")) == [s for s in set_.body if s.tag in ("L1", "L3")]
    assert tagged(plain, ("B3",)) == [set_.body[0]]


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", "edi_not_x12"),
        (b"  \r\n", "edi_not_x12"),
        (b'{"kind": "freight_audit", "documents": []}', "edi_not_x12"),
        (b"%PDF-1.7\n", "edi_not_x12"),
        ("ISA*00".encode("utf-16"), "edi_encoding"),
        (b"ST*210*0001~B3**1~SE*3*0001~", "edi_envelope_missing"),
        (b"\xef\xbb\xbfGS*IM*A*B~ST*210*1~SE*2*1~GE*1*1~", "edi_envelope_missing"),
    ],
)
def test_what_is_not_an_interchange(data: bytes, code: str) -> None:
    refused = _refused(data)
    assert refused.code == code and refused.interchanges is None


def test_bytes_that_are_not_utf8_are_located() -> None:
    data = FILE.replace(b"LX*2", b"LX*2\xe9")
    refused = _refused(data)
    assert refused.code == "edi_encoding"
    assert refused.problems[0].segment == 3 + freight().index("LX*2") + 1
    assert refused.interchanges is None


@pytest.mark.parametrize(
    ("isa_text", "element"),
    [
        (isa().replace("*", "A"), None),  # a letter as element separator
        (isa()[:60], None),  # fewer than 16 elements
        (isa()[:-1] + "Z", 16),  # ISA16 a letter
        (isa()[:-1] + "*", 16),  # ISA16 the element separator
    ],
)
def test_delimiters_that_cannot_be(isa_text: str, element: int | None) -> None:
    data = (isa_text + "~GS*IM*A*B*20260101*1200*1*X*004010~").encode()
    code, segment, tag, at = _first(data)
    assert (code, segment, tag) == ("edi_delimiters", 1, "ISA")
    assert element is None or at == element


def test_no_terminator_after_isa16() -> None:
    assert _first((isa() + "GS*IM~").encode())[0] == "edi_delimiters"
    assert _first((isa() + ">GS*IM~").encode())[0] == "edi_delimiters"  # ">" twice
    assert _first(isa().encode())[0] == "edi_envelope"  # nothing after the ISA


@pytest.mark.parametrize(
    ("change", "code", "tag", "element"),
    [
        (("SE*13*0001", "SE*12*0001"), "edi_count_mismatch", "SE", 1),
        (("SE*13*0001", "SE*x*0001"), "edi_syntax", "SE", 1),
        (("SE*13*0001", "SE*13*0002"), "edi_control_mismatch", "SE", 2),
        (("GE*1*1", "GE*2*1"), "edi_count_mismatch", "GE", 1),
        (("GE*1*1", "GE*1*2"), "edi_control_mismatch", "GE", 2),
        (("IEA*1*000000001", "IEA*3*000000001"), "edi_count_mismatch", "IEA", 1),
        (("IEA*1*000000001", "IEA*1*000000002"), "edi_control_mismatch", "IEA", 2),
        (("*1*X*004010", "**X*004010"), "edi_syntax", "GS", 6),
        (("ST*210*0001", "ST**0001"), "edi_syntax", "ST", 1),
    ],
)
def test_counts_and_control_numbers_must_agree(
    change: tuple[str, str], code: str, tag: str, element: int
) -> None:
    data = FILE.replace(change[0].encode(), change[1].encode())
    assert data != FILE
    refused = _refused(data)
    problem = refused.problems[0]
    assert (problem.code, problem.tag, problem.element) == (code, tag, element)
    assert refused.interchanges is not None  # the envelopes were read: a 997 can reject
    [set_] = [s for g in refused.interchanges[0].groups for s in g.sets]
    assert problem.control_number in (set_.control_number, "1", "000000001", None)


def test_duplicate_control_numbers() -> None:
    sets = [("210", "1", freight()), ("210", "1", freight())]
    refused = _refused(x12(sets))
    assert [(p.code, p.tag, p.element, p.control_number) for p in refused.problems] == [
        ("edi_duplicate_control", "ST", 2, "1")
    ]
    groups = write(
        interchange([group([("210", "1", freight())], "5"), group([("210", "1", freight())], "5")])
    )
    problem = _refused(groups).problems[0]
    assert (problem.code, problem.tag, problem.element, problem.control_number) == (
        "edi_duplicate_control",
        "GS",
        6,
        "5",
    )
    # The same ST02 in two groups, and the same GS06 in two interchanges, are fine.
    apart = write(
        interchange([group([("210", "1", freight())], "5"), group([("210", "1", freight())], "6")])
    )
    assert len(read_file(apart + write(interchange([group([("210", "1", freight())], "5")])))) == 2


@pytest.mark.parametrize(
    ("segments", "tag"),
    [
        ([*group([("210", "1", [])])[:-1], *group([("210", "2", [])]), "IEA*1*000000001"], "GS"),
        ([*group([("210", "1", freight())])[:-2], "GE*1*1", "IEA*1*000000001"], "GE"),  # no SE
        (["ST*210*1", "SE*2*1", "IEA*0*000000001"], "ST"),  # no GS
        ([*group([("210", "1", [])]), "SE*2*1", "IEA*1*000000001"], "SE"),  # SE without ST
        (["GE*0*1", "IEA*0*000000001"], "GE"),  # GE without GS
        ([*group([("210", "1", [])])[:-1], "N1*ST*X", "GE*1*1", "IEA*1*000000001"], "N1"),  # stray
        ([*group([("210", "1", [])])], "GE"),  # no IEA: truncated
        ([*group([("210", "1", [])]), "IEA*1*000000001", "GS*IM"], None),  # after the IEA
        ([*group([("210", "1", [])])[:-1], isa(), "IEA*1*000000001"], "ISA"),  # ISA inside
    ],
)
def test_envelopes_that_do_not_nest(segments: list[str], tag: str | None) -> None:
    data = write([isa(), *segments])
    refused = _refused(data)
    assert refused.code == "edi_envelope"
    assert refused.interchanges is None
    assert tag is None or refused.problems[0].tag == tag


@pytest.mark.parametrize("bad", [b"~~", b"~ ~", b"~#1*X~", b"~lx*1~", b"~L~"])
def test_a_segment_without_a_tag(bad: bytes) -> None:
    data = FILE.replace(b"~\nLX*2~", bad + b"LX*2~")
    assert data != FILE
    refused = _refused(data)
    assert refused.code == "edi_syntax"
    assert refused.problems[0].segment == 3 + freight().index("LX*2") + 1


def test_every_problem_is_reported_up_to_a_bound_in_file_order() -> None:
    sets = [("210", str(n), freight()) for n in range(300)]
    broken = x12(sets).replace(b"SE*13*", b"SE*12*")
    refused = _refused(broken)
    assert len(refused.problems) == 100
    assert {p.code for p in refused.problems} == {"edi_count_mismatch"}
    positions = [p.segment for p in refused.problems]
    assert positions == sorted(positions)


def test_a_five_megabyte_element_is_read_and_random_bytes_are_refused() -> None:
    long = FILE.replace(b"LX*2", b"LX*" + b"2" * 5_000_000)
    [set_] = _sets(long)
    assert len(tagged(set_, ("LX",))[1].get(1)) == 5_000_000
    for seed in range(20):
        junk = bytes((seed * 7919 + n * 104729) % 256 for n in range(2000))
        with pytest.raises(EdiRefused):
            read_file(junk)
        with pytest.raises(EdiRefused):
            read_file(isa().encode() + b"~" + junk)


def test_interchanges_ended_by_line_breaks_then_by_a_character_and_back() -> None:
    lines = write(interchange([group([("210", "1", freight())], "5")]), terminator="", after="\r\n")
    bars = write(
        interchange([group([("210", "1", freight())], "6")], "000000002"),
        element="^",
        terminator="|",
        after="",
    )
    for data in (lines + bars + lines, bars + lines):
        interchanges = read_file(data)
        assert [i.groups[0].sets[0].body[0].get(2) for i in interchanges] == ["INV-1"] * len(
            interchanges
        )
        assert [i.isa.position for i in interchanges] == [
            1 + 17 * n for n in range(len(interchanges))
        ]
