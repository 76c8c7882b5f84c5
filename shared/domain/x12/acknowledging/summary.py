"""What a 997 says, read back from the 997 itself (docs/api.md#acknowledgements):
the one place the CLI's heading and a partner's page take their figures from,
so that neither can say other than the file the partner's translator reads.

A set is accepted when its AK5 is ``A``, its group's AK9 is ``A`` or ``P``
(a group rejected whole accepts none of its sets, whatever their AK5s), and
no TA1 ``R`` rejects its interchange.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AckSummary:
    """The sets a 997 answers (its AK5s) and those it accepts."""

    sets: int
    accepted: int
    interchange_rejected: bool  # a TA1 R in one of its interchanges

    @property
    def rejected(self) -> int:
        return self.sets - self.accepted

    def heading(self) -> str:
        """What the 997 says, in a few words: the heading it is printed under."""
        if self.interchange_rejected:
            return "997 rejecting the interchange"
        if not self.sets:
            return "997 acknowledgement"
        if self.rejected:
            return f"997 rejecting {self.rejected} of {self.sets} set(s)"
        return f"997 accepting all {self.sets} set(s)"


def summarize(ack: str | bytes, sender: tuple[str, str] | None = None) -> AckSummary | None:
    """What ``ack`` (a 997 file of one or more interchanges) says; None when it
    is no X12 this can read. With ``sender`` (ISA05, ISA06 of the file it
    answers), only the interchanges answering that sender's are counted: a
    997 goes back to them, so they are its ISA07/ISA08. Delimiters are the
    ISA's: the 4th character separates elements, the one after ISA16 ends
    segments."""
    text = ack.decode("utf-8", errors="replace") if isinstance(ack, bytes) else ack
    text = text.strip()
    isa = text.split(text[3:4] or "*", 16) if text.startswith("ISA") else []
    if len(isa) < 17 or len(isa[16]) < 2:
        return None
    element, terminator = text[3], isa[16][1]
    sets = accepted = 0
    rejected_interchange = False
    counted = True  # whether the current interchange answers ``sender``
    in_rejected = False  # a TA1 R rejects the current interchange
    group: list[str] = []  # the AK5 codes of the current group
    for raw in text.split(terminator):
        seg = raw.strip().split(element)
        tag = seg[0]
        if tag == "ISA":
            counted = sender is None or (
                len(seg) > 8 and (seg[7].strip(), seg[8].strip()) == sender
            )
            in_rejected = False
        elif not counted:
            continue
        elif tag == "TA1" and seg[4:5] == ["R"]:
            in_rejected = rejected_interchange = True
        elif tag == "AK1":
            group = []
        elif tag == "AK5":
            group.append(seg[1] if len(seg) > 1 else "")
        elif tag == "AK9":
            status = seg[1] if len(seg) > 1 else ""
            sets += len(group)
            if status in ("A", "P", "E") and not in_rejected:
                accepted += sum(1 for code in group if code in ("A", "E"))
            group = []
    return AckSummary(sets, accepted, rejected_interchange)
