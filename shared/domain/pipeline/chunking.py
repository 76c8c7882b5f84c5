"""Split a batch into chunks of whole documents (docs/architecture.md#chunking).

A chunk holds at most ``max_documents`` documents, at most ``max_bytes`` of
serialized documents and, where set, at most ``max_lines`` lines; a document's
lines are never split, and a document larger than a cap travels alone in its
own chunk.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Caps:
    max_documents: int
    max_bytes: int
    max_lines: int | None = None

    def __post_init__(self) -> None:
        if min(self.max_documents, self.max_bytes, self.max_lines or 1) < 1:
            raise ValueError("chunk caps must be positive")

    def full(self, documents: int, size: int, lines: int, next_size: int, next_lines: int) -> bool:
        """Must the chunk close before the next document? Never while it is empty:
        a document larger than a cap travels alone."""
        return documents > 0 and (
            documents == self.max_documents
            or size + next_size > self.max_bytes
            or (self.max_lines is not None and lines + next_lines > self.max_lines)
        )


def chunk_sizes(sizes: Iterable[int], max_documents: int, max_bytes: int) -> Iterator[range]:
    """Yield consecutive index ranges over documents of the given byte sizes."""
    caps = Caps(max_documents, max_bytes)
    start = 0
    count = 0
    used = 0
    for index, size in enumerate(sizes):
        if caps.full(count, used, 0, size, 0):
            yield range(start, index)
            start, count, used = index, 0, 0
        count += 1
        used += size
    if count:
        yield range(start, start + count)


@dataclass(frozen=True)
class NewChunk:
    """A chunk ready to store: a JSON array of whole serialized documents."""

    id: str
    seq: int
    documents: int
    lines: int
    payload: bytes
    payload_sha256: str


class ChunkBuilder:
    """Groups serialized documents into chunk payloads (``[doc,doc,...]``) as they
    arrive, so a streamed batch never has to be held whole.

    The chunks are kept (``chunks``) unless ``on_close`` is set: then each is
    handed to it as it closes, and kept by the builder no longer."""

    def __init__(
        self,
        max_documents: int,
        max_bytes: int,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        max_lines: int | None = None,
        on_close: Callable[[NewChunk], None] | None = None,
    ) -> None:
        # Lines are what a chunk costs to settle: bounding them keeps every chunk
        # short, so a small job's chunk never waits long for a worker.
        self.caps = Caps(max_documents, max_bytes, max_lines)
        self.new_id = new_id
        self.on_close = on_close
        self.chunks: list[NewChunk] = []
        self.closed = 0  # chunks closed so far, kept or handed on
        self.documents = 0
        self.lines = 0
        # The open chunk's bytes with their punctuation ("[", doc, ",", doc...),
        # so that closing it copies them once.
        self._parts: list[bytes] = []
        self._documents = 0
        self._size = 0
        self._lines = 0

    def add(self, document: bytes, lines: int) -> None:
        size = len(document)
        if self.caps.full(self._documents, self._size, self._lines, size, lines):
            self._close()
        self._parts += (b"," if self._documents else b"[", document)
        self._documents += 1
        self._size += size
        self._lines += lines
        self.documents += 1
        self.lines += lines

    def _close(self) -> None:
        self._parts.append(b"]")
        payload = b"".join(self._parts)
        chunk = NewChunk(
            id=self.new_id(),
            seq=self.closed,
            documents=self._documents,
            lines=self._lines,
            payload=payload,
            payload_sha256=hashlib.sha256(payload).hexdigest(),
        )
        self._parts, self._documents, self._size, self._lines = [], 0, 0, 0
        self.closed += 1
        if self.on_close is None:
            self.chunks.append(chunk)
        else:
            self.on_close(chunk)

    def finish(self) -> list[NewChunk]:
        if self._documents:
            self._close()
        return self.chunks


def build_chunks(
    serialized: Sequence[bytes],
    line_counts: Sequence[int],
    max_documents: int,
    max_bytes: int,
    new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
) -> list[NewChunk]:
    """Group serialized documents into chunk payloads (``[doc,doc,...]``)."""
    builder = ChunkBuilder(max_documents, max_bytes, new_id)
    for document, lines in zip(serialized, line_counts, strict=True):
        builder.add(document, lines)
    return builder.finish()
