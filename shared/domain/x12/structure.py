"""One interchange's envelopes: ISA > GS > ST..SE > GE > IEA, their counts and controls.

Only envelope segments are looked at one by one; the body segments between
two of them are counted (``bytes.count`` of terminators), which is all the
nesting, SE01 and the positions need.

Two of them per transaction set, ST and SE, are nearly all of a large file's:
an ST and an SE as nearly every file writes them (their elements letters and
digits, nothing after SE02, in their place and agreeing) are each taken from one
regular-expression match and checked with a comparison or two; anything else,
or anything those checks doubt, is read by the general path, segment by
segment, which reports what is wrong. ``fast=False`` reads everything the
general way (tests compare the two).
"""

from __future__ import annotations

import re
from functools import lru_cache
from sys import intern

from shared.domain.x12.envelope import Header
from shared.domain.x12.lazy import ReadSet, Spans
from shared.domain.x12.model import (
    FunctionalGroup,
    Interchange,
    Problem,
    Segment,
    TransactionSet,
)
from shared.domain.x12.problems import Problems
from shared.domain.x12.scan import ENVELOPE_TAGS, Region, patterns

_TAGS = {tag: tag.decode() for tag in ENVELOPE_TAGS}
# An open set: ST's position, first byte and end, then ST01 and ST02 as sent, and
# ST02 stripped, as a string and as bytes (what SE02 must be).
OpenSet = tuple[int, int, int, str, str, str, bytes]


@lru_cache(maxsize=64)
def _regular(terminator: bytes, element: bytes, newline: bool) -> tuple[re.Pattern[bytes], ...]:
    """(ST, SE) as nearly every file writes them, for these delimiters: ST01 and ST02
    (and an ST03) of letters and digits, SE01 digits and SE02 letters and digits,
    each right before its terminator (a CR before it when CRLF ends segments).
    Nothing in them is blank space, so ``str.strip`` leaves them as they are."""
    t, e = re.escape(terminator), re.escape(element)
    end = rb"\r?+(?=%s)" % t if newline and terminator == b"\n" else rb"(?=%s)" % t
    st = re.compile(rb"ST%s([0-9A-Za-z]++)%s([0-9A-Za-z]++)(?:%s[0-9A-Za-z]*+)?%s" % (e, e, e, end))
    se = re.compile(rb"SE%s([0-9]++)%s([0-9A-Za-z]++)%s" % (e, e, end))
    return st, se


