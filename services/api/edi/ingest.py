"""An ``application/edi-x12`` body (docs/api.md#edi-intake): one partner file,
read whole once received, then one batch of one kind.

The file's bytes are only spooled while they stream in (and hashed and signed as
any body; ``edi/spool/file.py``); ``read`` reads them with ``read_file`` (what a repeat is
known by: its interchanges), then ``finish`` maps them with ``map_stream``
(pure, ``shared/domain/x12``), taking each mapped document as it comes as an
NDJSON line would be taken: screened or validated by its kind's model, its
partition checked against the key's, its JSON bytes added to the chunk being
built, and each chunk, once closed, handed to the job's store
(``services/api/intake/job_store.py``; ``services/api/submission.py::submit_file``
commits it). So an invoice sent as X12 is stored, keyed and settled as the
same invoice sent as JSON. Anything refused about the file's content is
``EdiRefused``: the route answers it 422 with the 997 (``edi/refusal.py``).
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, cast

import msgspec

from services.api.edi.parallel import parent as edi_parallel
from services.api.edi.query import EdiQuery, query_applies
from services.api.edi.spool.file import Spool
from services.api.errors import ApiError
from services.api.intake.ingest import Ingest, Ingested
from services.tuning.gcpause import collector_paused
from shared.adapters.db.edi.partners import Partner
from shared.adapters.db.edi.store import Sender
from shared.domain.kinds import KINDS
from shared.domain.kinds.base import Kind
from shared.domain.kinds.screen import screen
from shared.domain.pipeline.chunking import NewChunk
from shared.domain.x12 import EdiRefused, Interchange, Problem, Skipped, TransactionSet
from shared.domain.x12.mapping.files import MappedStream, map_stream
from shared.domain.x12.mapping.freight_210.fast import FastLine
from shared.domain.x12.mapping.sets import Query
from shared.domain.x12.reading.envelope import sender_of
from shared.domain.x12.reading.reader import read_file

# What edi_interchanges can hold (edi/tables.py); a real ISA has 2, 15 and 9.
_MAX_QUALIFIER, _MAX_SENDER, _MAX_CONTROL = 8, 128, 32
_MAX_DETAILS = 100  # problems listed in a 422 (the 997 holds them all)
_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True)
class EdiIntake:
    """What an accepted file's job stores besides its chunks."""

    senders: list[Sender]  # its interchanges' names
    skipped: list[Skipped]
    file_sha256: str  # of the bytes as received: the default Idempotency-Key
    acknowledgement: bytes | None  # its 997, every set accepted; none if its profile says so


@dataclass(frozen=True)
class EdiFile:
    """A file once read, before it is mapped: what a repeat of it is known by."""

    senders: list[Sender]  # its interchanges' names
    file_sha256: str  # of the bytes as received: the default Idempotency-Key
    submission_sha256: str  # of the bytes and the query: what a repeat must match
    # What a job accepted before migration 0024 was known by: the bytes and the
    # query as the first sender's profile completed it (None: the same).
    earlier_sha256: str | None = None

    def repeats(self, body_sha256: str) -> bool:
        """Whether a job stored with ``body_sha256`` took this very submission."""
        return body_sha256 in (self.submission_sha256, self.earlier_sha256)


class ChunkStore(Protocol):
    """Where a file's chunks go as they are closed (services/api/intake/job_store.py)."""

    def begin(self, kind: str) -> None: ...

    def put(self, chunk: NewChunk) -> None: ...


# Writes the 997 answering interchanges (with these problems): the database
# allocates its control numbers (services/api/edi/refusal.py::write_997).
Acknowledge = Callable[[tuple[Interchange, ...], list[Problem]], bytes]


# Where a file's first transaction set is looked for (its kind decides whether a
# mapping child is started): its envelopes' few hundred bytes, with room.
_HEAD_BYTES = 1 << 16


