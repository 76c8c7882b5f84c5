"""One interchange's bytes: where it ends, its hard wraps, and what no segment may hold.

Everything here is a regular-expression or ``bytes`` scan (C speed, linear):
the reader looks at envelope segments (ISA/GS/ST/SE/GE/IEA) one by one and at
body segments only through these scans, so reading a large file costs a few
passes over its bytes in C, not Python work per segment. A body segment is
split into elements when it is asked for (``shared.domain.x12.reading.lazy``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

from shared.domain.x12.model import Problem, Segment, segment
from shared.domain.x12.reading.envelope import Fatal, Header
from shared.domain.x12.reading.pages import Behind, windows

ENVELOPE_TAGS = (b"ISA", b"IEA", b"GS", b"GE", b"ST", b"SE")
_MIN_WRAP = 60  # columns: a hard wrap is at least this wide (X12 tools wrap at 80)
_CHUNK = 1 << 22  # bytes checked as UTF-8 at a time


@dataclass(frozen=True, slots=True)
class Text:
    """The bytes an interchange's segments are read from: the file's own or, when it is
    hard-wrapped, a copy without its line breaks (``source`` maps offsets back)."""

    buf: bytes
    file: bytes
    terminator: bytes
    element: bytes
    newline: bool
    origin: int = 0  # buf[0] is file[origin]
    breaks: tuple[int, ...] = ()  # buf offsets where runs of line breaks were removed
    shifts: tuple[int, ...] = ()  # how many bytes were removed up to each of those runs

    def source(self, offset: int) -> int:
        """The file's offset of ``buf[offset]``."""
        if self.buf is self.file:
            return offset
        run = bisect_right(self.breaks, offset)
        return self.origin + offset + (self.shifts[run - 1] if run else 0)

    def decode(self, start: int, stop: int) -> str:
        return self.buf[start:stop].decode("utf-8")

    def segment(self, position: int, tag: str, begin: int, end: int) -> Segment:
        """The envelope segment ``tag`` in ``buf[begin:end]`` (``end``: its terminator).
        The reader and a set's ``st`` and ``se`` read them here, so they agree."""
        raw = self.buf[begin:end]
        if self.newline:
            raw = raw.rstrip(b" \t\r" if self.terminator == b"\n" else b" \t")
        elements = raw.decode("utf-8", "replace").split(self.element.decode())
        return segment(position, tag, tuple(elements[1:]))


@dataclass(frozen=True, slots=True)
class Region:
    text: Text
    lead: int  # the byte (a terminator) before the first segment after the ISA
    stop: int  # one past the IEA's terminator (or the end of the file)
    found_iea: bool
    resume: int  # where the next interchange may start, in the file's offsets


def _pieces(terminator: bytes, element: bytes, newline: bool) -> tuple[bytes, ...]:
    """(terminator, element separator, the blank space leading a segment, what may
    follow a tag), as pattern text."""
    t, e = re.escape(terminator), re.escape(element)
    lead = rb"[ \t]*+" if newline else rb"[ \t\r\n]*+"
    trail = rb"[ \t\r]" if terminator == b"\n" else rb"[ \t]"
    end = (rb"(?:%s|%s*+(?:%s|\Z))" % (e, trail, t)) if newline else (rb"(?:%s|%s)" % (e, t))
    return t, e, lead, end


@lru_cache(maxsize=64)
def patterns(terminator: bytes, element: bytes, newline: bool) -> tuple[re.Pattern[bytes], ...]:
    """(a segment that is not one, the IEA) for these delimiters."""
    t, _, lead, end = _pieces(terminator, element, newline)
    not_a_segment = re.compile(rb"%s%s(?![A-Z0-9]{2,3}%s)" % (t, lead, end))
    iea = re.compile(rb"%s%sIEA(?=%s)" % (t, lead, end))
    return not_a_segment, iea


