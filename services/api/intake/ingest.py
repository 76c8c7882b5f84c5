"""Validating and chunking a batch body while it streams in (docs/api.md#submitting-a-batch,
docs/architecture.md#front-door, docs/architecture.md#chunking).

NDJSON is handled a line at a time: each document is validated (screened at
C speed first where its kind has a screen, ``shared/domain/kinds/screen.py``), checked
against the key's partitions, and appended (as the producer's own bytes) to
the chunk being built; the body itself is never held whole. A JSON body is
read when complete, each of its documents once, from its own bytes, as an
NDJSON line is, and stored as sent; an X12 file is read when complete too
(``services/api/edi/ingest.py``). ``feed`` runs in a worker thread so that the
event loop keeps serving other requests meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec
from pydantic import ValidationError

from services.api.errors import ApiError, duplicate_line, validation_error
from shared.config.settings import ProducerKey, Settings
from shared.domain.kinds import BATCH, KINDS
from shared.domain.kinds.base import Document, Kind
from shared.domain.kinds.screen import ScreenDocument, clean, screen, screen_clean
from shared.domain.pipeline.chunking import ChunkBuilder, NewChunk

if TYPE_CHECKING:
    from services.api.edi.ingest import EdiIntake

JSON = "application/json"
NDJSON = "application/x-ndjson"
EDI_X12 = "application/edi-x12"
# jobs.source_format of each content type.
SOURCE_FORMATS = {JSON: "json", NDJSON: "ndjson", EDI_X12: "x12"}


# The body's SHA-256 and the signature's MAC (a fair part of the front door's
# CPU) release the GIL: they run here while the request's
# own thread parses, so that a large batch is accepted sooner.
_HASHERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hash")
_HASH_APART_BYTES = 256 * 1024
_ONE_LINE = re.compile(r"at line 1 column (\d+)")


def media_type(content_type: str) -> str:
    """The body's media type, lower-cased, parameters (``; charset=...``) dropped."""
    media = content_type.split(";")[0].strip().lower()
    if media not in SOURCE_FORMATS:
        raise ApiError(
            415, "unsupported_media_type", f"content type must be {JSON}, {NDJSON} or {EDI_X12}"
        )
    return media


@dataclass
class Ingested:
    kind: str
    chunks: list[NewChunk]  # those held: none when each went to a store as it closed
    documents: int
    lines: int
    partitions: set[str]
    body_sha256: str  # what a repeat under the same Idempotency-Key must match
    source_format: str = "json"
    edi: EdiIntake | None = None  # an X12 file's interchanges
    chunks_total: int = 0  # held or stored

    @property
    def default_key(self) -> str:
        """The Idempotency-Key of a request without one: the SHA-256 of the body."""
        return self.edi.file_sha256 if self.edi is not None else self.body_sha256