class EnvelopeReader:
    def __init__(
        self, header: Header, region: Region, problems: Problems, *, fast: bool = True
    ) -> None:
        self.header, self.region, self.problems = header, region, problems
        self.text = region.text
        self.fast = fast
        self.spans = Spans(region.text)
        self.groups: list[FunctionalGroup] = []
        self.group: tuple[Segment, list[TransactionSet], set[str]] | None = None
        self.open_set: OpenSet | None = None
        self.group_numbers: set[str] = set()
        self.last_position, self.last_tag = header.isa.position, "ISA"  # the last envelope
        self.last_end = region.lead  # segment read, and the terminator ending it
        self.codes: dict[bytes, str] = {}  # ST01s, one string each

    def read(self) -> tuple[Interchange | None, int]:
        """The interchange (None when its envelopes do not nest) and its IEA's position."""
        text, problems = self.text, self.problems
        buf, t, stop = text.buf, text.terminator, self.region.stop
        isa = self.header.isa
        if not isa.get(13).strip():
            problems.at("edi_syntax", "ISA13 (the control number) is empty", isa, 13)
        count, find, rfind = buf.count, buf.find, buf.rfind
        counted, position = self.region.lead, isa.position
        envelope = patterns(t, text.element, text.newline)[0]
        st_match, se_match = (r.match for r in _regular(t, text.element, text.newline))
        fast, spans, codes = self.fast, self.spans, self.codes
        # The hot loop, two envelope segments (ST, SE) per transaction set: those two
        # are taken here when regular, the rest (and any doubt) by ``_general``.
        for match in envelope.finditer(buf, self.region.lead, stop):
            at = match.start()
            position += count(t, counted, at + 1)
            counted = at + 1
            tag = match[1]
            begin = match.end() - len(tag)
            if fast:
                open_set = self.open_set
                if tag == b"SE":
                    if open_set is not None and (se := se_match(buf, begin, stop)) is not None:
                        st, st_begin, st_end, code, sent, _, number = open_set
                        if se[2] == number and se[1] == b"%d" % (position - st + 1):
                            end = se.end()  # its terminator (past a CR)
                            index = spans.add(
                                st, st_begin, st_end, rfind(t, 0, begin), position, begin, end
                            )
                            self.group[1].append(ReadSet.of(spans, index, code, sent))  # type: ignore[index]
                            self.open_set = None
                            self.last_position, self.last_tag, self.last_end = position, "SE", end
                            continue
                elif (
                    tag == b"ST"
                    and open_set is None
                    and position == self.last_position + 1
                    and self.group is not None
                    and (st_ := st_match(buf, begin, stop)) is not None
                ):
                    sent = st_[2].decode()
                    numbers = self.group[2]
                    if sent not in numbers:
                        numbers.add(sent)
                        code = codes.get(st_[1]) or _code(codes, st_[1])
                        end = st_.end()  # its terminator (past a CR)
                        self.open_set = (position, begin, end, code, sent, sent, st_[2])
                        self.last_position, self.last_tag, self.last_end = position, "ST", end
                        continue
            end = find(t, begin, stop)
            outcome = self._general(position, tag, at, begin, stop if end < 0 else end)
            if outcome is not None:
                return outcome
        return self._broken(
            self.last_position, self.last_tag, "the interchange ends without an IEA: truncated"
        )

    def _general(
        self, position: int, tag: bytes, at: int, begin: int, end: int
    ) -> tuple[Interchange | None, int] | None:
        """Envelope segment ``tag`` at ``begin`` read and checked segment by segment;
        the interchange once it ends (its IEA, or an ISA before it), else None."""
        segment = self.text.segment(position, _TAGS[tag], begin, end)
        open_set = self.open_set
        if tag == b"SE" and open_set is not None:
            st, st_begin, st_end, code, sent, number, _ = open_set
            elements = segment.elements
            count_ok = len(elements) > 1 and elements[0] == str(position - st + 1)
            if not count_ok or elements[1].strip() != number:
                self._se_checks(segment, st, number)
            buf, t = self.text.buf, self.text.terminator
            index = self.spans.add(
                st, st_begin, st_end, buf.rfind(t, 0, begin), position, begin, end
            )
            self.group[1].append(ReadSet.of(self.spans, index, code, sent))  # type: ignore[index]
            self.open_set = None
        elif open_set is None and position != self.last_position + 1:
            self._stray(at)
        if tag == b"IEA":
            return self._iea(segment)
        if tag == b"ISA":
            return self._broken(position, "ISA", "an ISA inside an interchange: its IEA is missing")
        if tag == b"GS":
            self._gs(segment)
        elif tag == b"ST":
            self._st(segment, begin, end)
        elif tag == b"GE":
            self._ge(segment)
        elif open_set is None:  # an SE: ``read`` closes the others
            self.problems.at("edi_envelope", "an SE without its ST", segment, fatal=True)
        self.last_position, self.last_tag, self.last_end = position, segment.tag, end
        return None

    def _broken(self, position: int, tag: str, message: str) -> tuple[None, int]:
        self.problems.add(Problem("edi_envelope", message, position, tag), fatal=True)
        return None, position

    def _stray(self, before: int) -> None:
        """Body segments between the last envelope segment and this one, outside any set."""
        text = self.text
        raw = text.buf[self.last_end + 1 : before + 1].lstrip()[:3].split(text.element)[0]
        tag = raw.split(text.terminator)[0].decode("utf-8", "replace")
        message = f"segment {tag} outside a transaction set"
        self.problems.add(Problem("edi_envelope", message, self.last_position + 1, tag), fatal=True)

    def _gs(self, gs: Segment) -> None:
        self._close_set_before(gs)
        if self.group is not None:
            self.problems.at("edi_envelope", "a GS before the GE of the group", gs, fatal=True)
        number = gs.get(6).strip()
        if not number:
            self.problems.at("edi_syntax", "GS06 (the group control number) is empty", gs, 6)
        elif number in self.group_numbers:
            self.problems.at(
                "edi_duplicate_control", f"GS06 {number} twice in one interchange", gs, 6, number
            )
        self.group_numbers.add(number)
        self.group = (gs, [], set())

    def _st(self, st: Segment, begin: int, end: int) -> None:
        self._close_set_before(st)
        if self.group is None:
            self.problems.at("edi_envelope", "an ST outside a functional group", st, fatal=True)
            return
        number = st.get(2).strip()
        if not st.get(1).strip():
            self.problems.at("edi_syntax", "ST01 (the set's code) is empty", st, 1, number)
        if not number:
            self.problems.at("edi_syntax", "ST02 (the set control number) is empty", st, 2)
        elif number in self.group[2]:
            self.problems.at(
                "edi_duplicate_control", f"ST02 {number} twice in one group", st, 2, number
            )
        self.group[2].add(number)
        code, sent = intern(st.get(1)), st.get(2)
        self.open_set = (st.position, begin, end, code, sent, number, number.encode())

    def _se_checks(self, se: Segment, st: int, number: str) -> None:
        _count(self.problems, se, se.position - st + 1, "segments in ST..SE", number)
        if se.get(2).strip() != number:
            self.problems.at(
                "edi_control_mismatch", f"SE02 {se.get(2)!r} is not ST02 {number!r}", se, 2, number
            )

    def _ge(self, ge: Segment) -> None:
        self._close_set_before(ge)
        if self.group is None:
            self.problems.at("edi_envelope", "a GE without its GS", ge, fatal=True)
            return
        gs, sets, _ = self.group
        self.group = None
        number = gs.get(6).strip()
        _count(self.problems, ge, len(sets), "transaction sets in the group", number)
        if ge.get(2).strip() != number:
            self.problems.at(
                "edi_control_mismatch", f"GE02 {ge.get(2)!r} is not GS06 {number!r}", ge, 2, number
            )
        self.groups.append(FunctionalGroup(gs, ge, tuple(sets)))

    def _iea(self, iea: Segment) -> tuple[Interchange | None, int]:
        self._close_set_before(iea)
        if self.group is not None:
            self.problems.at("edi_envelope", "an IEA before the group's GE", iea, fatal=True)
        isa = self.header.isa
        number = isa.get(13).strip()
        _count(self.problems, iea, len(self.groups), "functional groups in the interchange", number)
        if iea.get(2).strip() != number:
            self.problems.at(
                "edi_control_mismatch",
                f"IEA02 {iea.get(2)!r} is not ISA13 {number!r}",
                iea,
                2,
                number,
            )
        interchange = Interchange(isa, iea, tuple(self.groups), self.header.delimiters)
        return interchange, iea.position

    def _close_set_before(self, segment: Segment) -> None:
        if self.open_set is not None:
            number = self.open_set[5]
            self.problems.at(
                "edi_envelope",
                f"a {segment.tag} inside transaction set {number}: its SE is missing",
                segment,
                control=number,
                fatal=True,
            )
            self.open_set = None


def _code(codes: dict[bytes, str], sent: bytes) -> str:
    """ST01 as a string, one for all the sets that send it."""
    return codes.setdefault(sent, intern(sent.decode()))


def _count(problems: Problems, segment: Segment, actual: int, what: str, number: str) -> None:
    """Element 1 of SE, GE or IEA: the count of what it closes."""
    sent = segment.get(1).strip()
    if not (sent.isdigit() and sent.isascii() and len(sent) <= 18):
        problems.at("edi_syntax", f"{segment.tag}01 {sent[:20]!r} is not a count", segment, 1)
    elif int(sent) != actual:
        problems.at(
            "edi_count_mismatch",
            f"{segment.tag}01 says {int(sent)}; there are {actual} {what}",
            segment,
            1,
            number,
        )