@lru_cache(maxsize=64)
def envelope_scan(
    terminator: bytes, element: bytes, newline: bool, fast: bool, check_tags: bool
) -> re.Pattern[bytes]:
    """The envelope segments, one match each: group 5 the tag or, when ``fast``, an ST
    and an SE as nearly every file writes them, whole (ST01 and ST02 in groups 1 and 2,
    SE01 and SE02 in 3 and 4): ST01, ST02 (and an ST03) and SE02 of letters and
    digits, SE01 of digits, each segment ending right at its terminator (past a CR
    when CRLF ends segments). Nothing in those is blank space, so ``str.strip``
    leaves them as they are. ``check_tags``: a match without a group is a segment
    without a tag (``patterns``' first, in the same scan)."""
    t, e, lead, end = _pieces(terminator, element, newline)
    cr = rb"\r?+" if newline and terminator == b"\n" else b""
    word = rb"[0-9A-Za-z]++"
    st = rb"ST%s(%s)%s(%s)(?:%s[0-9A-Za-z]*+)?%s(?=%s)" % (e, word, e, word, e, cr, t)
    se = rb"SE%s([0-9]++)%s(%s)%s(?=%s)" % (e, e, word, cr, t)
    if not fast:  # groups 1 to 4 never take part
        st = se = rb"(?!)()()"
    tags = b"|".join(ENVELOPE_TAGS)
    untagged = rb"|(?![A-Z0-9]{2,3}%s)" % end if check_tags else b""
    return re.compile(rb"%s%s(?:%s|%s|(%s)(?=%s)%s)" % (t, lead, st, se, tags, end, untagged))


def find_region(data: bytes, header: Header, isa_start: int) -> Region:
    """The interchange starting at ``isa_start``: up to its IEA, unwrapped if hard-wrapped."""
    text = Text(data, data, header.terminator, header.element, header.newline)
    region = _up_to_iea(text, header.lead)
    if header.newline:
        return region
    broken = line_break_inside(data, header.lead, region.stop, header.terminator)
    if broken is None:
        return region
    if not _hard_wrapped(data, isa_start, region.stop):
        t = header.terminator
        begins = data.rfind(t, header.lead, broken) + 1
        tag = data[begins:broken].lstrip()[:3].split(header.element)[0].decode("utf-8", "replace")
        position = header.isa.position + data.count(t, header.lead, broken)
        raise Fatal(
            Problem(
                "edi_syntax",
                f"a line break inside segment {position} ({tag}): is its terminator "
                f"{t.decode()!r} missing?",
                segment=position,
                tag=tag or None,
            )
        )
    return _unwrapped(data, header, region.stop)


def _up_to_iea(text: Text, lead: int) -> Region:
    buf, t = text.buf, text.terminator
    iea = patterns(t, text.element, text.newline)[1].search(buf, lead)
    if iea is None:
        return Region(text, lead, len(buf), False, len(text.file))
    end = buf.find(t, iea.end())
    stop = len(buf) if end < 0 else end + 1
    return Region(text, lead, stop, True, text.source(stop - 1) + 1)


def _break_rules(terminator: bytes) -> tuple[re.Pattern[bytes], ...]:
    t = re.escape(terminator)
    # Line breaks right after a terminator are the common case; the lookbehinds
    # drop them at C speed, and a match takes the whole blank run that follows.
    return (
        re.compile(rb"\n(?<!%s\n)(?<!%s\r\n)[ \t\r\n]*+" % (t, t)),
        re.compile(rb"\r(?!\n)(?<!%s\r)[ \t\r\n]*+" % t),
    )


def line_break_inside(data: bytes, lead: int, stop: int, terminator: bytes) -> int | None:
    """The first line break that falls inside a segment (not after its terminator).

    A window at a time (``pages.windows``), each ending right after a terminator: a
    run of blank space never spans two, and a rule's lookbehind sees across."""
    first: int | None = None
    for rule in _break_rules(terminator):
        checked = lead + 1  # everything before ends at a segment boundary, then blank
        for start, end in windows(data, lead + 1, stop, terminator):
            if first is not None and start > first:
                break
            at = _break_in(data, rule, start, end, terminator, checked)
            if isinstance(at, tuple):
                checked = at[0]
                continue
            if first is None or at < first:
                first = at
            break
    return first


