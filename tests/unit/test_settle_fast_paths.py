"""The settle stage's fast paths agree with the plain code they replace.

Each fast path (per-document caching, fewer per-line objects) is checked
against a straightforward reference on generated inputs: same bytes, same values.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.adapters.db.bulk import field
from shared.adapters.db.ledger.postgres import _COLUMNS, _ledger_text
from shared.adapters.leases import ClaimStore
from shared.domain.kinds.base import Document, Line, Settlement
from shared.domain.pipeline.settlement import ChunkPlan, PlannedLine

FAST = settings(max_examples=150, deadline=None, database=None)


def reference_ledger_text(kind: str, job_id: str, settled: Sequence[PlannedLine]) -> str:
    """The COPY rows of a fast-case unit's new lines (each key's first), built
    field by field through the generic writer of COPY text: ids in batch order,
    rows in key order."""
    rows = []
    seen: set[str] = set()
    for p in settled:
        key = p.line.reconciliation_key
        if key in seen:
            continue
        seen.add(key)
        s, doc = p.settlement, p.document
        assert s is not None
        row = {
            "reconciliation_key": key,
            "contract_version": 1,
            "kind": kind,
            "partition_key": doc.partition_key,
            "document_id": doc.document_id,
            "line_ref": p.line.line_ref,
            "job_id": job_id,
            "outcome": s.outcome,
            "amount": str(s.amount),
            "claimed_amount": None if s.claimed_amount is None else str(s.claimed_amount),
            "delta": str(s.amount),
            "supersedes_id": None,
            "correlation_id": doc.correlation_id,
            "position": p.position,
            "period": "2026-12",
        }
        rows.append(row)
    numbered = sorted(enumerate(rows, 1), key=lambda nr: nr[1]["reconciliation_key"])
    return "".join(
        f"{n}\t" + "\t".join(field(r[c]) for c in _COLUMNS[1:]) + "\n" for n, r in numbered
    )


ids = st.text(alphabet="AB-\\é1", min_size=1, max_size=6)
amounts = st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(
    lambda d: abs(d) < Decimal(10) ** 16
) | st.sampled_from([Decimal("1E+2"), Decimal("-0"), Decimal("0E-7"), Decimal("12.3400")])


@st.composite
def settled_lines(draw: Any) -> list[PlannedLine]:
    documents = draw(
        st.lists(
            st.builds(
                Document,
                document_id=ids,
                partition_key=ids,
                contract_version=st.integers(1, 3),
                correlation_id=st.none() | ids,
            ),
            min_size=1,
            max_size=4,
        )
    )
    keys = st.sampled_from(["a" * 64, "b" * 64, "c" * 64, "d" * 64])
    lines = []
    for _ in range(draw(st.integers(0, 25))):
        # Mostly a document's lines in a row, sometimes one of them again later.
        document = draw(st.sampled_from(documents))
        claimed = draw(st.none() | amounts)
        line = Line(document.document_id, draw(ids), draw(keys), claimed, None)
        settlement = Settlement(
            draw(st.sampled_from(["posted", "disputed"])),
            draw(amounts),
            claimed,
            draw(st.none() | st.sampled_from(["document_type_corrected", "a\\b"])),
        )
        position = draw(st.none() | st.integers(0, 2**62))
        planned = PlannedLine(document, line, settlement, None, "", -1, position)
        lines.extend([planned] * draw(st.integers(1, 3)))
    return lines


@FAST
@given(settled=settled_lines())
def test_the_copy_text_of_the_fast_case_is_the_field_by_field_text(
    settled: list[PlannedLine],
) -> None:
    settled = [p for p in settled if p.position is not None]
    flags, seen = [], set()
    for p in settled:
        flags.append(p.line.reconciliation_key not in seen)
        seen.add(p.line.reconciliation_key)
    ids = list(range(1, len(seen) + 1))
    text, written = _ledger_text("promo_accrual", "J-1", settled, flags, ids, "2026-12")
    assert text == reference_ledger_text("promo_accrual", "J-1", settled)
    assert [r.id for r in written] == ids
    firsts = [p.line.reconciliation_key for p, new in zip(settled, flags, strict=True) if new]
    assert [r.reconciliation_key for r in written] == firsts  # ids in batch order
    assert {r.period for r in written} <= {"2026-12"}


@FAST
@given(
    by_version=st.dictionaries(
        st.integers(1, 4), st.sets(st.sampled_from(["a" * 64, "b" * 64, "0" * 64, "f"])), max_size=3
    )
)
def test_claim_keys_per_version_are_the_sorted_identities_keys(
    by_version: dict[int, set[str]],
) -> None:
    store = ClaimStore(redis.Redis(), "settleq-t", 1000)  # no connection: keys are pure
    idents = sorted((key, version) for version, keys in by_version.items() for key in keys)
    expected = [store.key("promo_accrual", key, version) for key, version in idents]
    assert store.keys("promo_accrual", by_version) == expected


def with_dead_lines(settled: list[PlannedLine], dead: list[bool]) -> list[PlannedLine]:
    """``settled`` with the lines ``dead`` flags dead-lettered (no settlement)."""
    return [
        PlannedLine(p.document, p.line, None, "negative_quantity") if gone else p
        for p, gone in zip(settled, dead + [False] * len(settled), strict=False)
    ]


@FAST
@given(settled=settled_lines(), dead=st.lists(st.booleans(), max_size=80))
def test_claim_keys_by_version_hold_every_line_that_may_post(
    settled: list[PlannedLine], dead: list[bool]
) -> None:
    lines = with_dead_lines(settled, dead)
    plan = ChunkPlan(lines=lines)
    wanted: dict[int, set[str]] = {}
    for p in lines:
        if p.settlement is not None:
            wanted.setdefault(p.document.contract_version, set()).add(p.line.reconciliation_key)
    assert plan.claim_keys_by_version() == wanted
    assert plan.claim_keys() == sorted(
        {(p.line.reconciliation_key, p.document.contract_version) for p in lines if p.settlement}
    )
