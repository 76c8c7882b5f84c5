"""A dead letter's excerpt: the failed line as compact JSON, never more than 240 characters."""

from __future__ import annotations

import json

from services.api.dead_letters.excerpt import EXCERPT_CHARS, excerpt


def test_the_failed_line_is_picked_from_its_document() -> None:
    document = {"document_id": "INV-1", "lines": [{"line_no": 1}, {"line_no": 2, "sku": "é"}]}
    assert excerpt(json.dumps(document), 1) == '{"line_no":2,"sku":"é"}'
    assert excerpt(json.dumps(document), None).startswith('{"document_id":"INV-1"')
    assert excerpt(json.dumps(document), 7).startswith('{"document_id"')  # out of range


def test_long_and_unreadable_payloads_are_cut_with_an_ellipsis() -> None:
    cut = excerpt(json.dumps({"lines": [{"sku": "x" * 1000}]}), 0)
    assert len(cut) == EXCERPT_CHARS and cut.endswith("…")
    assert excerpt("not json", None) == "not json"
    assert excerpt("[1, 2]", 0) == "[1, 2]"
