"""Collecting a file's problems: every one up to a bound, in file order."""

from __future__ import annotations

from shared.domain.x12.model import Problem, Segment

MAX_PROBLEMS = 100  # a 422's details and a 997's AK3/AK4 stay readable


class Problems:
    """The problems found so far; ``fatal`` once the envelopes cannot be trusted."""

    def __init__(self, limit: int = MAX_PROBLEMS) -> None:
        self.items: list[Problem] = []
        self.fatal = False
        self.limit = limit

    def __bool__(self) -> bool:
        return bool(self.items)

    @property
    def room(self) -> int:
        return self.limit - len(self.items)

    def add(self, problem: Problem, *, fatal: bool = False) -> None:
        self.fatal = self.fatal or fatal
        if len(self.items) < self.limit:
            self.items.append(problem)

    def extend(self, problems: list[Problem], *, fatal: bool = False) -> None:
        for problem in problems:
            self.add(problem, fatal=fatal)

    def at(
        self,
        code: str,
        message: str,
        segment: Segment,
        element: int | None = None,
        control: str | None = None,
        *,
        fatal: bool = False,
    ) -> None:
        """A problem with ``segment`` (and one of its elements)."""
        self.add(
            Problem(code, message, segment.position, segment.tag, element, control), fatal=fatal
        )

    def in_order(self) -> list[Problem]:
        """By position in the file (problems of no segment last), else as found."""
        return sorted(self.items, key=lambda p: p.segment if p.segment is not None else 1 << 62)

    def count(self, segment: Segment, actual: int, what: str, number: str) -> None:
        """Element 1 of SE, GE or IEA: the count of what it closes."""
        sent = segment.get(1).strip()
        if not (sent.isdigit() and sent.isascii() and len(sent) <= 18):
            self.at("edi_syntax", f"{segment.tag}01 {sent[:20]!r} is not a count", segment, 1)
        elif int(sent) != actual:
            self.at(
                "edi_count_mismatch",
                f"{segment.tag}01 says {int(sent)}; there are {actual} {what}",
                segment,
                1,
                number,
            )
