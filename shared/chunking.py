"""Split a batch into chunks of whole documents (SPEC §4.2).

A chunk holds at most ``max_documents`` documents and at most ``max_bytes``
of serialized documents; a document's lines are never split, and a document
larger than ``max_bytes`` travels alone in its own chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


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
