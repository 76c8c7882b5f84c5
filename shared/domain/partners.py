"""Trading partners (docs/api.md#trading-partners): an X12 sender, named by
its interchange sender id qualifier and id (ISA05, ISA06), and what its files
settle against when they name nothing themselves. Pure: the rules a profile
and a sender's name follow."""

from __future__ import annotations

import re
from typing import Literal

Acknowledge = Literal["always", "errors_only", "never"]
ACKNOWLEDGE: tuple[Acknowledge, ...] = ("always", "errors_only", "never")

# ISA05 is two characters (01, ZZ, 12, ...), upper case as X12 writes its
# codes: a lower-case one would never match a file's; ISA06 fifteen,
# space-padded: a sender is known by it trimmed. The characters X12's basic and
# extended sets allow, without the separators a partner could not send inside
# an element.
_QUALIFIER = re.compile(r"[A-Z0-9]{2}")
_SENDER_ID = re.compile(r"[A-Za-z0-9!&()+,\-./:;?=%@\[\]_{}\\|<>#$ ']{1,15}")


def sender_problem(qualifier: str, sender_id: str) -> str | None:
    """Why (``qualifier``, ``sender_id``) cannot be an ISA05/ISA06, or None."""
    if not _QUALIFIER.fullmatch(qualifier):
        return (
            "an interchange sender qualifier (ISA05) is 2 upper-case letters or digits,"
            " as X12 writes it, e.g. ZZ or 02"
        )
    if sender_id != sender_id.strip() or not _SENDER_ID.fullmatch(sender_id):
        return (
            "an interchange sender id (ISA06) is 1-15 characters of X12's character set,"
            " without its padding spaces"
        )
    return None
