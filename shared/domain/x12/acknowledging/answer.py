"""The 997 functional acknowledgement of a file that was read
(docs/architecture.md#edi-intake).

One 997 interchange answers each received interchange, sent back the way it
came: our ISA05/06 are its ISA07/08 and our ISA07/08 its ISA05/06 (each padded
to its fixed width), our GS02/GS03 its first group's GS03/GS02. ISA13 and GS06
are the control number the caller allocated; GS01 is ``FA`` and GS08 the first
received group's version (else the one its ISA12 names). ISA15 echoes the
partner's test/production flag. Delimiters are ours (``writer.py``).

Each received group gets one ST*997: AK1 (its GS01, GS06); for each set AK2
(ST01, ST02) and AK5 ``A``, or ``R`` with AK3/AK4 pointing at the segment
(position within the set, ST = 1, and its loop) and element at fault; then AK9
``A``, ``R`` or ``P`` (some sets rejected) with the sets included (GE01),
received and accepted. A problem at the ISA or IEA, or outside every group,
rejects the interchange in a TA1, and then every AK5 and AK9 of it is ``R``,
with 0 sets accepted: an interchange rejected is never acknowledged as
accepted (an unknown sender's TA1 ``R`` 006 among them). Codes: ``codes.py``.
What a 997 says is read back by ``summary.py``.

**What rejects a set.** A set is rejected when a problem that refuses the file
points into it, whatever the problem: a syntax error the reader found (bad
segment, counts, control numbers, duplicates, an unsupported ST01) and equally
a mapping refusal (``edi_total_mismatch``, ``edi_unmappable``,
``edi_unsupported_purpose``, ``edi_bad_number``, ``edi_mixed_kinds``). Nothing
of a refused file is stored, and a partner's translator learns what to correct
and send again from the 997 alone: an ``A`` for a set we refused would tell it
the invoice was delivered, and it would never come back. Sets that no problem
points into stay ``A`` (the group ``P``): they were well formed and can be sent
again as they are. "A 997 speaks of syntax only" is held to in what it never
reports: settlement outcomes (posted, disputed, dead-lettered), and a valid
810 skipped because it has no allowance to settle, so ``edi_no_documents``,
which points into no set, leaves every set ``A``.

A problem is placed by its file-wide ``segment`` position; one without a
position by its ``control_number`` (a set's ST02, else a group's GS06, else an
ISA13); one with neither rejects every interchange in a TA1.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from shared.domain.x12.acknowledging.codes import ISA_ELEMENT_NOTES, NOT_REJECTING, codes
from shared.domain.x12.acknowledging.loops import loop_id
from shared.domain.x12.model import (
    FunctionalGroup,
    Interchange,
    Problem,
    TransactionSet,
)
from shared.domain.x12.writer import Writer


@dataclass
class _Placed:
    """The rejecting problems of one interchange, by where they point."""

    interchange: list[Problem] = field(default_factory=list)
    groups: dict[int, list[Problem]] = field(default_factory=dict)
    sets: dict[tuple[int, int], list[Problem]] = field(default_factory=dict)


def acknowledge(
    interchanges: Sequence[Interchange],
    problems: Sequence[Problem],
    *,
    control_numbers: Sequence[int],
    now: datetime,
) -> bytes:
    """One 997 interchange per received one; ``control_numbers[i]`` is the ISA13
    and GS06 of the answer to ``interchanges[i]``. An aware ``now`` is written in UTC."""
    if len(control_numbers) != len(interchanges):
        raise ValueError("one control number per interchange")
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    placed = _place(interchanges, [p for p in problems if p.code not in NOT_REJECTING])
    return "".join(
        _answer(ic, found, number, now)
        for ic, found, number in zip(interchanges, placed, control_numbers, strict=True)
    ).encode("ascii")


def _place(interchanges: Sequence[Interchange], problems: list[Problem]) -> list[_Placed]:
    placed = [_Placed() for _ in interchanges]
    if not problems or not interchanges:
        return placed
    starts = [ic.isa.position for ic in interchanges]
    group_starts = [[g.gs.position for g in ic.groups] for ic in interchanges]
    set_starts: dict[tuple[int, int], list[int]] = {}
    for problem in problems:
        if problem.segment is None:
            _place_by_control_number(interchanges, placed, problem)
            continue
        at = problem.segment
        i = max(bisect_right(starts, at) - 1, 0)
        ic = interchanges[i]
        g = bisect_right(group_starts[i], at) - 1
        if not ic.isa.position < at < ic.iea.position or g < 0 or at > ic.groups[g].ge.position:
            placed[i].interchange.append(problem)
            continue
        group = ic.groups[g]
        if (i, g) not in set_starts:
            set_starts[i, g] = [ts.st.position for ts in group.sets]
        s = bisect_right(set_starts[i, g], at) - 1
        if s < 0 or at > group.sets[s].se.position:
            placed[i].groups.setdefault(g, []).append(problem)
        else:
            placed[i].sets.setdefault((g, s), []).append(problem)
    return placed


def _place_by_control_number(
    interchanges: Sequence[Interchange], placed: list[_Placed], problem: Problem
) -> None:
    number = (problem.control_number or "").strip()
    places = [
        (i, g, s)
        for i, ic in enumerate(interchanges)
        for g, group in enumerate(ic.groups)
        for s, ts in enumerate(group.sets)
        if number and ts.control_number.strip() == number
    ]
    if places:
        i, g, s = places[0]
        placed[i].sets.setdefault((g, s), []).append(problem)
        return
    for i, ic in enumerate(interchanges):
        for g, group in enumerate(ic.groups):
            if number and group.control_number.strip() == number:
                placed[i].groups.setdefault(g, []).append(problem)
                return
    owners = [i for i, ic in enumerate(interchanges) if number and ic.control_number == number]
    for i in owners or range(len(interchanges)):
        placed[i].interchange.append(problem)


def _answer(ic: Interchange, placed: _Placed, number: int, now: datetime) -> str:
    first = ic.groups[0].gs if ic.groups else None
    gs_sender = (first.get(3).strip() if first else "") or ic.receiver_id
    gs_receiver = (first.get(2).strip() if first else "") or ic.sender_id
    echoed = [ic.sender_qualifier, ic.sender_id, ic.receiver_qualifier, ic.receiver_id]
    echoed += [gs_sender, gs_receiver, ic.isa.get(13), ic.isa.get(9), ic.isa.get(10)]
    echoed += [v for g in ic.groups for v in (g.code, g.control_number, g.gs.get(8))]
    # ST01 and ST02 of every set, read once: a 60 MB file has 100,000 of them (and
    # a read set keeps both, but makes its ST anew on each ask).
    headers = [[(ts.code.strip(), ts.control_number.strip()) for ts in g.sets] for g in ic.groups]
    echoed.append("".join("".join(h) for sets in headers for h in sets))
    w = Writer.avoiding(echoed)
    c = w.clean
    usage = ic.isa.get(15).strip()
    segments = [
        w.isa(
            sender=(c(ic.receiver_qualifier), c(ic.receiver_id)),
            receiver=(c(ic.sender_qualifier), c(ic.sender_id)),
            when=now,
            control=number,
            usage=usage if usage in ("P", "T") else "P",
        )
    ]
    if placed.interchange:
        segments.append(_ta1(w, ic, placed.interchange[0]))
    segments.append(w.gs("FA", c(gs_sender), c(gs_receiver), now, number, _version(ic)))
    ak2 = _ak2s(w)
    for g, group in enumerate(ic.groups):
        body = _group_body(
            w,
            group,
            headers[g],
            ak2,
            placed.groups.get(g, []),
            placed.sets.get,
            g,
            rejected=bool(placed.interchange),
        )
        segments += w.transaction_set("997", f"{g + 1:04d}", body)
    segments.append(w.segment("GE", str(len(ic.groups)), str(number)))
    segments.append(w.iea(1, number))
    return w.text(segments)


def _version(ic: Interchange) -> str:
    for group in ic.groups:
        version = group.gs.get(8).strip()
        if version.isascii() and version.isalnum() and len(version) <= 12:  # GS08 is AN 1/12
            return version
    isa12 = ic.isa.get(12).strip()
    return isa12 + "0" if isa12.isdigit() and len(isa12) == 5 else "004010"


def _ta1(w: Writer, ic: Interchange, problem: Problem) -> str:
    note = codes(problem.code).interchange
    on_isa = problem.segment == ic.isa.position or problem.tag == "ISA"
    if on_isa and problem.element in ISA_ELEMENT_NOTES:
        note = ISA_ELEMENT_NOTES[problem.element]
    isa = [w.clean(ic.isa.get(n).strip()) for n in (13, 9, 10)]
    return w.segment("TA1", *isa, "R", note)


def _group_body(
    w: Writer,
    group: FunctionalGroup,
    headers: list[tuple[str, str]],
    ak2: Callable[[tuple[str, str]], str],
    group_problems: list[Problem],
    set_problems: Callable[[tuple[int, int]], list[Problem] | None],
    g: int,
    *,
    rejected: bool = False,  # its interchange is (a TA1 R): so is the group
) -> list[str]:
    c = w.clean
    body = [w.segment("AK1", c(group.code.strip()), c(group.control_number.strip()))]
    accepted = 0
    # A set of a rejected interchange is rejected however well formed: the TA1
    # says why (AK502 has no code for it), and an AK5 A beside it would tell a
    # translator that reads the sets that they went through.
    ak5_unfaulted = w.segment("AK5", "R") if rejected else w.segment("AK5", "A")
    for s, (ts, header) in enumerate(zip(group.sets, headers, strict=True)):
        body.append(ak2(header))
        problems = set_problems((g, s))
        if not problems:
            body.append(ak5_unfaulted)
            accepted += 0 if rejected else 1
            continue
        notes: list[str] = []
        for problem in problems:
            if problem.segment in (None, ts.st.position, ts.se.position):
                notes.append(codes(problem.code).set)
            else:
                body += _segment_notes(w, ts, problem)
                notes.append("5")
        body.append(w.segment("AK5", "R", *_first_five(notes)))
    received = len(group.sets)
    status = "A" if accepted == received else "R" if accepted == 0 else "P"
    if group_problems or rejected:
        status = "R"
    notes = [n for p in group_problems if (n := codes(p.code).group) is not None]
    ge01 = group.ge.get(1).strip()
    included = ge01 if ge01.isdigit() and len(ge01) <= 6 else str(received)
    body.append(
        w.segment("AK9", status, included, str(received), str(accepted), *_first_five(notes))
    )
    return body


def _ak2s(w: Writer) -> Callable[[tuple[str, str]], str]:
    """AK2 by (ST01, ST02), each written once: groups repeat the same ST02s."""
    made: dict[tuple[str, str], str] = {}

    def ak2(header: tuple[str, str]) -> str:
        segment = made.get(header)
        if segment is None:
            segment = made[header] = w.segment("AK2", w.clean(header[0]), w.clean(header[1]))
        return segment

    return ak2


def _segment_notes(w: Writer, ts: TransactionSet, problem: Problem) -> list[str]:
    """AK3 (+ AK4) for a problem in a data segment of ``ts``."""
    assert problem.segment is not None
    index = problem.segment - ts.st.position  # ST is 0; AK302 counts it as 1
    segments = ts.segments
    if not (0 <= index < len(segments) and segments[index].position == problem.segment):
        found = [k for k, s in enumerate(segments) if s.position == problem.segment]
        index = found[0] if found else index
    segment = segments[index] if 0 <= index < len(segments) else None
    tag = problem.tag or (segment.tag if segment else "")
    loop = loop_id(ts.code, segments, index) if segment else ""
    position = str(problem.segment - ts.st.position + 1)
    note = codes(problem.code)
    ak3 = [w.clean(tag.strip()[:3]), position, loop]
    if not problem.element or problem.element < 1:
        return [w.segment("AK3", *ak3, note.segment)]
    value = segment.get(problem.element) if segment else ""
    element_note = "1" if value.strip() == "" else note.element
    return [
        w.segment("AK3", *ak3, "8"),
        w.segment("AK4", str(min(problem.element, 99)), "", element_note),
    ]


def _first_five(notes: list[str]) -> list[str]:
    """Distinct codes in order, at most five (AK502..AK506, AK905..AK909)."""
    return list(dict.fromkeys(notes))[:5]
