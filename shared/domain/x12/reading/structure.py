"""One interchange's envelopes: ISA > GS > ST..SE > GE > IEA, their counts and controls.

Only envelope segments are looked at one by one; the body segments between two
are counted (``bytes.count`` of terminators): all the nesting, SE01 and positions need.

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
from sys import intern

from shared.domain.x12.model import (
    FunctionalGroup,
    Interchange,
    Problem,
    Segment,
    TransactionSet,
)
from shared.domain.x12.problems import Problems
from shared.domain.x12.reading.envelope import Header
from shared.domain.x12.reading.lazy import Spans, new_set
from shared.domain.x12.reading.pages import Behind
from shared.domain.x12.reading.scan import ENVELOPE_TAGS, Region, envelope_scan

_TAGS = {tag: tag.decode() for tag in ENVELOPE_TAGS}
# An open set: ST's position, first byte and end, then ST01 and ST02 as sent, and
# ST02 stripped, as a string and as bytes (what SE02 must be).
OpenSet = tuple[int, int, int, str, str, str, bytes]


class EnvelopeReader:
    def __init__(
        self,
        header: Header,
        region: Region,
        problems: Problems,
        *,
        fast: bool = True,
        check_tags: bool = False,
    ) -> None:
        """``check_tags``: the envelope scan also finds segments without a tag (what
        ``syntax_problems`` looks for) and stops at the first (``self.untagged``)."""
        self.header, self.region, self.problems = header, region, problems
        self.text = region.text
        self.fast, self.check_tags, self.untagged = fast, check_tags, False
        self.iea_end = -1  # the IEA's terminator (or the end of the text), once read
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
        try:
            return self._scan()
        finally:
            Behind(self.text.buf).finished(self.region.stop)

    def _scan(self) -> tuple[Interchange | None, int]:
        text, problems = self.text, self.problems
        buf, t, stop = text.buf, text.terminator, self.region.stop
        isa = self.header.isa
        if not isa.get(13).strip():
            problems.at("edi_syntax", "ISA13 (the control number) is empty", isa, 13)
        count = buf.count
        scan = envelope_scan(t, text.element, text.newline, self.fast, self.check_tags)
        spans, codes, counts = self.spans, self.codes, _Counts()
        add, pack, made = spans.offsets.frombytes, spans.pack, spans.count
        # The hot loop, two envelope segments (ST, SE) per transaction set: those two
        # are taken here when regular, the rest (and any doubt) by ``_general``. That
        # keeps the reader's state on ``self``; this loop keeps it in locals, handed
        # over around each ``_general``.
        open_set, group = self.open_set, self.group
        sets, numbers = (None, None) if group is None else (group[1], group[2])
        last_position, last_tag, last_end = self.last_position, self.last_tag, self.last_end
        # ``position`` is that of the segment whose tag starts at ``counted``.
        counted, position = self.region.lead, isa.position
        behind = Behind(buf)
        due = behind.due
        for match in scan.finditer(buf, self.region.lead, stop):
            kind = match.lastindex  # 2: a regular ST, 4: a regular SE (``envelope_scan``)
            if kind == 4 and open_set is not None:
                begin = match.start(3) - 3
                position += count(t, counted, begin)
                counted = begin
                st, st_begin, st_end, code, sent, _, number = open_set
                if match.group(4, 3) == (number, counts[position - st + 1]):
                    end = match.end()  # its terminator (past a CR)
                    # The terminator before SE's tag ends the body.
                    add(pack(st, st_begin, st_end, match.start(), position, begin, end))
                    sets.append(new_set(spans, made, code, sent))  # type: ignore[union-attr]
                    made += 1
                    open_set = None
                    last_position, last_tag, last_end = position, "SE", end
                    if end >= due:  # a spooled file's pages go behind the scan
                        due = behind.passed(end)
                    continue
            elif kind == 2 and open_set is None and group and match.start() == last_end:
                # Right after the last envelope segment's terminator: no stray segment.
                st01, st02 = match.group(1, 2)
                sent = st02.decode()
                if sent not in numbers:  # type: ignore[operator]
                    numbers.add(sent)  # type: ignore[union-attr]
                    code = codes.get(st01) or _code(codes, st01)
                    begin, end = match.start(1) - 3, match.end()  # ``end``: its terminator
                    position, counted = last_position + 1, begin
                    open_set = (position, begin, end, code, sent, sent, st02)
                    last_position, last_tag, last_end = position, "ST", end
                    continue
            tag, begin = _tag(match, kind)
            position += count(t, counted, begin)
            counted = begin
            self.open_set, self.last_position, self.last_tag = open_set, last_position, last_tag
            self.last_end, spans.count = last_end, made
            outcome = self._general(position, tag, match.start(), begin)
            if outcome is not None:
                return outcome
            open_set, group, made = self.open_set, self.group, spans.count
            sets, numbers = (None, None) if group is None else (group[1], group[2])
            last_position, last_tag, last_end = position, self.last_tag, self.last_end
        return self._broken(
            last_position, last_tag, "the interchange ends without an IEA: truncated"
        )

    def _general(
        self, position: int, tag: bytes | None, at: int, begin: int
    ) -> tuple[Interchange | None, int] | None:
        """Envelope segment ``tag`` at ``begin`` read and checked segment by segment;
        the interchange once it ends (its IEA, or an ISA before it), else None."""
        if tag is None:  # a segment without a tag (``check_tags``)
            self.untagged = True
            return None, position
        stop = self.region.stop
        end = self.text.buf.find(self.text.terminator, begin, stop)
        end = stop if end < 0 else end
        segment = self.text.segment(position, _TAGS[tag], begin, end)
        open_set = self.open_set
        if tag == b"SE" and open_set is not None:
            self._close_set(segment, open_set, begin, end)
        elif open_set is None and position != self.last_position + 1:
            self._stray(at)
        if tag == b"IEA":
            self.iea_end = end
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

    def _close_set(self, se: Segment, open_set: OpenSet, begin: int, end: int) -> None:
        st, st_begin, st_end, code, sent, number, _ = open_set
        elements = se.elements
        count_ok = len(elements) > 1 and elements[0] == str(se.position - st + 1)
        if not count_ok or elements[1].strip() != number:
            self._se_checks(se, st, number)
        buf, t = self.text.buf, self.text.terminator
        body_stop = buf.rfind(t, 0, begin)
        last = end if buf[end : end + 1] == t else end - 1  # no terminator: the SE's last byte
        index = self.spans.add(st, st_begin, st_end, body_stop, se.position, begin, last)
        self.group[1].append(new_set(self.spans, index, code, sent))  # type: ignore[index]
        self.open_set = None

    def _se_checks(self, se: Segment, st: int, number: str) -> None:
        self.problems.count(se, se.position - st + 1, "segments in ST..SE", number)
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
        self.problems.count(ge, len(sets), "transaction sets in the group", number)
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
        self.problems.count(iea, len(self.groups), "functional groups in the interchange", number)
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


class _Counts(dict[int, bytes]):
    """SE01 as it must read for a set of n segments, made once for each n."""

    def __missing__(self, n: int) -> bytes:
        self[n] = written = b"%d" % n
        return written


def _tag(match: re.Match[bytes], kind: int | None) -> tuple[bytes | None, int]:
    """An ``envelope_scan`` match's tag (None for a segment without one) and where it starts."""
    if kind is None:
        return None, match.end()
    if kind == 5:
        return match[5], match.start(5)
    # A regular ST or SE (groups 1 and 2, or 3 and 4) that the loop did not take.
    return (b"ST" if kind == 2 else b"SE"), match.start(kind - 1) - 3


def _code(codes: dict[bytes, str], sent: bytes) -> str:
    """ST01 as a string, one for all the sets that send it."""
    return codes.setdefault(sent, intern(sent.decode()))
