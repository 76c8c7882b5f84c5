"""A transaction set to map, with the envelopes around it and the submission's query."""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from shared.domain.x12.model import FunctionalGroup, Interchange, TransactionSet
from shared.domain.x12.reading.lazy import raw_bytes


@dataclass(frozen=True, slots=True)
class Query:
    """What the submission's query says: it wins over what the file says."""

    contract_version: int
    partition_key: str | None
    period: str | None
    # A file whose interchanges settle at different senders' profiles: each
    # sender's (ISA05, ISA06) own query; a sender not named settles at this one.
    senders: Mapping[tuple[str, str], Query] | None = field(default=None, compare=False)

    def at(self, interchange: Interchange) -> Query:
        """The query an interchange's sets settle at (its sender's)."""
        if self.senders is None:
            return self
        return self.senders.get((interchange.sender_qualifier, interchange.sender_id), self)


class Place(NamedTuple):
    """A set and its envelopes. A tuple: made once per set, it is far cheaper than a frozen
    dataclass (whose fields are set through object.__setattr__)."""

    interchange: Interchange
    group: FunctionalGroup
    transaction_set: TransactionSet
    prefix: str | None = None  # correlation_prefix(interchange, group), when known

    @property
    def code(self) -> str:
        return self.transaction_set.code.strip()

    @property
    def control_number(self) -> str:
        return self.transaction_set.control_number.strip()

    def correlation_id(self) -> str:
        """``x12:<ISA06>:<ISA13>:<GS06>:<ST02>``, the sender id trimmed."""
        prefix = self.prefix
        if prefix is None:
            prefix = correlation_prefix(self.interchange, self.group)
        return prefix + self.control_number

    def raw_payload(self) -> str:
        """Base64 of the set's bytes as sent, from its ST tag through SE's terminator
        (``shared.domain.x12.reading.lazy.raw_bytes``); for a set built in memory, its segments
        written with the interchange's delimiters."""
        raw = raw_bytes(self.transaction_set)
        if raw is None:
            delimiters = self.interchange.delimiters
            element, end = delimiters.element, delimiters.segment
            raw = "".join(
                element.join((segment.tag, *segment.elements)) + end
                for segment in self.transaction_set.segments
            ).encode("utf-8")
        return binascii.b2a_base64(raw, newline=False).decode("ascii")


def correlation_prefix(interchange: Interchange, group: FunctionalGroup) -> str:
    """What the correlation ids of a group's sets share: ``x12:<ISA06>:<ISA13>:<GS06>:``."""
    group_number = group.control_number.strip()
    return f"x12:{interchange.sender_id}:{interchange.control_number}:{group_number}:"
