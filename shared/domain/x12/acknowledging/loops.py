"""Which loop of its transaction set a segment sits in: a 997's AK303.

The loop ids are those of the 4010 set tables: the 210 numbers its loops
(0100 N1, 0200 N7, 0300 S5, 0400 LX), the 810 names them after their first
segment. A loop nested in the 210's LX is reported as the LX's 0400 (its inner
ids vary between releases); a segment a table does not list ends its loop, so
an unknown segment is reported in none rather than in a wrong one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.domain.x12.model import Segment


@dataclass(frozen=True, slots=True)
class Loop:
    opener: str
    id: str
    members: frozenset[str]
    inner: tuple[Loop, ...] = ()


def _loop(opener: str, id: str, members: str, *inner: Loop) -> Loop:
    return Loop(opener, id, frozenset(members.split()) | {opener}, inner)


_N1_210 = "N2 N3 N4 N5 N9"
TABLES: dict[str, tuple[Loop, ...]] = {
    "210": (
        _loop("N1", "0100", _N1_210),
        _loop("N7", "0200", "M7 N5"),
        _loop("S5", "0300", f"G62 H1 H2 L0 L5 PLD NTE N1 {_N1_210}"),
        _loop("LX", "0400", f"POD L5 H1 H2 L0 L1 L4 L7 K1 N7 M7 N1 {_N1_210}"),
    ),
    "810": (
        _loop("N1", "N1", "N2 N3 N4 REF PER DMG"),
        _loop("N9", "N9", "MSG"),
        _loop(
            "IT1",
            "IT1",
            "CRC QTY CUR IT3 TXI CTP PAM MEA PWK PKG PO4 ITD REF YNQ PER SDQ DTM CAD L7 SR",
            _loop("PID", "PID", "MEA"),
            _loop("SAC", "SAC", "TXI"),
            _loop("SLN", "SLN", "DTM REF PID SAC TC2 TXI"),
            _loop("N1", "N1", "N2 N3 N4 REF PER DMG"),
        ),
        _loop("SAC", "SAC", "TXI"),
        _loop("ISS", "ISS", "PID"),
    ),
}


def loop_id(code: str, segments: Sequence[Segment], index: int) -> str:
    """The innermost loop holding ``segments[index]`` of a set (ST is index 0), or ""."""
    table = TABLES.get(code)
    if table is None:
        return ""
    stack: list[Loop] = []
    for segment in segments[1 : index + 1]:
        _step(stack, table, segment.tag)
    return stack[-1].id if stack else ""


def _step(stack: list[Loop], table: tuple[Loop, ...], tag: str) -> None:
    while stack:
        top = stack[-1]
        child = next((loop for loop in top.inner if loop.opener == tag), None)
        if child is not None:
            stack.append(child)
            return
        if tag in top.members:  # the loop goes on (its opener again: its next iteration)
            return
        stack.pop()
    opened = next((loop for loop in table if loop.opener == tag), None)
    if opened is not None:
        stack.append(opened)
