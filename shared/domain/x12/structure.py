"""One interchange's envelopes: ISA > GS > ST..SE > GE > IEA, their counts and controls.

Only envelope segments are looked at one by one; the body segments between
two of them are counted (``bytes.count`` of terminators), which is all the
nesting, SE01 and the positions need.
"""

from __future__ import annotations

from sys import intern

from shared.domain.x12.envelope import Header
from shared.domain.x12.lazy import ReadSet
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


class EnvelopeReader:
    def __init__(self, header: Header, region: Region, problems: Problems) -> None:
        self.header, self.region, self.problems = header, region, problems
        self.text = region.text
        self.groups: list[FunctionalGroup] = []
        self.group: tuple[Segment, list[TransactionSet], set[str]] | None = None
        self.open_set: tuple[Segment, int, int] | None = None  # ST, its first byte, body start
        self.group_numbers: set[str] = set()
        self.last = header.isa  # the last envelope segment read
        self.last_end = region.lead  # the terminator ending it

    def read(self) -> tuple[Interchange | None, int]:
        """The interchange (None when its envelopes do not nest) and its IEA's position."""
        text, problems = self.text, self.problems
        buf, t, stop = text.buf, text.terminator, self.region.stop
        trail = (b" \t\r" if t == b"\n" else b" \t") if text.newline else b""
        element = text.element.decode()
        isa = self.header.isa
        if not isa.get(13).strip():
            problems.at("edi_syntax", "ISA13 (the control number) is empty", isa, 13)
        handlers = {b"GS": self._gs, b"ST": self._st, b"SE": self._se, b"GE": self._ge}
        count, find = buf.count, buf.find
        counted, position = self.region.lead, isa.position
        envelope = patterns(t, text.element, text.newline)[0]
        # The hot loop, two envelope segments (ST, SE) per transaction set: those two
        # are handled here when they nest as they should, the rest by the handlers.
        for match in envelope.finditer(buf, self.region.lead, stop):
            at = match.start()
            position += count(t, counted, at + 1)
            counted = at + 1
            tag = match[1]
            begin = match.end() - len(tag)
            end = find(t, begin, stop)
            end = stop if end < 0 else end
            raw = buf[begin:end].rstrip(trail) if trail else buf[begin:end]
            parts = raw.decode("utf-8", "replace").split(element)
            if tag == b"ST" or tag == b"SE":
                _share(parts, self.open_set if tag == b"SE" else None)
            segment = Segment(position, _TAGS[tag], tuple(parts[1:]))
            open_set = self.open_set
            if tag == b"SE" and open_set is not None:
                st = open_set[0]
                number = st.elements[1].strip() if len(st.elements) > 1 else ""
                count_ok = len(parts) > 2 and parts[1] == str(position - st.position + 1)
                if not count_ok or parts[2].strip() != number:
                    self._se_checks(segment, st, number)
                last = end if buf[end : end + 1] == t else end - 1
                lazy = (text, open_set[2], buf.rfind(t, 0, begin), open_set[1], last)
                self.group[1].append(ReadSet.of(st, segment, lazy))  # type: ignore[index]
                self.open_set = None
            elif open_set is None and position != self.last.position + 1:
                self._stray(at)
            if tag == b"IEA":
                return self._iea(segment)
            if tag == b"ISA":
                return self._broken(segment, "an ISA inside an interchange: its IEA is missing")
            if tag != b"SE" or open_set is None:
                handlers[tag](segment, begin, end)
            self.last, self.last_end = segment, end
        return self._broken(self.last, "the interchange ends without an IEA: truncated")

    def _broken(self, segment: Segment, message: str) -> tuple[None, int]:
        self.problems.at("edi_envelope", message, segment, fatal=True)
        return None, segment.position

    def _stray(self, before: int) -> None:
        """Body segments between the last envelope segment and this one, outside any set."""
        text = self.text
        raw = text.buf[self.last_end + 1 : before + 1].lstrip()[:3].split(text.element)[0]
        tag = raw.split(text.terminator)[0].decode("utf-8", "replace")
        message = f"segment {tag} outside a transaction set"
        self.problems.add(Problem("edi_envelope", message, self.last.position + 1, tag), fatal=True)

    def _gs(self, gs: Segment, begin: int, end: int) -> None:
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
        self.open_set = (st, begin, end + 1)

    def _se(self, se: Segment, begin: int, end: int) -> None:
        # Only reached for an SE outside a set: ``read`` closes the others.
        self.problems.at("edi_envelope", "an SE without its ST", se, fatal=True)

    def _se_checks(self, se: Segment, st: Segment, number: str) -> None:
        _count(self.problems, se, se.position - st.position + 1, "segments in ST..SE", number)
        if se.get(2).strip() != number:
            self.problems.at(
                "edi_control_mismatch", f"SE02 {se.get(2)!r} is not ST02 {number!r}", se, 2, number
            )

    def _ge(self, ge: Segment, begin: int, end: int) -> None:
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
            st = self.open_set[0]
            self.problems.at(
                "edi_envelope",
                f"a {segment.tag} inside transaction set {st.get(2).strip()}: its SE is missing",
                segment,
                control=st.get(2).strip(),
                fatal=True,
            )
            self.open_set = None


def _share(parts: list[str], open_set: tuple[Segment, int, int] | None) -> None:
    """One string per ST01 and per SE01 count, not one per set, and SE02 the ST02
    it repeats (``open_set``: the SE's): 100,000 sets hold ~25 MB less."""
    if len(parts) > 1:
        parts[1] = intern(parts[1])
    if open_set is not None and len(parts) > 2:
        sent = open_set[0].elements
        if len(sent) > 1 and parts[2] == sent[1]:
            parts[2] = sent[1]


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
