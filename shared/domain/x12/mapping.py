"""``map_file``: a file's interchanges into one batch of one kind
(docs/architecture.md#edi-intake).

Each ST..SE is one document: 210 → ``freight_audit`` (``freight_210``), 810 →
``promo_accrual`` (``invoice_810``). The documents are the JSON-ready dicts
the kind's document model takes, and each value is checked against the
model's limits where it is read (``numbers.SetValues``), so the problem names
the segment and element at fault; tests validate every mapped document with
the model, which costs 20 µs a document and so is not run again here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from shared.domain.x12.freight_210 import map_210
from shared.domain.x12.freight_fast import fast_210
from shared.domain.x12.gcpause import collector_paused
from shared.domain.x12.invoice_810 import map_810
from shared.domain.x12.model import EdiRefused, Interchange, Mapped, Problem, Skipped
from shared.domain.x12.problems import Problems
from shared.domain.x12.sets import Place, Query

Mapper = Callable[[Place, Query, Problems], "dict[str, Any] | Skipped | None"]


def _freight(place: Place, query: Query, problems: Problems) -> dict[str, Any] | None:
    return fast_210(place, query) or map_210(place, query, problems)


KINDS: dict[str, tuple[str, Mapper]] = {
    "210": ("freight_audit", _freight),
    "810": ("promo_accrual", map_810),
}


def map_file(
    interchanges: Sequence[Interchange],
    *,
    contract_version: int,
    partition_key: str | None,
    period: str | None,
) -> Mapped:
    """One batch of documents, or ``EdiRefused(problems, interchanges)``.

    ``partition_key`` and ``period`` (810s) win over what the file says.
    """
    interchanges = tuple(interchanges)
    problems = Problems()
    places = [
        Place(interchange, group, transaction_set)
        for interchange in interchanges
        for group in interchange.groups
        for transaction_set in group.sets
    ]
    kind = _one_kind(places, problems)
    if problems:
        raise EdiRefused(problems.in_order(), interchanges)
    query = Query(contract_version, partition_key, period)
    documents: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    with collector_paused():
        for place in places:
            mapped = KINDS[place.code][1](place, query, problems)
            if isinstance(mapped, Skipped):
                skipped.append(mapped)
            elif mapped is not None:
                documents.append(mapped)
    if problems:
        raise EdiRefused(problems.in_order(), interchanges)
    if not documents:
        plural = "" if len(skipped) == 1 else "s"
        why = f"{len(skipped)} invoice{plural} without an allowance" if skipped else "no set"
        raise EdiRefused([Problem("edi_no_documents", f"nothing to settle: {why}")], interchanges)
    return Mapped(kind or "", documents, skipped, interchanges)


def _one_kind(places: list[Place], problems: Problems) -> str | None:
    """The file's kind; a problem for each set of no kind, and for a file of two."""
    kind: str | None = None
    mixed = False
    for place in places:
        st, code = place.transaction_set.st, place.code
        if code not in KINDS:
            problems.at(
                "edi_unsupported_transaction_set",
                f"transaction set {code[:10]!r}: only 210 (freight invoices) and 810 "
                "(invoices) are settled",
                st,
                1,
                place.control_number,
            )
            continue
        if kind is None:
            kind = KINDS[code][0]
        elif KINDS[code][0] != kind and not mixed:
            mixed = True
            problems.at(
                "edi_mixed_kinds",
                f"a {code} after sets of {kind}: one file is one batch of one kind",
                st,
                1,
                place.control_number,
            )
    return kind
