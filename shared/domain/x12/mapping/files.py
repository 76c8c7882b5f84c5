"""``map_file``: a file's interchanges into one batch of one kind
(docs/architecture.md#edi-intake).

Each ST..SE is one document of the kind whose ``x12_set`` its set is (the
registry's, ``shared.domain.kinds``): a 210 by ``freight_210``, an 810 by
``invoice_810`` (``MAPPERS``). The documents are the JSON-ready dicts
the kind's document model takes, and each value is checked against the
model's limits where it is read (``numbers.SetValues``), so the problem names
the segment and element at fault; tests validate every mapped document with
the model, which is dear next to the mapping, so it is not run again here.

``map_stream`` yields them one at a time, so that the front door turns each
into its chunk's bytes before the next is made: a 100,000-set file's
documents are never all held at once (180 MiB of dicts). ``map_file`` is the
same, collected.

A 210 of a kind with ``x12_fast_path`` that ``freight_fast`` maps comes as its
JSON bytes (a ``FastLine``, ``MappedStream.entries``), which the front door
stores as they are: valid for the kind's model by construction, so not decoded
again to be screened.
``documents`` (and so ``map_file``) decodes them into the same dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from shared.domain.kinds import KINDS
from shared.domain.kinds.base import Kind
from shared.domain.x12.mapping.freight_210.document import map_210
from shared.domain.x12.mapping.freight_210.fast import FastLine, fast_210_line
from shared.domain.x12.mapping.invoice_810 import map_810
from shared.domain.x12.mapping.sets import Place, Query, correlation_prefix
from shared.domain.x12.model import (
    EdiRefused,
    Interchange,
    Mapped,
    Problem,
    Skipped,
    TransactionSet,
)
from shared.domain.x12.problems import Problems
from shared.domain.x12.reading.lazy import lazy_bytes
from shared.domain.x12.reading.pages import Behind

# A 210's fast-path answer, for each place in order: its ``FastLine``, or None where
# ``fast_210_line`` does not vouch for it (``MappedStream.entries_answered``).
Answers = Callable[[Iterator[Place]], Iterator["tuple[Place, FastLine | None]"]]
Entries = Generator["dict[str, Any] | FastLine", None, None]
Mapper = Callable[[Place, Query, Problems], "dict[str, Any] | FastLine | Skipped | None"]
_decode = msgspec.json.Decoder().decode
_STEP = 1024  # sets mapped between two looks at the file's pages (``_Behind``)


def _freight(place: Place, query: Query, problems: Problems) -> dict[str, Any] | FastLine | None:
    fast = fast_210_line(place, query)
    return map_210(place, query, problems) if fast is None else fast


# How each transaction set is read. Which kind its documents are is the kind's
# say (``Kind.x12_set``): ``kinds_by_set``.
MAPPERS: dict[str, Mapper] = {"210": _freight, "810": map_810}


def kinds_by_set() -> dict[str, Kind[Any, Any]]:
    """The registered kinds partners send as X12, by their set, if it is read here."""
    return {k.x12_set: k for k in KINDS.values() if k.x12_set is not None and k.x12_set in MAPPERS}


@dataclass
class MappedStream:
    """A file's documents as they are mapped. ``documents`` raises
    ``EdiRefused(problems, interchanges)`` once exhausted if any set was refused
    (or none gave a document): the file is refused whole, so a consumer stores
    nothing before it has run to the end."""

    kind: str
    interchanges: tuple[Interchange, ...]
    query: Query
    skipped: list[Skipped] = field(default_factory=list)
    problems: Problems = field(default_factory=Problems)

    @property
    def documents(self) -> Iterator[dict[str, Any]]:
        for entry in self._entries():
            yield _decode(entry.json) if isinstance(entry, FastLine) else entry

    @property
    def entries(self) -> Entries:
        """``documents``, with a document of the 210 fast path as its ``FastLine``: its
        JSON bytes, valid for its kind's model by construction (``freight_fast``)."""
        return self._entries()

    def _entries(self) -> Entries:
        problems, skipped = self.problems, self.skipped
        mapped_any = False
        # The file is of one kind (map_stream refused it otherwise): one mapper for its
        # sets, and for 210s the fast path first (as ``_freight``, without its call).
        fast = self._fast_path()
        mapper = map_210 if fast else self._mapper()
        behind = _Behind()
        # Each set's correlation id starts with its group's: made once, not per set.
        for interchange in self.interchanges:
            query = self.query.at(interchange)  # its sender's, when senders differ
            for group in interchange.groups:
                prefix = correlation_prefix(interchange, group)
                for transaction_set in _letting_go(group.sets, behind):
                    place = Place(interchange, group, transaction_set, prefix)
                    line = fast_210_line(place, query) if fast else None
                    if line is not None:
                        mapped_any = True
                        yield line
                        continue
                    mapped = (mapper or MAPPERS[place.code])(place, query, problems)
                    if isinstance(mapped, Skipped):
                        skipped.append(mapped)
                    elif mapped is not None:
                        mapped_any = True
                        yield mapped
        behind.finished()
        self._refuse(mapped_any)

    def _fast_path(self) -> bool:
        kind = KINDS.get(self.kind)
        return kind is not None and kind.x12_fast_path

    def _mapper(self) -> Mapper | None:
        kind = KINDS.get(self.kind)
        return None if kind is None or kind.x12_set is None else MAPPERS.get(kind.x12_set)

    def set_count(self) -> int:
        """How many sets the file holds."""
        return sum(len(g.sets) for ic in self.interchanges for g in ic.groups)

    def places(self, spans: Iterable[tuple[int, int]] | None = None) -> Iterator[Place]:
        """The file's sets in order, each with its envelopes; with ``spans`` (sorted,
        disjoint ``(start, stop)`` set indices) only those. A skipped set is not even
        touched (its object's reference count is left alone), so a mapper in a forked
        process copies no page of the sets it does not map."""
        wanted = iter(((0, 1 << 62),) if spans is None else spans)
        span = next(wanted, None)
        behind = _Behind()
        try:
            yield from self._places(wanted, span, behind)
        finally:
            behind.finished()

    def _places(
        self, wanted: Iterator[tuple[int, int]], span: tuple[int, int] | None, behind: _Behind
    ) -> Iterator[Place]:
        at = 0
        for interchange in self.interchanges:
            for group in interchange.groups:
                if span is None:
                    return
                sets = group.sets
                end = at + len(sets)
                prefix = None
                while span is not None and span[0] < end:
                    low, high = max(span[0], at), min(span[1], end)
                    if low < high:
                        if prefix is None:
                            prefix = correlation_prefix(interchange, group)
                        for transaction_set in _letting_go(sets[low - at : high - at], behind):
                            yield Place(interchange, group, transaction_set, prefix)
                    if span[1] > end:
                        break  # it goes on in the next group
                    span = next(wanted, None)
                at = end

    def entries_answered(self, answers: Answers) -> Entries:
        """``entries`` of a 210 file whose fast-path answers ``answers`` gives: one
        ``(place, FastLine | None)`` for each place of ``places()``, in order, as
        ``fast_210_line`` answers (services/api/edi/parallel/parent.py has another process
        answer some). A None is mapped here by ``map_210``, so the documents, the
        problems, their order and the skipped sets are those of ``entries``."""
        if not self._fast_path():
            yield from self._entries()
            return
        problems, query = self.problems, self.query
        mapped_any = False
        for place, line in answers(self.places()):
            if line is not None:
                mapped_any = True
                yield line
                continue
            mapped = map_210(place, query, problems)
            if mapped is not None:
                mapped_any = True
                yield mapped
        self._refuse(mapped_any)

    def _refuse(self, mapped_any: bool) -> None:
        """The file's refusal, once all its sets are mapped, if any."""
        problems, skipped = self.problems, self.skipped
        if problems:
            raise EdiRefused(problems.in_order(), self.interchanges)
        if not mapped_any:
            plural = "" if len(skipped) == 1 else "s"
            why = f"{len(skipped)} invoice{plural} without an allowance" if skipped else "no set"
            problem = Problem("edi_no_documents", f"nothing to settle: {why}")
            raise EdiRefused([problem], self.interchanges)


