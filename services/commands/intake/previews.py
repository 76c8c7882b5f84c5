"""``settleq submit FILE --preview`` (docs/api.md#previewing-a-batch): what
submitting a batch now would do, as the API previewed it; nothing is submitted."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from rich.table import Table

from services.commands.money import money
from services.commands.options import amount_column, console, show, sums_money

OUTCOMES = ("posted", "disputed", "duplicate", "dead_lettered")
# The outcomes whose lines say why they change nothing.
EXPLAINED = ("dead_lettered", "duplicate")
QUERY = {"preview": "true"}


def print_preview(answer: dict[str, Any]) -> None:
    """The lines per outcome and partition with their money, then why lines
    were dead-lettered or duplicates (reasons by count), then the digest."""
    kind, whole = answer["kind"], answer["totals"]
    console.print(
        f"preview of a {kind} batch: {whole['lines']:,} lines; nothing was submitted",
        soft_wrap=True,
    )
    totals = sums_money(kind)
    table = Table()
    table.add_column("partition")
    for outcome in OUTCOMES:
        amount_column(table, outcome)
    if totals:
        for column in ("posted amount", "disputed claims", "ledger delta"):
            amount_column(table, column)
    partitions = answer["partitions"]
    for key, part in partitions.items():
        table.add_row(key, *_cells(part, kind, totals))
    if len(partitions) > 1:
        table.add_section()
        table.add_row("total", *_cells(whole, kind, totals), style="bold")
    show(table)
    if not totals:
        _unit_costs(answer["lines"], kind)
    for outcome, reasons in _reasons(answer["lines"]).items():
        console.print(f"{outcome.replace('_', '-')}: {sum(reasons.values()):,} line(s)")
        width = max(len(reason) for reason in reasons)
        for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
            console.print(f"  {reason:<{width}}  {count:>,}", soft_wrap=True)
    _x12(answer)
    console.print(f"digest {answer['digest']}", soft_wrap=True)


def _x12(answer: dict[str, Any]) -> None:
    """An X12 file's sets, and the 997 a submission would send (its control
    numbers and time are placeholders: docs/api.md#previewing-a-batch)."""
    if answer.get("documents") is not None:
        console.print(f"{len(answer['documents']):,} transaction set(s)", soft_wrap=True)
    if answer.get("acknowledgement"):
        console.print("the 997 that would be sent:")
        console.print(answer["acknowledgement"], soft_wrap=True)


# Lines whose cost a preview of unit costs lists, the largest changes first.
SHOWN_COSTS = 50


def _unit_costs(lines: list[dict[str, Any]], kind: str) -> None:
    """A kind whose amounts are unit costs (a recipe's at each location) adds
    none up: each line's cost under the batch and its change, the largest
    changes first (a supplier's price change across recipes and locations)."""
    moved = [line for line in lines if line["delta"] is not None]
    moved.sort(key=lambda line: (-abs(Decimal(line["delta"])), line["position"] or 0))
    table = Table(title=f"{kind}: unit costs, each line's (not totalled)")
    for column in ("partition", "document", "line"):
        table.add_column(column)
    for column in ("cost", "change"):
        amount_column(table, column)
    for line in moved[:SHOWN_COSTS]:
        table.add_row(
            line["partition_key"],
            line["document_id"],
            line["line_ref"],
            money(line["amount"], kind),
            money(line["delta"], kind),
        )
    show(table)
    if len(moved) > SHOWN_COSTS:
        console.print(f"{len(moved) - SHOWN_COSTS:,} more lines change", soft_wrap=True)


def _cells(part: dict[str, Any], kind: str, totals: bool) -> list[str]:
    cells = [f"{part[outcome]:,}" for outcome in OUTCOMES]
    if totals:
        cells += [
            money(part["amount_posted"], kind),
            money(part["amount_disputed"], kind),
            money(part["delta"], kind),
        ]
    return cells


def _reasons(lines: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    """Per outcome that moves nothing, its lines' reasons with their counts (a
    dead letter of a whole document counts each line it covers)."""
    out: dict[str, Counter[str]] = {outcome: Counter() for outcome in EXPLAINED}
    for line in lines:
        if line["outcome"] in out:
            reason = line["reason"] or "no reason given"
            out[line["outcome"]][reason] += line.get("lines") or 1
    return {outcome: reasons for outcome, reasons in out.items() if reasons}