def _break_in(
    data: bytes, rule: re.Pattern[bytes], start: int, stop: int, terminator: bytes, checked: int
) -> int | tuple[int]:
    """The first line break of ``rule`` in ``data[start:stop]`` inside a segment, or
    (as a 1-tuple) where the next window's check begins if there is none."""
    for match in rule.finditer(data, start, stop):
        at = match.start()
        before = data[checked:at].rstrip(b" \t\r\n")
        if before and before[-1:] != terminator:
            return at
        checked = match.end()
    return (checked,)


def _hard_wrapped(data: bytes, isa_start: int, stop: int) -> bool:
    """Whether the interchange is its text cut every N columns (N the first line's
    width, at least ``_MIN_WRAP``), with no other line break."""
    text = data[data.rfind(b"\n", 0, isa_start) + 1 : stop]
    first = text.find(b"\n")
    newline = b"\r\n" if text[first - 1 : first] == b"\r" else b"\n"
    width = first + 1 - len(newline)
    if first < 0 or width < _MIN_WRAP:
        return False
    flat = text.replace(newline, b"")
    wrapped = newline.join(flat[at : at + width] for at in range(0, len(flat), width))
    return wrapped == text


def _unwrapped(data: bytes, header: Header, stop: int) -> Region:
    raw = data[header.lead : stop]
    breaks, shifts, removed = [], [], 0
    for run in re.finditer(rb"[\r\n]+", raw):
        breaks.append(run.start() - removed)
        removed += run.end() - run.start()
        shifts.append(removed)
    buf = raw.replace(b"\r", b"").replace(b"\n", b"")
    text = Text(
        buf,
        data,
        header.terminator,
        header.element,
        False,
        header.lead,
        tuple(breaks),
        tuple(shifts),
    )
    return _up_to_iea(text, 0)


def syntax_problems(region: Region, first: int, limit: int) -> list[Problem]:
    """Bytes that are not UTF-8 and segments without a tag (an empty one, "~~", is one);
    ``first`` is the position of the first segment after the ISA."""
    text = region.text
    buf, t = text.buf, text.terminator
    found = not_utf8(region, first, limit)
    end = region.stop - 1 if buf[region.stop - 1 : region.stop] == t else region.stop
    counted, seen = region.lead + 1, 0
    for match in patterns(t, text.element, text.newline)[0].finditer(buf, region.lead, end):
        if len(found) >= limit:
            break
        seen += buf.count(t, counted, match.start() + 1)
        counted = match.start() + 1
        near = buf[match.end() : match.end() + 20].split(t)[0].decode("utf-8", "replace")
        what = "an empty segment" if not near.strip() else f"no segment tag at {near!r}"
        found.append(Problem("edi_syntax", what, segment=first + seen))
    return found


def not_utf8(region: Region, first: int, limit: int) -> list[Problem]:
    buf, t = region.text.buf, region.text.terminator
    found: list[Problem] = []
    start = region.lead
    behind = Behind(buf)  # a spooled file's pages go behind the check
    while start < region.stop and len(found) < limit:
        behind.passed(start)
        # Chunks end at a terminator, which no multi-byte character contains.
        cut = buf.rfind(t, start, start + _CHUNK) if start + _CHUNK < region.stop else -1
        stop = region.stop if cut <= start else cut + 1
        piece = buf[start:stop]
        if not piece.isascii():
            try:
                piece.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = start + exc.start
                position = first + buf.count(t, region.lead + 1, bad)
                found.append(
                    Problem(
                        "edi_encoding",
                        f"byte {buf[bad]:#04x} at offset {region.text.source(bad)} is not "
                        "UTF-8 (Latin-1 and Windows-1252 are not guessed)",
                        segment=position,
                    )
                )
                stop = buf.find(t, bad) + 1 or region.stop
        start = stop
    behind.finished(region.stop)
    return found