@dataclass
class Ingest:
    settings: Settings
    key: ProducerKey
    media: str
    sha: hashlib._Hash = field(default_factory=hashlib.sha256)
    partitions: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    error: ApiError | None = None
    kind: Kind | None = None  # type: ignore[type-arg]
    _pending: bytes = b""
    _line_no: int = 0
    _json: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.builder = ChunkBuilder(
            self.settings.max_chunk_documents,
            self.settings.max_chunk_bytes,
            max_lines=self.settings.max_chunk_lines,
        )

    def feed(self, data: bytes) -> None:
        self.sha.update(data)
        self._parse(data)

    def feed_parts(self, parts: list[bytes], also: Callable[[bytes], None]) -> None:
        """``feed`` each part, and pass it to ``also`` (the signature's MAC), with
        the hashing on another core; both are done when this returns."""

        def hash_parts() -> None:
            for part in parts:
                self.sha.update(part)
                also(part)

        hashing = None
        if sum(map(len, parts)) < _HASH_APART_BYTES:
            hash_parts()  # a small body: the hop would cost more than it saves
        else:
            hashing = _HASHERS.submit(hash_parts)
        try:
            # Part by part, as received: a body with several bad documents is
            # then answered with the same one as before (the last of the first
            # part holding any: parsing stops at a part that follows an error).
            for part in parts:
                self._parse(part)
        finally:
            if hashing is not None:
                hashing.result()

    def _parse(self, data: bytes) -> None:
        if self.error is not None:
            return  # the first error is the answer; the rest is only hashed
        if self.media == JSON:
            self._json.append(data)
            return
        block = self._pending + data
        lines = block.split(b"\n")
        self._pending = lines.pop()
        kind = self.kind
        if kind is None or kind.screen is None or not clean(block):
            for line in lines:
                self._ndjson_line(line)
            return
        # The hot path: _ndjson_line's steps for a part found clean as a whole.
        kind_screen = kind.screen
        for line in lines:
            line = line.strip()
            if not line:
                continue
            self._line_no += 1
            screened = screen_clean(kind_screen, line)
            if screened is None:
                self._model(line)
            else:
                self._accept(screened, line)

    def finish(self) -> Ingested:
        if self.media == JSON:
            self._json_body(b"".join(self._json))
        elif self.error is None:
            self._ndjson_line(self._pending)
        return self._finished()

    def _finished(self) -> Ingested:
        """The batch of the documents accepted, or the first refusal."""
        if self.error is None and self.builder.documents == 0:
            self.error = ApiError(422, "empty_batch", "a batch needs at least one document")
        if self.error is not None:
            raise self.error
        if self.refused:
            refused = sorted(self.refused)
            raise ApiError(
                403,
                "partition_not_allowed",
                f"key {self.key.key_id} may not submit for {len(refused)} partition(s)",
                [{"partition_key": p} for p in refused[:20]],
            )
        assert self.kind is not None
        chunks = self.builder.finish()
        return Ingested(
            kind=self.kind.name,
            chunks=chunks,
            chunks_total=self.builder.closed,
            documents=self.builder.documents,
            lines=self.builder.lines,
            partitions=self.partitions,
            body_sha256=self.sha.hexdigest(),
            source_format=SOURCE_FORMATS[self.media],
        )

    def _accept(
        self, document: Document | ScreenDocument, raw: bytes, index: int | None = None
    ) -> None:
        """Take a valid document (``index``: its place in a JSON body's list)."""
        assert self.kind is not None
        repeated = self.kind.repeated_line(document)
        if repeated is not None:
            where = [f"line {self._line_no}"] if index is None else ["documents", str(index)]
            self.error = duplicate_line(document.document_id, repeated, where)
            return
        partition = document.partition_key
        if partition not in self.partitions:  # a batch names few partitions, often
            self.partitions.add(partition)
            if not self.key.may_submit_for(partition):
                self.refused.add(partition)
        self.builder.add(raw, self.kind.line_count(document))

    def _ndjson_line(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        self._line_no += 1
        if self.kind is None:
            self.kind = self._header(line)
            return
        if self.kind.screen is not None:
            screened = screen(self.kind.screen, line)
            if screened is not None:
                self._accept(screened, line)
                return
        self._model(line)

    def _model(self, line: bytes) -> None:
        """The document model's answer for a line the screen did not vouch for."""
        assert self.kind is not None
        try:
            document = self.kind.document_model.model_validate_json(line)
        except ValidationError as exc:
            err = validation_error(list(exc.errors()))
            for detail in err.details:
                detail["loc"] = [f"line {self._line_no}", *detail["loc"]]
                # The parser saw one document as a text of one line: its "line 1"
                # is the body's NDJSON line, which the loc names.
                detail["msg"] = _ONE_LINE.sub(r"at column \1", detail["msg"])
            if err.details:
                err.message = f"line {self._line_no}: {err.details[0]['msg']}"
            self.error = err
            return
        self._accept(document, line)

    def _header(self, line: bytes) -> Kind | None:  # type: ignore[type-arg]
        try:
            header = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: absurdly nested JSON
            header = None
        name = header.get("kind") if isinstance(header, dict) else None
        kind = KINDS.get(name) if isinstance(name, str) else None
        if kind is None:
            self.error = ApiError(
                422,
                "unknown_kind",
                'the first NDJSON line must be {"kind": "<kind>"}, one of: ' + ", ".join(KINDS),
            )
        elif set(header) != {"kind"}:
            extra = sorted(set(header) - {"kind"})
            self.error = ApiError(
                422,
                "extra_forbidden",
                "the NDJSON header holds only kind",
                [
                    {
                        "loc": ["line 1", k],
                        "type": "extra_forbidden",
                        "msg": "Extra inputs are not permitted",
                    }
                    for k in extra[:20]
                ],
            )
        return kind

    def _json_body(self, body: bytes) -> None:
        """A JSON body: each document read once, from its own bytes, as an NDJSON
        line is (screened, else the model), and stored as the producer sent it.
        A body that way does not take, the batch's model reads whole, as before,
        so that a refusal's code, message and details are the model's own."""
        read = self._json_documents(body)
        if read is None:
            self._json_model(body)
            return
        self.kind, documents = read
        for index, (document, raw) in enumerate(documents):
            self._accept(document, raw, index)
            if self.error is not None:
                return

    def _json_documents(
        self, body: bytes
    ) -> tuple[Kind, list[tuple[Document | ScreenDocument, bytes]]] | None:  # type: ignore[type-arg]
        """The kind and every document of a body whose documents each pass, with
        its bytes; None at the first thing that does not."""
        try:
            envelope = _JSON_ENVELOPE.decode(body)
        except (msgspec.MsgspecError, RecursionError):
            return None
        kind = KINDS.get(envelope.kind)
        if kind is None or not envelope.documents:
            return None
        documents: list[tuple[Document | ScreenDocument, bytes]] = []
        for part in envelope.documents:
            raw = bytes(part)
            document = _screened(kind, raw)
            if document is None:
                try:
                    document = kind.document_model.model_validate_json(raw)
                except ValidationError:
                    return None
            documents.append((document, raw))
        return kind, documents

    def _json_model(self, body: bytes) -> None:
        """The batch's model over the whole body: its errors are the answer (and
        a body it takes is stored as it reads it)."""
        try:
            batch = BATCH.validate_json(body)
        except ValidationError as exc:
            self.error = validation_error(list(exc.errors()))
            return
        self.kind = KINDS[batch.kind]
        for index, document in enumerate(batch.documents):
            self._accept(document, document.model_dump_json().encode(), index)
            if self.error is not None:
                return


class _JsonEnvelope(msgspec.Struct, forbid_unknown_fields=True):
    """A JSON body's two fields; each document is kept as its own bytes (a
    ``Raw`` span), for its kind to read once."""

    kind: str
    documents: list[msgspec.Raw]


_JSON_ENVELOPE = msgspec.json.Decoder(_JsonEnvelope)


def _screened(kind: Kind, raw: bytes) -> ScreenDocument | None:  # type: ignore[type-arg]
    return None if kind.screen is None else screen(kind.screen, raw)
