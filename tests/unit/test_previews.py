"""A preview's answer from its lines (shared/domain/previews.py): totals per
outcome and partition, a document's money now and under the preview with its
outcome changes, and a digest that is the same for the same answer."""

from __future__ import annotations

from decimal import Decimal

from shared.domain.previews import (
    Now,
    PreviewLine,
    change_totals,
    digest,
    document_changes,
    totals,
)


def line(
    doc: str, ref: str, outcome: str, delta: str | None, amount: str = "1.00", pk: str = "V-1"
) -> PreviewLine:
    return PreviewLine(
        pk,
        doc,
        ref,
        None,
        2,
        outcome,
        None,
        Decimal(amount),
        Decimal("1.00"),
        None if delta is None else Decimal(delta),
    )


def test_totals_count_each_outcome_and_sum_what_moves() -> None:
    lines = [
        line("D1", "1", "posted", "0.25", "1.25"),
        line("D1", "2", "disputed", "-0.10", "0.90"),
        line("D2", "1", "duplicate", None),
        line("D3", "1", "dead_lettered", None, pk="V-2"),
    ]
    whole, parts = totals(lines)
    wire = whole.wire()
    assert (wire["posted"], wire["disputed"], wire["duplicate"], wire["dead_lettered"]) == (
        1,
        1,
        1,
        1,
    )
    assert (wire["amount_posted"], wire["amount_disputed"]) == ("1.25", "1.00")
    assert (wire["delta_posted"], wire["delta_disputed"], wire["delta"]) == (
        "0.25",
        "-0.10",
        "0.15",
    )
    assert sorted(parts) == ["V-1", "V-2"] and parts["V-2"].lines == 1


def test_a_document_moves_its_lines_deltas_and_names_each_outcome_change() -> None:
    now = {
        ("V-1", "D1", "1"): Now(Decimal("1.00"), "posted"),
        ("V-1", "D1", "2"): Now(Decimal("1.00"), "disputed"),
        ("V-1", "D2", "1"): Now(Decimal("3.00"), "posted"),
    }
    lines = [
        line("D1", "1", "disputed", "0.50", "1.50"),
        line("D1", "2", "posted", "0.00", "1.00"),
        line("D2", "1", "dead_lettered", None),  # nothing moves: it keeps its 3.00
        line("D3", "1", "posted", "2.00", "2.00"),  # no row yet
    ]
    docs = {d.document_id: d for d in document_changes(lines, now)}
    assert docs["D1"].wire()["changes"] == {"disputed→posted": 1, "posted→disputed": 1}
    assert (docs["D1"].amount_now, docs["D1"].amount_preview) == (Decimal("2.00"), Decimal("2.50"))
    assert docs["D2"].wire()["changes"] == {"posted→dead_lettered": 1}
    assert docs["D2"].amount_preview == docs["D2"].amount_now == Decimal("3.00")
    assert docs["D3"].wire()["changes"] == {"none→posted": 1}
    [part] = change_totals(docs.values()).values()
    assert (part["documents"], part["lines"], part["delta"]) == (3, 4, "2.50")
    assert (part["amount_now"], part["amount_preview"]) == ("5.00", "7.50")


def test_the_digest_depends_on_the_answer_not_on_its_key_order() -> None:
    assert digest({"a": 1, "b": ["x"]}) == digest({"b": ["x"], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})
    assert digest({"a": "→"}).startswith("sha256:")
