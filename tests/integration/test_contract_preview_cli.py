"""``settleq contracts preview`` against a real API over a real ledger
(docs/api.md#previewing-a-contract-version): the largest changes, the totals,
the outcome changes and the digest, a CSV of every document on request, and
a refusal as one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.integration.test_periods_cli import served, settleq, wide  # noqa: F401 - fixtures
from tests.support.factories import promo_doc, promo_line
from tests.support.infra import OPERATOR_TOKEN
from tests.support.periods import settle_promo
from tests.unit.conftest import restore_logging  # noqa: F401 - the CLI configures logging

pytestmark = pytest.mark.usefixtures("restore_logging")


def test_a_preview_prints_its_changes_and_writes_every_document_as_csv(
    served: tuple[str, Engine],  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    url, engine = served
    docs = [
        promo_doc("V-1", [promo_line(1, "8", "1.00")]),  # posted at 0.125, disputed at 0.150
        promo_doc("V-1", [promo_line(1, "10", "1.50")]),  # disputed at 0.125, posted at 0.150
    ]
    settle_promo(engine, docs)
    body = tmp_path / "v3.json"
    body.write_text(json.dumps({"tier_rates": {"T1": "0.150"}, "tolerance": "0.05"}))
    out = tmp_path / "preview.csv"
    ids = [arg for d in docs for arg in ("--document", d["document_id"])]
    printed = settleq(
        url,
        "contracts",
        "preview",
        "promo_accrual",
        "V-1",
        str(body),
        *ids,
        "--csv",
        str(out),
        token=OPERATOR_TOKEN,
    ).stdout
    assert "preview of promo_accrual/V-1 as version 3" in printed  # versions 1, 2 are published
    assert "posted→disputed: 1 lines" in printed
    assert "disputed→posted: 1 lines" in printed
    assert "digest sha256:" in printed
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["document_id"] for r in rows) == sorted(d["document_id"] for d in docs)
    refused = settleq(
        url,
        "contracts",
        "preview",
        "promo_accrual",
        "V-1",
        str(body),
        "--period",
        "1999-01",
        token=OPERATOR_TOKEN,
        code=1,
    )
    assert "404 period_not_found" in refused.stderr