class _Behind:
    """A pass over the sets' file in order, letting its pages go a window behind
    the set it is at (``shared.domain.x12.reading.pages``): each interchange's sets are
    read from its own text."""

    __slots__ = ("behind", "buf")

    def __init__(self) -> None:
        self.buf: object = None
        self.behind = Behind(b"")

    def at(self, transaction_set: TransactionSet) -> None:
        found = lazy_bytes(transaction_set)
        if found is None:
            return
        text, start, _ = found
        if text.buf is not self.buf:
            self.buf, self.behind = text.buf, Behind(text.buf)
        self.behind.passed(start)

    def finished(self) -> None:
        if self.buf is not None:
            self.behind.finished(len(self.buf))  # type: ignore[arg-type]


def _letting_go(sets: Sequence[TransactionSet], behind: _Behind) -> Iterator[TransactionSet]:
    """``sets`` in order, looking every ``_STEP`` sets at how far the pass is."""
    for low in range(0, len(sets), _STEP):
        behind.at(sets[low])
        yield from sets[low : low + _STEP]


def map_stream(
    interchanges: Sequence[Interchange],
    *,
    contract_version: int,
    partition_key: str | None,
    period: str | None,
    senders: Mapping[tuple[str, str], Query] | None = None,
) -> MappedStream:
    """The file's kind, checked before any set is mapped (``EdiRefused`` for a set of
    no kind or a file of two), and its documents to come.

    ``partition_key`` and ``period`` (810s) win over what the file says; with
    ``senders``, an interchange of a sender named there settles at its own.
    """
    interchanges = tuple(interchanges)
    problems = Problems()
    kind = _one_kind(interchanges, kinds_by_set(), problems)
    if problems:
        raise EdiRefused(problems.in_order(), interchanges)
    query = Query(contract_version, partition_key, period, senders)
    return MappedStream(kind or "", interchanges, query)


