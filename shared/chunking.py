"""Split a batch into chunks of whole documents (SPEC §4.2).

A chunk holds at most ``max_documents`` documents and at most ``max_bytes``
of serialized documents; a document's lines are never split, and a document
larger than ``max_bytes`` travels alone in its own chunk.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass


def chunk_sizes(sizes: Iterable[int], max_documents: int, max_bytes: int) -> Iterator[range]:
    """Yield consecutive index ranges over documents of the given byte sizes."""
    if max_documents < 1 or max_bytes < 1:
        raise ValueError("chunk caps must be positive")
    start = 0
    count = 0
    used = 0
    for index, size in enumerate(sizes):
        if count and (count == max_documents or used + size > max_bytes):
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


def build_chunks(
    serialized: Sequence[bytes],
    line_counts: Sequence[int],
    max_documents: int,
    max_bytes: int,
    new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
) -> list[NewChunk]:
    """Group serialized documents into chunk payloads (``[doc,doc,...]``)."""
    chunks = []
    for seq, span in enumerate(chunk_sizes((len(s) for s in serialized), max_documents, max_bytes)):
        payload = b"[" + b",".join(serialized[i] for i in span) + b"]"
        chunks.append(
            NewChunk(
                id=new_id(),
                seq=seq,
                documents=len(span),
                lines=sum(line_counts[i] for i in span),
                payload=payload,
                payload_sha256=hashlib.sha256(payload).hexdigest(),
            )
        )
    return chunks
