"""The audit of the lock (.ci/audit_lock.py, `make audit`), on made-up project pages.

No network: the pages are passed in as the fetch function.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("audit_lock", ROOT / ".ci" / "audit_lock.py")
assert _spec is not None and _spec.loader is not None
audit_lock = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audit_lock)

PAGES: dict[str, dict[str, Any]] = {
    "safe": {"info": {"version": "1.0"}, "vulnerabilities": []},
    "bad": {
        "info": {"version": "2.0"},
        "vulnerabilities": [
            {"id": "PYSEC-1", "aliases": ["CVE-1"], "fixed_in": ["2.1"], "withdrawn": None},
            {"id": "PYSEC-2", "aliases": [], "fixed_in": [], "withdrawn": "2026-01-01"},
        ],
    },
    "old": {"info": {"version": "3.1"}, "vulnerabilities": [{"id": "PYSEC-3"}]},
}


def test_pins_are_read_from_a_lock() -> None:
    lock = "# made by make lock\nsafe==1.0\n    # via settleq (pyproject.toml)\nbad==2.0\n"
    assert audit_lock.pins(lock) == {"safe": "1.0", "bad": "2.0"}


def test_an_advisory_of_a_pinned_latest_release_is_a_finding() -> None:
    findings, unaudited = audit_lock.audit({"safe": "1.0", "bad": "2.0"}, PAGES.__getitem__)
    assert findings == ["bad==2.0: PYSEC-1 (fixed in: 2.1)"]  # the withdrawn one is not
    assert unaudited == []


def test_an_ignored_advisory_is_not_a_finding_by_its_id_or_an_alias() -> None:
    for ignored in ("PYSEC-1", "CVE-1"):
        assert audit_lock.audit({"bad": "2.0"}, PAGES.__getitem__, [ignored]) == ([], [])


def test_a_pin_older_than_the_latest_release_is_listed_not_judged() -> None:
    # The project's page describes its latest release only.
    assert audit_lock.audit({"old": "3.0"}, PAGES.__getitem__) == (
        [],
        ["old==3.0 (latest is 3.1)"],
    )


def test_the_audit_runs_in_make_check_and_never_in_make_test() -> None:
    makefile = (ROOT / "Makefile").read_text()
    check = re.search(r"^check: (.+)$", makefile, re.MULTILINE)
    test = re.search(r"^test: (.*)\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert check is not None and "audit" in check[1].split()
    assert test is not None and "audit" not in test[0] and "pip-audit" not in test[0]