def map_file(
    interchanges: Sequence[Interchange],
    *,
    contract_version: int,
    partition_key: str | None,
    period: str | None,
) -> Mapped:
    """One batch of documents, or ``EdiRefused(problems, interchanges)``."""
    stream = map_stream(
        interchanges, contract_version=contract_version, partition_key=partition_key, period=period
    )
    documents = list(stream.documents)
    return Mapped(stream.kind, documents, stream.skipped, stream.interchanges)


def _one_kind(
    interchanges: tuple[Interchange, ...], kinds: Mapping[str, Kind[Any, Any]], problems: Problems
) -> str | None:
    """The file's kind (of ``kinds``, by set); a problem for each set of no kind,
    and for a file of two."""
    kind: str | None = None
    mixed = False
    for interchange in interchanges:
        for group in interchange.groups:
            for transaction_set in group.sets:
                # ST01 without the ST: a read set makes its ST anew on each ask.
                code = transaction_set.code.strip()
                if code not in kinds:
                    problems.at(
                        "edi_unsupported_transaction_set",
                        f"transaction set {code[:10]!r}: only 210 (freight invoices) and 810 "
                        "(invoices) are settled",
                        transaction_set.st,
                        1,
                        transaction_set.control_number.strip(),
                    )
                    continue
                if kind is None:
                    kind = kinds[code].name
                elif kinds[code].name != kind and not mixed:
                    mixed = True
                    problems.at(
                        "edi_mixed_kinds",
                        f"a {code} after sets of {kind}: one file is one batch of one kind",
                        transaction_set.st,
                        1,
                        transaction_set.control_number.strip(),
                    )
    return kind