@dataclass
class EdiIngest(Ingest):
    query: EdiQuery = field(default_factory=lambda: EdiQuery(1))
    acknowledge: Acknowledge | None = None
    # The trading partner's profile of a sender (ISA05, ISA06), if any: what the
    # file settles against where the query is silent, and its 997 policy.
    partner: Callable[[str, str], Partner | None] | None = None
    # The profiles of the file's senders, as they are read (None: it has none).
    profiles: dict[tuple[str, str], Partner | None] = field(default_factory=dict)
    # The settlement kinds, by name: the mapping names the file's kind, whose
    # screen and model then take each document as a JSON body's would.
    kinds: Mapping[str, Kind[Any, Any]] = field(default_factory=lambda: KINDS)
    _senders_query: dict[tuple[str, str], Query] | None = None  # where senders' differ
    # The file as it arrives, spooled (``edi/spool/file.py``): read whole once complete,
    # from its mapped pages.
    _spool: Spool = field(default_factory=Spool)
    _read: tuple[tuple[Interchange, ...], EdiFile] | None = None
    _mappers: edi_parallel.Mappers | None = None  # a large file's mapping children
    _given: EdiQuery = field(default_factory=lambda: EdiQuery(1))  # the query as sent

    def _parse(self, data: bytes) -> None:
        self._spool.write(data)

    def read(self) -> EdiFile:
        """Read the received file (``EdiRefused``): what a repeat of it is known
        by, before anything is mapped. Once; ``finish`` reads it if not yet.
        Each interchange settles at its own sender's profile (where the query is
        silent); a sender whose profile names other producer keys is 403
        ``edi_sender_not_allowed``, one with no profile and no query
        ``edi_partner_unknown`` (the file refused whole)."""
        if self._read is None:
            body = self._spool.mapped()
            head = body[:_HEAD_BYTES]
            self._given = self.query
            try:
                first = sender_of(head)
                if first is not None:
                    # The first sender's, known from the head: its mapping
                    # children start now, reading while this thread does.
                    self.query = self._query_of(*first)
                if self.query.contract_version is not None:
                    self._start_mappers(head)
                # ``bytes`` to the reader, which also reads a spooled file's pages.
                with collector_paused():
                    interchanges = read_file(cast(bytes, body))
                self._settle_senders(interchanges, head)
            except BaseException:
                self.close()
                raise
            del body  # the interchanges hold it while they live
            file_sha256 = self.sha.hexdigest()
            submission = self._submission_sha256(file_sha256, self._given)
            earlier = self._submission_sha256(file_sha256, self.query)
            file = EdiFile(
                _senders(interchanges),
                file_sha256,
                submission,
                None if earlier == submission else earlier,
            )
            self._read = (interchanges, file)
        return self._read[1]

    @property
    def acknowledge_policy(self) -> str:
        """always (a 997 for every file), errors_only or never: its senders'
        profiles', the most telling of them (a sender without one: always)."""
        if not self.profiles:
            return "always"
        policies = {"always" if p is None else p.acknowledge for p in self.profiles.values()}
        return next(p for p in ("always", "errors_only", "never") if p in policies)

    def _query_of(self, qualifier: str, sender_id: str) -> EdiQuery:
        """The query completed by the sender's profile: a value the request
        gives wins; one it leaves out is the profile's. 403 when the profile
        names the producer keys that may send its files and this one is not."""
        if (qualifier, sender_id) not in self.profiles:
            found = None if self.partner is None else self.partner(qualifier, sender_id)
            self.profiles[qualifier, sender_id] = found
        found = self.profiles[qualifier, sender_id]
        q = self._given
        if found is None:
            return q
        if found.key_ids and self.key.key_id not in found.key_ids:
            raise ApiError(
                403,
                "edi_sender_not_allowed",
                f"the trading-partner profile of sender {qualifier}/{sender_id} names the"
                f" producer keys that may send its files, and {self.key.key_id} is not one",
            )
        return EdiQuery(
            found.contract_version if q.contract_version is None else q.contract_version,
            found.partition_key if q.partition_key is None else q.partition_key,
            found.period if q.period is None else q.period,
        )

    def _settle_senders(self, interchanges: tuple[Interchange, ...], head: bytes) -> None:
        """Each interchange's query, by its sender's profile (``_query_of``): the
        file's is the first's; where another sender's differs, ``senders`` names
        each, and mapping children started on the first's alone start again."""
        queries: dict[tuple[str, str], EdiQuery] = {}
        unknown = []
        for ic in interchanges:
            sender = (ic.sender_qualifier, ic.sender_id)
            if sender not in queries:
                queries[sender] = self._query_of(*sender)
            if queries[sender].contract_version is None:
                unknown.append(ic)  # each of its interchanges rejected, in a TA1
        if unknown:
            raise _partner_unknown(unknown, interchanges)
        if not queries:
            return
        first = next(iter(queries.values()))
        started = self.query
        self.query = first
        if len(set(queries.values())) > 1:
            self._senders_query = {
                s: Query(q.contract_version or 0, q.partition_key, q.period)
                for s, q in queries.items()
            }
        if self.query != started or self._senders_query:
            if self._mappers is not None:
                self._mappers.stop()
                self._mappers = None
            self._start_mappers(head)

    def _mapping_query(self) -> Query:
        q = self.query
        assert q.contract_version is not None  # known once read
        return Query(q.contract_version, q.partition_key, q.period, self._senders_query)

    def _start_mappers(self, head: bytes) -> None:
        """A large 210 file's mapping children, started now so that each reads the
        file while this thread does (``edi/parallel/parent.py``); ``head``: its first bytes."""
        source, processes = self._spool.fileno(), self.settings.x12_map_processes
        if source is not None and processes > 1:
            query = self._mapping_query()  # started once the version is known
            size = self._spool.size
            self._mappers = edi_parallel.start(source, size, head, query, processes)

    def finish(self, store: ChunkStore | None = None) -> Ingested:
        """The file's batch. With ``store``, each chunk is handed to it as it
        is closed and not kept (the batch's ``chunks`` is then empty)."""
        try:
            with collector_paused():  # mapping frees nothing until the file is done
                return self._finish(store)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the file's mapping children and let its spooled bytes go: once
        it is mapped, or once the request ends without mapping it. Idempotent."""
        if self._mappers is not None:
            self._mappers.stop()
            self._mappers = None
        self._spool.close()

    def _finish(self, store: ChunkStore | None) -> Ingested:
        assert self.acknowledge is not None
        file = self.read()
        assert self._read is not None
        interchanges = self._read[0]
        self._read = ((), file)  # held only by this call: let go when it returns
        query = self._mapping_query()  # read() refused the file without a version
        mapped = map_stream(
            interchanges,
            contract_version=query.contract_version,
            partition_key=query.partition_key,
            period=query.period,
            senders=query.senders,
        )
        # What the request named, not what a profile filled in: a 210 partner's
        # profile may name an 810's partition without refusing its 210s.
        query_applies(self._given, mapped.kind)
        # Written before the job's transaction opens (its control numbers come
        # from the database): that transaction is then the one connection a
        # file holds while it is mapped, so files mapped at once can never each
        # hold one and wait for another. A file refused from here on leaves a
        # gap in the numbers, as a 997 may.
        acknowledgement = (
            self.acknowledge(interchanges, []) if self.acknowledge_policy == "always" else None
        )
        if store is not None:
            store.begin(mapped.kind)
            self.builder.on_close = store.put
        self._take(mapped)
        batch = self._finished()
        intake = EdiIntake(file.senders, list(mapped.skipped), file.file_sha256, acknowledgement)
        return replace(batch, body_sha256=file.submission_sha256, edi=intake)

    def _submission_sha256(self, file_sha256: str, q: EdiQuery) -> str:
        """What a repeat must match: the bytes, and the query as the request gave
        it (the same file under another contract version is another submission,
        refused as a reused key or interchange, not its old job). Not what a
        profile filled in: the same bytes resent after the profile changed are
        the same submission, answered with the job that took them."""
        text = f"x12\n{file_sha256}\n{q.contract_version}\n{q.partition_key}\n{q.period}"
        return hashlib.sha256(text.encode()).hexdigest()

    def _take(self, mapped: MappedStream) -> None:
        """Each document into its chunk as it is mapped, then dropped: the dicts
        of a large file are never all held, nor its two forms at once. A 210 of
        the fast path comes as its JSON bytes (``freight_fast.FastLine``), stored
        as they are; any other document is encoded, then screened or modelled."""
        self.kind = self.kinds[mapped.kind]
        kind_screen = self.kind.screen
        # Exhausting the stream raises the mapping's refusal, which wins over a
        # document the kind refuses: it lists every set at fault, as the whole
        # file was mapped before either was known.
        refusal: list[Problem] | None = None
        # Closed whatever happens, so that no mapping child is left running
        # (services/api/edi/parallel/parent.py: a large 210 file is mapped on two cores,
        # the child reading the spooled file again).
        with closing(edi_parallel.entries(mapped, self._mappers)) as entries:
            for document in entries:
                if refusal is not None:
                    continue
                self._line_no += 1
                if isinstance(document, FastLine):
                    self._accept_fast(document)
                    continue
                line = _encode(document)
                screened = None if kind_screen is None else screen(kind_screen, line)
                if screened is not None:
                    self._accept(screened, line)
                else:
                    self._model(line)
                if self.error is not None:
                    refusal = _unmappable(document, self.error, mapped.interchanges)
        if refusal is not None:
            raise EdiRefused(refusal, mapped.interchanges)

    def _accept_fast(self, line: FastLine) -> None:
        """``_accept`` for a 210 of the fast path: its bytes are valid for the kind's
        model by construction (``freight_fast``), so neither screened nor modelled,
        and its one leg is one line that cannot repeat."""
        partition = line.partition_key
        if partition not in self.partitions:
            self.partitions.add(partition)
            if not self.key.may_submit_for(partition):
                self.refused.add(partition)
        self.builder.add(line.json, 1)


def _partner_unknown(
    unknown: list[Interchange], interchanges: tuple[Interchange, ...]
) -> EdiRefused:
    """A file naming no contract version, with interchanges of senders without a
    profile: each of those is rejected at its ISA06 (the file refused whole)."""
    problems = []
    for ic in unknown:
        qualifier, sender = ic.sender_qualifier, ic.sender_id
        # Said as the operator runs it: the command line (or PUT /v1/partners/...).
        command = f"settleq partners put {qualifier} {shlex.quote(sender)}"
        message = (
            f"sender {qualifier}/{sender} has no trading-partner profile and the request names"
            f" no contract_version: send ?contract_version=N, or have an operator put the"
            f" partner's profile ({command} --name NAME --contract-version N)"
        )
        problems.append(
            Problem(
                "edi_partner_unknown",
                message,
                segment=ic.isa.position,
                tag="ISA",
                element=6,
                control_number=ic.control_number,
            )
        )
    return EdiRefused(problems, interchanges)


def _senders(interchanges: tuple[Interchange, ...]) -> list[Sender]:
    """Each interchange's name; a file naming one twice, or naming one with
    more than an interchange table can hold, is refused."""
    seen: set[Sender] = set()
    senders = []
    for ic in interchanges:
        sets = sum(len(g.sets) for g in ic.groups)
        sender = Sender(ic.sender_qualifier, ic.sender_id, ic.control_number, sets)
        long = (
            len(sender.qualifier) > _MAX_QUALIFIER
            or len(sender.id) > _MAX_SENDER
            or len(sender.control_number) > _MAX_CONTROL
        )
        if long or not sender.id or not sender.control_number:
            message = "ISA05, ISA06 or ISA13 is empty or too long"
            problem = Problem("edi_envelope", message, segment=ic.isa.position, tag="ISA")
            raise EdiRefused([problem], interchanges)
        if sender in seen:
            problem = Problem(
                "edi_duplicate_control",
                f"interchange {sender.control_number} of sender {sender.id} appears twice",
                segment=ic.isa.position,
                tag="ISA",
                element=13,
                control_number=sender.control_number,
            )
            raise EdiRefused([problem], interchanges)
        seen.add(sender)
        senders.append(sender)
    return senders


def _set_of(
    document: dict[str, Any], interchanges: tuple[Interchange, ...]
) -> TransactionSet | None:
    """The ST..SE a mapped document came from, by its correlation id
    (``x12:<ISA06>:<ISA13>:<GS06>:<ST02>``; the sender may hold a colon)."""
    parts = str(document.get("correlation_id", "")).rsplit(":", 3)
    if len(parts) != 4:
        return None
    _, isa13, gs06, st02 = parts
    for ic in interchanges:
        if ic.control_number != isa13:
            continue
        for group in ic.groups:
            if group.control_number == gs06:
                for ts in group.sets:
                    if ts.control_number == st02:
                        return ts
    return None


def _unmappable(
    document: dict[str, Any], error: ApiError, interchanges: tuple[Interchange, ...]
) -> list[Problem]:
    """A mapped document its kind refuses (an id too long, an amount out of
    range, a line twice): the set it came from is unmappable. The problem
    points at its ST, so that the 997 rejects that set."""
    ts = _set_of(document, interchanges)
    where: dict[str, Any] = {}
    if ts is not None:
        where = {"segment": ts.st.position, "tag": "ST", "control_number": ts.control_number}
    document_id = document.get("document_id")
    problems = []
    for detail in error.details[:_MAX_DETAILS] or [{"msg": error.message}]:
        loc = ".".join(str(p) for p in detail.get("loc", [])[1:])  # [0] is "line N"
        what = f"{loc}: {detail.get('msg')}" if loc else str(detail.get("msg"))
        message = f"document {document_id!r} cannot be settled as mapped ({error.code}): {what}"
        problems.append(Problem("edi_unmappable", message, **where))
    return problems
