"""ANSI X12 intake (docs/architecture.md#edi-intake): a strict reader for real
partners' files, the 210/810 mappings to our kinds, and the 997 that answers them.

Pure: bytes in, value objects out. The API's ingest calls ``read_file`` then
``map_stream`` (``map_file`` is the same, collected); ``acknowledge`` writes
the 997 with control numbers the caller allocated (the database hands them
out, so they increase across processes).
"""

from shared.domain.x12.model import (
    Delimiters,
    EdiRefused,
    FunctionalGroup,
    Interchange,
    Mapped,
    Problem,
    Segment,
    Skipped,
    TransactionSet,
)

__all__ = [
    "Delimiters",
    "EdiRefused",
    "FunctionalGroup",
    "Interchange",
    "Mapped",
    "Problem",
    "Segment",
    "Skipped",
    "TransactionSet",
]
