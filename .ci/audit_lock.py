"""Known vulnerabilities of the lock's pins, from PyPI's project pages.

pip-audit asks PyPI's per-release JSON page (/pypi/NAME/VERSION/json) of each
pin. Where that page is not served (this project's machines and CI answer 404
for every release), pip-audit skips every pin and still prints "No known
vulnerabilities found". This check covers that gap with the page that is served,
the project's (/pypi/NAME/json): it describes the latest release, so each pin
that is its project's latest release is audited from it, and it fails on any
advisory listed there that is not withdrawn. A pin older than its project's
latest release cannot be audited from that page: it is listed, not failed.

    python .ci/audit_lock.py constraints.txt [--ignore-vuln ID ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pip._internal.models.index import PyPI  # the public index's address, as pip knows it

PROJECT_PAGE = PyPI.pypi_url + "/{name}/json"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)", re.MULTILINE)


def pins(lock_text: str) -> dict[str, str]:
    return dict(PIN.findall(lock_text))


def fetch_project(name: str) -> dict[str, Any]:
    with urllib.request.urlopen(PROJECT_PAGE.format(name=name), timeout=60) as answer:
        page: dict[str, Any] = json.load(answer)
    return page


def audit(
    pinned: dict[str, str],
    fetch: Callable[[str], dict[str, Any]] = fetch_project,
    ignore: Iterable[str] = (),
) -> tuple[list[str], list[str]]:
    """(findings, unaudited): one line per advisory of a pinned latest release,
    and one per pin that is not its project's latest release."""
    ignored = set(ignore)
    findings: list[str] = []
    unaudited: list[str] = []
    with ThreadPoolExecutor(8) as pool:
        pages = dict(zip(pinned, pool.map(fetch, pinned), strict=True))
    for name, version in sorted(pinned.items()):
        latest = pages[name]["info"]["version"]
        if latest != version:
            unaudited.append(f"{name}=={version} (latest is {latest})")
            continue
        for advisory in pages[name].get("vulnerabilities") or []:
            names = {advisory["id"], *(advisory.get("aliases") or [])}
            if advisory.get("withdrawn") or names & ignored:
                continue
            fixed = ", ".join(advisory.get("fixed_in") or []) or "no fixed release"
            findings.append(f"{name}=={version}: {advisory['id']} (fixed in: {fixed})")
    return findings, unaudited


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock")
    parser.add_argument("--ignore-vuln", action="append", default=[], metavar="ID")
    args = parser.parse_args(argv)
    with open(args.lock, encoding="utf-8") as lock:
        pinned = pins(lock.read())
    findings, unaudited = audit(pinned, ignore=args.ignore_vuln)
    audited = len(pinned) - len(unaudited)
    print(f"audit_lock: {audited} of {len(pinned)} pins audited from their project's page")
    for line in unaudited:
        print(f"audit_lock: not audited here, not the latest release: {line}")
    for line in findings:
        print(f"audit_lock: VULNERABLE {line}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
