"""shared.domain.pipeline.chunking: whole documents per chunk, capped by count and bytes
(docs/architecture.md#chunking)."""

from __future__ import annotations

import random

import pytest

from shared.domain.pipeline.chunking import chunk_sizes


def _chunks(sizes: list[int], max_documents: int, max_bytes: int) -> list[list[int]]:
    return [list(r) for r in chunk_sizes(sizes, max_documents, max_bytes)]


def _check_invariants(sizes: list[int], max_documents: int, max_bytes: int) -> None:
    ranges = list(chunk_sizes(sizes, max_documents, max_bytes))
    # Consecutive, non-empty, step 1, covering every document exactly once, in order.
    position = 0
    for r in ranges:
        assert r.step == 1
        assert r.start == position
        assert len(r) >= 1
        position = r.stop
    assert position == len(sizes)
    for r in ranges:
        used = sum(sizes[i] for i in r)
        assert len(r) <= max_documents
        # Over the byte cap only as a single oversize document travelling alone.
        assert used <= max_bytes or (len(r) == 1 and sizes[r.start] > max_bytes)
    # Greedy packing: a chunk is closed only because the next document would not fit.
    for current, following in zip(ranges, ranges[1:], strict=False):
        used = sum(sizes[i] for i in current)
        assert len(current) == max_documents or used + sizes[following.start] > max_bytes


def test_no_documents_yields_no_chunks() -> None:
    assert _chunks([], 10, 100) == []


def test_everything_fits_in_one_chunk() -> None:
    assert _chunks([10, 20, 30], 10, 100) == [[0, 1, 2]]


def test_document_count_cap_splits_chunks() -> None:
    assert _chunks([1] * 7, 3, 1000) == [[0, 1, 2], [3, 4, 5], [6]]


def test_byte_cap_splits_before_the_document_that_would_overflow() -> None:
    # 40 + 40 = 80 <= 100; adding 30 would make 110 > 100, so 30 starts a new chunk.
    assert _chunks([40, 40, 30, 70], 10, 100) == [[0, 1], [2, 3]]


def test_exactly_filling_the_byte_cap_is_allowed() -> None:
    assert _chunks([50, 50, 1], 10, 100) == [[0, 1], [2]]


def test_oversize_document_travels_alone() -> None:
    assert _chunks([10, 500, 10], 10, 100) == [[0], [1], [2]]


def test_oversize_first_and_last_documents_travel_alone() -> None:
    assert _chunks([500, 10, 20, 600], 10, 100) == [[0], [1, 2], [3]]


def test_consecutive_oversize_documents_each_get_their_own_chunk() -> None:
    assert _chunks([101, 101, 101], 10, 100) == [[0], [1], [2]]


def test_single_document_per_chunk_cap() -> None:
    assert _chunks([1, 2, 3], 1, 100) == [[0], [1], [2]]


def test_zero_byte_documents_are_still_capped_by_count() -> None:
    assert _chunks([0] * 5, 2, 1) == [[0, 1], [2, 3], [4]]


def test_accepts_any_iterable_of_sizes() -> None:
    assert [list(r) for r in chunk_sizes(iter([5, 5, 5]), 2, 100)] == [[0, 1], [2]]


@pytest.mark.parametrize(("max_documents", "max_bytes"), [(0, 100), (10, 0), (-1, 5), (5, -1)])
def test_non_positive_caps_are_refused(max_documents: int, max_bytes: int) -> None:
    with pytest.raises(ValueError):
        list(chunk_sizes([1], max_documents, max_bytes))


def test_spec_defaults_750_documents_and_45_mib() -> None:
    mib = 1024 * 1024
    ranges = list(chunk_sizes([1000] * 2000, 750, 45 * mib))
    assert [len(r) for r in ranges] == [750, 750, 500]


@pytest.mark.parametrize(
    ("sizes", "max_documents", "max_bytes"),
    [
        ([10, 20, 30], 10, 100),
        ([40, 40, 30, 70], 10, 100),
        ([10, 500, 10], 10, 100),
        ([1] * 7, 3, 1000),
        ([100, 0, 0, 100], 2, 100),
    ],
)
def test_hand_picked_cases_satisfy_the_invariants(
    sizes: list[int], max_documents: int, max_bytes: int
) -> None:
    _check_invariants(sizes, max_documents, max_bytes)


@pytest.mark.parametrize("seed", range(5))
def test_random_batches_satisfy_the_invariants(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        max_documents = rng.randint(1, 12)
        max_bytes = rng.randint(1, 200)
        count = rng.randint(0, 60)
        # Mostly small documents, some exactly at the cap, some oversize.
        sizes = [
            rng.choice(
                [
                    rng.randint(0, max_bytes // 3 + 1),
                    max_bytes,
                    rng.randint(max_bytes, 3 * max_bytes),
                ]
            )
            for _ in range(count)
        ]
        _check_invariants(sizes, max_documents, max_bytes)


def test_builder_bounds_chunk_lines_without_splitting_a_document() -> None:
    from shared.domain.pipeline.chunking import ChunkBuilder

    builder = ChunkBuilder(max_documents=750, max_bytes=10**6, max_lines=10)
    for lines in (4, 4, 4, 25, 1):  # the 25-line document travels alone
        builder.add(b"{}", lines)
    assert [c.lines for c in builder.finish()] == [8, 4, 25, 1]


def test_a_builder_with_on_close_hands_each_chunk_on_as_it_closes_and_keeps_none() -> None:
    from shared.domain.pipeline.chunking import ChunkBuilder, NewChunk

    handed: list[tuple[NewChunk, int]] = []
    ids = iter("abcdef")
    builder = ChunkBuilder(
        2, 10**6, new_id=lambda: next(ids), on_close=lambda c: handed.append((c, builder.documents))
    )
    kept = ChunkBuilder(2, 10**6, new_id=iter("abcdef").__next__)
    for n in range(5):
        for b in (builder, kept):
            b.add(b'{"n": %d}' % n, 1)
    # Each chunk goes when the document after it arrives, not at the end.
    assert [documents for _, documents in handed] == [2, 4]
    assert builder.finish() == [] and builder.closed == 3
    assert [chunk for chunk, _ in handed] == kept.finish()
    assert [c.seq for c, _ in handed] == [0, 1, 2]
