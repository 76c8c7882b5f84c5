"""The value objects every X12 module shares: segments, envelopes, problems.

Positions and element numbers are 1-based, as X12 counts them and as a 997's
AK3/AK4 and the 422's ``details`` report them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Delimiters:
    element: str
    component: str
    repetition: str | None  # ISA11 when the version (ISA12 >= 00402) makes it one
    segment: str  # "\n" when line breaks end segments


@dataclass(frozen=True, slots=True)
class Segment:
    position: int  # 1-based place of the segment in the file
    tag: str
    elements: tuple[str, ...]  # element n (1-based) is elements[n - 1]; the tag is not one

    def get(self, n: int) -> str:
        """Element ``n`` as sent (never stripped of meaningful content), "" when absent."""
        return self.elements[n - 1] if 0 < n <= len(self.elements) else ""


_SEGMENT_SLOTS = tuple(Segment.__dict__[name].__set__ for name in ("position", "tag", "elements"))
_new = object.__new__


def segment(position: int, tag: str, elements: tuple[str, ...]) -> Segment:
    """``Segment(position, tag, elements)``, made without the frozen dataclass's
    ``__init__`` (three ``object.__setattr__`` calls), which is quicker, for the
    segments a read set makes again each time they are asked for."""
    made = _new(Segment)
    set_position, set_tag, set_elements = _SEGMENT_SLOTS
    set_position(made, position)
    set_tag(made, tag)
    set_elements(made, elements)
    return made


@dataclass(frozen=True, slots=True)
class TransactionSet:
    st: Segment
    se: Segment
    body: tuple[Segment, ...]  # the segments between ST and SE

    @property
    def code(self) -> str:  # ST01: "210", "810"...
        return self.st.get(1)

    @property
    def control_number(self) -> str:  # ST02
        return self.st.get(2)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """ST..SE inclusive."""
        return (self.st, *self.body, self.se)


@dataclass(frozen=True, slots=True)
class FunctionalGroup:
    gs: Segment
    ge: Segment
    sets: tuple[TransactionSet, ...]

    @property
    def code(self) -> str:  # GS01: "IM" (210), "IN" (810)...
        return self.gs.get(1)

    @property
    def control_number(self) -> str:  # GS06
        return self.gs.get(6)


@dataclass(frozen=True, slots=True)
class Interchange:
    isa: Segment  # its 16 elements as sent (padding kept)
    iea: Segment
    groups: tuple[FunctionalGroup, ...]
    delimiters: Delimiters

    @property
    def sender_qualifier(self) -> str:  # ISA05
        return sender_of_isa(self.isa)[0]

    @property
    def sender_id(self) -> str:  # ISA06, trimmed (spaces and U+00A0 padding)
        return sender_of_isa(self.isa)[1]

    @property
    def receiver_qualifier(self) -> str:  # ISA07
        return self.isa.get(7).strip()

    @property
    def receiver_id(self) -> str:  # ISA08, trimmed
        return self.isa.get(8).strip(" \u00a0")

    @property
    def control_number(self) -> str:  # ISA13
        return self.isa.get(13).strip()


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a file: the 422's ``details`` entry and a 997's AK3/AK4."""

    code: str  # edi_* (docs/architecture.md#edi-intake)
    message: str
    segment: int | None = None  # 1-based position in the file
    tag: str | None = None
    element: int | None = None  # 1-based element number within the segment
    control_number: str | None = None  # the ST02 of the set at fault, else GS06/ISA13

    def detail(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "segment": self.segment,
            "tag": self.tag,
            "element": self.element,
            "control_number": self.control_number,
            "message": self.message,
        }


def sender_of_isa(isa: Segment) -> tuple[str, str]:
    """An interchange's sender: ISA05, and ISA06 trimmed of its padding (spaces
    and U+00A0): what a trading partner's profile is named by."""
    return isa.get(5).strip(), isa.get(6).strip(" \u00a0")


class EdiRefused(Exception):
    """The whole file is refused (422). ``interchanges`` is set when the envelope
    could be read, so that a rejecting 997 can be written; else None."""

    def __init__(
        self, problems: list[Problem], interchanges: tuple[Interchange, ...] | None = None
    ) -> None:
        assert problems
        self.problems = problems
        self.interchanges = interchanges
        super().__init__(problems[0].message)

    @property
    def code(self) -> str:
        return self.problems[0].code


@dataclass(frozen=True, slots=True)
class Skipped:
    control_number: str  # ST02
    reason: str  # e.g. "no_allowance": a valid 810 with nothing to settle


@dataclass(frozen=True)
class Mapped:
    """A file read and mapped: one batch of one kind."""

    kind: str  # the registry's name of the kind whose ``x12_set`` its sets are
    documents: list[dict[str, Any]]  # JSON-ready documents of that kind, file order
    skipped: list[Skipped] = field(default_factory=list)
    interchanges: tuple[Interchange, ...] = ()
