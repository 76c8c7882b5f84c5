"""An X12 file refused for its content (docs/api.md#edi-intake): 422 with its
problems and, when the envelopes could be read, the 997 rejecting it.

The 997's control numbers are allocated as an accepted file's are (they must
increase whatever the answer was); nothing else is stored.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from functools import partial

from services.api.context import ApiContext
from services.api.errors import ApiError
from services.tuning.gcpause import collector_paused
from shared.adapters.db.edi.partners import Refusal
from shared.adapters.db.edi.store import allocate_control_numbers
from shared.domain.x12 import EdiRefused, Interchange, Problem
from shared.domain.x12.acknowledging.answer import acknowledge
from shared.domain.x12.acknowledging.summary import summarize

MAX_DETAILS = 100  # problems in the 422's details; the 997 has every one


def write_997(
    ctx: ApiContext, interchanges: tuple[Interchange, ...], problems: list[Problem]
) -> bytes:
    """The 997 answering ``interchanges``, numbered from the database's sequence."""
    return _997(interchanges, problems, allocate_control_numbers(ctx.engine, len(interchanges)))


def preview_997(interchanges: tuple[Interchange, ...], problems: list[Problem]) -> bytes:
    """The 997 a submission would send, numbered 1, 2, ... in place of the
    control numbers a submission allocates (docs/api.md#previewing-a-batch):
    a preview takes none from the sequence."""
    return _997(interchanges, problems, list(range(1, len(interchanges) + 1)))


def _997(
    interchanges: tuple[Interchange, ...], problems: list[Problem], numbers: list[int]
) -> bytes:
    with collector_paused():  # two segments a set, freed by reference counting
        return acknowledge(
            interchanges, problems, control_numbers=numbers, now=dt.datetime.now(dt.UTC)
        )


def text_of(ack: bytes) -> str:
    """A 997 is ASCII as written; a partner's id echoed in it might not be."""
    return ack.decode("utf-8", errors="replace")


def refusal(
    ctx: ApiContext,
    refused: EdiRefused,
    acknowledge: bool = True,
    write: Callable[[tuple[Interchange, ...], list[Problem]], bytes] | None = None,
) -> ApiError:
    """The 422; without its 997 when the partner's profile asks for none
    (``acknowledge`` false: the details still say what is wrong). ``write``
    writes the 997 (by default ``write_997``; a preview's numbers none)."""
    problems = refused.problems
    ack = None
    if refused.interchanges and acknowledge:
        write = write or partial(write_997, ctx)
        ack = text_of(write(refused.interchanges, problems))
    message = problems[0].message
    if len(problems) > 1:
        message = f"{message} (and {len(problems) - 1} more problem(s))"
    return ApiError(
        422,
        refused.code,
        message,
        [p.detail() for p in problems[:MAX_DETAILS]],
        extra={"acknowledgement": ack},
    )


def kept(refused: EdiRefused, key_id: str, file_sha256: str, error: ApiError) -> list[Refusal]:
    """What each sender's health keeps of a refused file (none when its envelope
    could not be read: no sender to keep it for): one per sender of its
    interchanges, with its message, the 997 it carried, and that sender's sets
    as that 997 counts them (``ack_summary``), or as the 997 the partner's
    profile asked not to send would have."""
    if not refused.interchanges:
        return []
    sent = error.extra.get("acknowledgement") if error.extra else None
    ack = sent.encode("utf-8") if sent is not None else None
    counted = ack
    if counted is None:  # the 997 not sent, written to be read only
        counted = acknowledge(
            refused.interchanges,
            refused.problems,
            control_numbers=[1] * len(refused.interchanges),
            now=dt.datetime.now(dt.UTC),
        )
    senders = dict.fromkeys((ic.sender_qualifier, ic.sender_id) for ic in refused.interchanges)
    found = []
    for qualifier, sender_id in senders:
        summary = summarize(counted, (qualifier, sender_id))
        sets = sum(
            len(g.sets)
            for ic in refused.interchanges
            if (ic.sender_qualifier, ic.sender_id) == (qualifier, sender_id)
            for g in ic.groups
        )
        found.append(
            Refusal(
                qualifier=qualifier,
                sender_id=sender_id,
                key_id=key_id,
                code=refused.code,
                codes=tuple(p.code for p in refused.problems),
                sets=sets,
                # A refused file settles none of its sets; these are those its 997 rejects.
                sets_at_fault=(
                    sets if summary is None or not summary.sets else min(summary.rejected, sets)
                ),
                file_sha256=file_sha256,
                message=error.message,
                acknowledgement=ack,
            )
        )
    return found
