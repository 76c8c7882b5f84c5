"""Writing X12: segments, the fixed-width ISA and envelopes whose counts and
control numbers agree (the 997 and the synthetic 210/810 files).

Our style is ``*`` between elements, ``>`` between components and ``~`` plus a
line break after each segment: the delimiters most partners' translators
default to, and one segment per line so that a person can read (and diff) a
997. Every reader strips the line break, as X12 allows between segments.
ISA12 is ``00401``: its ISA11 is then the standards identifier ``U``, not a
repetition separator, which no 4010 document of ours needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

# Delimiter candidates in order of preference: the first of each list that no
# value to be written contains is used (a partner's id may hold a ``*`` when its
# own files separate elements with something else).
ELEMENTS = "*|^!"
COMPONENTS = ">:\\+"
TERMINATORS = "~'`"


@dataclass(frozen=True, slots=True)
class Writer:
    element: str = "*"
    component: str = ">"
    terminator: str = "~"

    @classmethod
    def avoiding(cls, values: Iterable[str]) -> Writer:
        """Our delimiters, each replaced by the next candidate when a value holds it."""
        used = set("".join(values))
        chosen: list[str] = []
        for candidates in (ELEMENTS, COMPONENTS, TERMINATORS):
            free = [c for c in candidates if c not in used and c not in chosen]
            chosen.append(free[0] if free else candidates[0])
        return cls(*chosen)

    def clean(self, value: str) -> str:
        """A value as it can be written: printable ASCII and none of our delimiters."""
        delimiters = {self.element, self.component, self.terminator}
        if value.isascii() and value.isprintable() and delimiters.isdisjoint(value):
            return value  # nearly always: the character walk below is for the odd file
        return "".join(c if " " <= c <= "~" and c not in delimiters else "?" for c in value)

    def segment(self, tag: str, *elements: str) -> str:
        """One segment without its terminator; trailing empty elements are left out."""
        values = list(elements)
        while values and values[-1] == "":
            values.pop()
        return self.element.join((tag, *values))

    def text(self, segments: Iterable[str]) -> str:
        end = self.terminator + "\n"
        joined = end.join(segments)
        return joined + end if joined else ""

    def isa(
        self,
        *,
        sender: tuple[str, str],
        receiver: tuple[str, str],
        when: datetime,
        control: int,
        usage: str,
    ) -> str:
        """The ISA, every field at its fixed width (106 characters with the terminator)."""
        if not 0 < control <= 999_999_999:
            raise ValueError(f"an interchange control number has 9 digits, not {control}")
        return self.element.join(
            (
                "ISA",
                "00",
                " " * 10,
                "00",
                " " * 10,
                _fixed(sender[0], 2),
                _fixed(sender[1], 15),
                _fixed(receiver[0], 2),
                _fixed(receiver[1], 15),
                when.strftime("%y%m%d"),
                when.strftime("%H%M"),
                "U",
                "00401",
                f"{control:09d}",
                "0",
                usage,
                self.component,
            )
        )

    def iea(self, groups: int, control: int) -> str:
        return self.segment("IEA", str(groups), f"{control:09d}")

    def gs(
        self, code: str, sender: str, receiver: str, when: datetime, control: int, version: str
    ) -> str:
        return self.segment(
            "GS",
            code,
            sender,
            receiver,
            when.strftime("%Y%m%d"),
            when.strftime("%H%M"),
            str(control),
            "X",
            version,
        )

    def transaction_set(self, code: str, control: str, body: Sequence[str]) -> list[str]:
        """ST, the body, SE counting ST..SE inclusive."""
        return [
            self.element.join(("ST", code, control)),
            *body,
            self.element.join(("SE", str(len(body) + 2), control)),
        ]


def _fixed(value: str, width: int) -> str:
    """An ISA field: padded with spaces, cut at its width (the ISA is fixed-width)."""
    return value.ljust(width)[:width]
