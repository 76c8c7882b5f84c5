"""Where a file's delimiters come from: its start and each ISA header
(docs/architecture.md#edi-intake).

The ISA is read by counting element separators, never by position: real ISAs
run from 78 to 107 characters (unpadded fields, U+00A0 padding, which is two
bytes in UTF-8, a 14-character ISA06) and a hard wrap can fall inside one.
All delimiters are ASCII, so the file is scanned as bytes: a UTF-8 multi-byte
character never contains an ASCII byte, and the bytes of each transaction set
stay at hand, as sent, for its ``raw_payload``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from shared.domain.x12.model import Delimiters, Problem, Segment, sender_of_isa

BOM = b"\xef\xbb\xbf"
_SPACE = re.compile(rb"[ \t\r\n]*+")
_BREAKS = re.compile(rb"[\r\n]*+")
# 107 characters, U+00A0 padding at two bytes each, and a wrapped line or two.
_ISA_BYTES = 400
_SEGMENT_LIKE = re.compile(rb"([A-Z0-9]{2,3})([^A-Za-z0-9 \t\r\n])")
REPETITION_SINCE = "00402"  # ISA11 is a repetition separator from this version on


class Fatal(Exception):  # noqa: N818 - internal: stops reading, never leaves the package
    """A problem after which the rest of the file cannot be read."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Header:
    """One ISA, read: its segment and what it says about the interchange's syntax."""

    isa: Segment
    delimiters: Delimiters
    terminator: bytes  # the byte ending segments; b"\n" (or b"\r") when line breaks do
    element: bytes
    newline: bool
    lead: int  # offset of the byte ending the ISA (its terminator, or its line break)


def skip_space(data: bytes, offset: int) -> int:
    match = _SPACE.match(data, offset)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def first_isa(data: bytes) -> int:
    """Offset of the file's first ISA (past a UTF-8 BOM and blank space), else Fatal."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data[:4]:
        raise Fatal(
            Problem("edi_encoding", "the file is UTF-16 or UTF-32; X12 files are read as UTF-8")
        )
    start = skip_space(data, len(BOM) if data.startswith(BOM) else 0)
    if data.startswith(b"ISA", start):
        return start
    if start == len(data):
        raise Fatal(Problem("edi_not_x12", "the file is empty"))
    like = _SEGMENT_LIKE.match(data, start)
    if like is not None and re.search(rb"(?<![A-Za-z0-9])ST" + re.escape(like[2]), data):
        tag = like[1].decode()
        raise Fatal(
            Problem(
                "edi_envelope_missing",
                f"the file starts with a {tag} segment, not an ISA: transaction sets need "
                "their ISA/GS envelope",
                segment=1,
                tag=tag,
            )
        )
    raise Fatal(Problem("edi_not_x12", "the file does not start with an ISA interchange header"))


def sender_of(head: bytes) -> tuple[str, str] | None:
    """The first interchange's sender (ISA05, ISA06 trimmed), read from a file's
    first bytes before the file is read whole; None when they hold no ISA
    that can be read (the reading of the file then says why)."""
    try:
        return sender_of_isa(read_isa(head, first_isa(head), 1).isa)
    except (Fatal, IndexError, ValueError):
        return None


def usable(delimiter: bytes) -> bool:
    """Whether a byte can delimit: ASCII, neither a letter, a digit nor blank space."""
    return (
        len(delimiter) == 1
        and delimiter[0] < 0x80
        and not delimiter.isalnum()
        and delimiter not in b" \t\r\n"
    )


def read_isa(data: bytes, start: int, position: int) -> Header:
    """The ISA at ``start``: its 16 elements counted, ISA16's character, then the terminator,
    the next character that is not blank space (a letter there: line breaks end segments)."""

    def refuse(code: str, message: str, element: int | None = None) -> Fatal:
        return Fatal(Problem(code, message, segment=position, tag="ISA", element=element))

    element = data[start + 3 : start + 4]
    if not usable(element):
        raise refuse("edi_delimiters", f"the ISA's 4th character {element!r} cannot separate")
    limit = min(len(data), start + _ISA_BYTES)
    at = start + 3
    for count in range(1, 16):
        at = data.find(element, at + 1, limit)
        if at < 0:
            raise refuse("edi_delimiters", f"the ISA has {count} elements, not 16", count)
    isa16 = _BREAKS.match(data, at + 1).end()  # type: ignore[union-attr]
    component = data[isa16 : isa16 + 1]
    if not component:
        raise refuse("edi_envelope", "the file ends inside the ISA", 16)
    if not usable(component) or component == element:
        raise refuse("edi_delimiters", f"ISA16 {component!r} cannot separate components", 16)
    terminator, newline, lead = _terminator(data, isa16, element, component, refuse)
    isa = _isa_segment(data[start : isa16 + 1], element, position)
    repetition = _repetition(isa, element, component, terminator, newline)
    delimiters = Delimiters(
        element=element.decode(),
        component=component.decode(),
        repetition=repetition,
        segment="\n" if newline else terminator.decode(),
    )
    return Header(isa, delimiters, terminator, element, newline, lead)


def _terminator(
    data: bytes, isa16: int, element: bytes, component: bytes, refuse: Callable[..., Fatal]
) -> tuple[bytes, bool, int]:
    """(terminator, whether line breaks end segments, offset of the byte ending the ISA)."""
    after = skip_space(data, isa16 + 1)
    terminator = data[after : after + 1]
    gap = data[isa16 + 1 : after]
    if not terminator:
        raise refuse("edi_envelope", "nothing follows the ISA: the interchange is truncated")
    if terminator.isalpha():
        if b"\n" not in gap and b"\r" not in gap:
            raise refuse("edi_delimiters", "no segment terminator follows ISA16")
        terminator = b"\n" if b"\n" in gap else b"\r"
        return terminator, True, data.rfind(terminator, isa16, after)
    if not usable(terminator) or terminator in (element, component):
        raise refuse("edi_delimiters", f"{terminator!r} cannot terminate segments")
    return terminator, False, after


def _isa_segment(raw: bytes, element: bytes, position: int) -> Segment:
    # A hard wrap inside the ISA is not part of any element.
    raw = raw.replace(b"\r", b"").replace(b"\n", b"")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Fatal(
            Problem(
                "edi_encoding",
                f"byte {raw[exc.start]:#04x} of the ISA is not UTF-8",
                segment=position,
                tag="ISA",
            )
        ) from None
    return Segment(position, "ISA", tuple(text.split(element.decode())[1:]))


def _repetition(
    isa: Segment, element: bytes, component: bytes, terminator: bytes, newline: bool
) -> str | None:
    # Before 00402 ISA11 is the standards identifier ("U"): read as a separator
    # it would cut "CNRU" to "CNR".
    version, isa11 = isa.get(12).strip(), isa.get(11)
    if not (version.isdigit() and version >= REPETITION_SINCE):
        return None
    raw = isa11.encode()
    taken = (element, component) if newline else (element, component, terminator)
    return isa11 if usable(raw) and raw not in taken else None
