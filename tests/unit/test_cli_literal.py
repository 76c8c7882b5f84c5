"""Data is printed as sent (§6; issue 42, item 17): a ``[/x]``, a ``[bold]`` or an
ANSI escape in a URL, a name or a note neither crashes a command (Rich's
``MarkupError``) nor restyles its output nor the operator's terminal. Every list
and show command's printer is fed such data by an API answering over an
in-memory transport (the printers, not the API, are under test here)."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

import services.commands.client
from services.commands.cli import app
from services.commands.literal import visible
from tests.support.stack import ROOT

pytestmark = pytest.mark.usefixtures("restore_logging")
runner = CliRunner()

HOSTILE = "a[/x]b[bold]c\x1b[31md:smile:"
SHOWN = "a[/x]b[bold]c\\x1b[31md:smile:"
URL = "https://hooks.example/[/x]/[bold]?\x1b[31m"
NOW = "2026-12-05T17:00:00Z"
ENV = {"COLUMNS": "250", "SETTLEQ_CLIENT_TOKEN": "t", "SETTLEQ_CLIENT_KEY_ID": "k1"}


def _endpoint() -> dict[str, Any]:
    return {
        "id": "we_1",
        "key_id": HOSTILE,
        "url": URL,
        "events": ["job.completed"],
        "status": "disabled",
        "disabled_reason": HOSTILE,
        "failing_since": None,
        "description": HOSTILE,
    }


def _partner() -> dict[str, Any]:
    return {
        "isa_qualifier": "ZZ",
        "isa_id": HOSTILE,
        "name": HOSTILE,
        "contract_version": 1,
        "partition_key": HOSTILE,
        "period": None,
        "acknowledge": "always",
        "last_file_at": None,
        "refusal_rate": 0.5,
        "updated_at": NOW,
        "health": {
            "accepted_files": 1,
            "refused_files": 1,
            "refusal_rate": 0.5,
            "files": [
                {
                    "received_at": NOW,
                    "job_id": None,
                    "sets_accepted": 0,
                    "sets_refused": 1,
                    "refusal_codes": [HOSTILE],
                }
            ],
            "dead_letters": {HOSTILE: 2},
            "open_disputes": {"count": 0, "variance": "0"},
        },
    }


def _line() -> dict[str, Any]:
    return {
        "job_id": "j1",
        "partition_key": HOSTILE,
        "line_ref": HOSTILE,
        "contract_version": 1,
        "outcome": "dead_lettered",
        "reason": HOSTILE,
        "amount": None,
        "claimed_amount": "1.00",
        "delta": None,
        "kind": "promo_accrual",
        "dispute_status": None,
        "document_id": HOSTILE,
    }


KEY = "a" * 64


def _dispute() -> dict[str, Any]:
    return {
        "id": 7,
        "kind": "promo_accrual",
        "partition_key": HOSTILE,
        "document_id": HOSTILE,
        "line_ref": HOSTILE,
        "claimed_amount": "5.00",
        "model_amount": "0.25",
        "variance": "4.75",
        "status": "open",
        "opened_at": NOW,
    }


def _job() -> dict[str, Any]:
    return {
        "job_id": "j1",
        "kind": "promo_accrual",
        "state": "completed",
        "created_at": NOW,
        "lines": 1,
        "outcomes": {"posted": 1, "disputed": 0, "duplicate": 0, "dead_lettered": 0},
        "amounts": {"posted": "1.00"},
    }


ANSWERS: dict[str, Callable[[], Any]] = {
    "/v1/webhook-endpoints": lambda: {"items": [_endpoint()], "next_cursor": None},
    "/admin/webhook-endpoints": lambda: {"items": [_endpoint()], "next_cursor": None},
    "/v1/webhook-endpoints/we_1/deliveries": lambda: {
        "items": [
            {
                "id": "dlv_1",
                "event_id": "ev_1",
                "event_type": HOSTILE,
                "status": "failed",
                "next_attempt_at": None,
                "attempt_log": [
                    {
                        "at": NOW,
                        "status_code": None,
                        "error": HOSTILE,
                        "latency_ms": 3,
                        "detail": HOSTILE,
                        "answer": HOSTILE,
                    }
                ],
            }
        ],
        "next_cursor": HOSTILE,
    },
    "/v1/partners": lambda: {"items": [_partner()]},
    "/v1/partners/ZZ/SENDER": _partner,
    "/admin/dead-letters": lambda: {
        "items": [
            {
                "id": 1,
                "job_id": "j1",
                "partition_key": HOSTILE,
                "document_id": HOSTILE,
                "line_ref": HOSTILE,
                "reason": "invalid_line",
                "lines": 1,
                "status": "pending",
            }
        ],
        "next_cursor": None,
    },
    "/admin/audit": lambda: {
        "items": [
            {
                "id": 1,
                "at": NOW,
                "actor": HOSTILE,
                "action": "discard",
                "target": HOSTILE,
                "details": {"note": HOSTILE},
            }
        ],
        "next_cursor": None,
    },
    "/v1/lines": lambda: {"items": [_line()], "next_cursor": None},
    "/v1/disputes": lambda: {"items": [_dispute()], "next_cursor": None},
    "/v1/disputes/stats": lambda: {
        "totals": [
            {
                "status": "open",
                "kind": "promo_accrual",
                "count": 1,
                "claimed": "5.00",
                "model": "0.25",
                "variance": "4.75",
                "abs_variance": "4.75",
            }
        ],
        "top_partitions": [
            {
                "kind": "promo_accrual",
                "partition_key": HOSTILE,
                "open_count": 1,
                "open_variance": "4.75",
                "open_abs_variance": "4.75",
            }
        ],
        "oldest_open_at": NOW,
    },
    "/v1/jobs/j1": _job,
    "/v1/jobs/j1/lines": lambda: {"items": [_line()], "next_cursor": None},
    "/v1/contracts": lambda: {
        "items": [
            {
                "kind": "promo_accrual",
                "partition_key": HOSTILE,
                "version": 1,
                "created_at": NOW,
                "body_sha256": "b" * 64,
            }
        ],
        "next_cursor": None,
    },
    f"/v1/identities/{KEY}": lambda: {
        "kind": "promo_accrual",
        "partition_key": HOSTILE,
        "document_id": HOSTILE,
        "line_ref": HOSTILE,
        "entries": [
            {
                "ledger_entry_id": 1,
                "job_id": "j1",
                "contract_version": 1,
                "outcome": "disputed",
                "amount": "0.25",
                "claimed_amount": "5.00",
                "delta": "0.25",
                "supersedes_id": None,
                "created_at": NOW,
            }
        ],
        "amount_now": "0.25",
        "open_dispute": None,
    },
}

COMMANDS = [
    ["webhooks", "list"],
    ["webhooks", "list", "--all"],
    ["webhooks", "deliveries", "we_1"],
    ["partners", "list"],
    ["partners", "show", "ZZ", "SENDER"],
    ["dlq", "list"],
    ["audit", "list"],
    ["lines", "find", "--document", "INV-1"],
    ["disputes", "list"],
    ["disputes", "stats"],
    ["jobs", "lines", "j1"],
    ["contracts", "list"],
    ["identity", KEY],
]


@pytest.fixture
def hostile_api(monkeypatch: pytest.MonkeyPatch) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=ANSWERS[request.url.path]())

    real = services.commands.client.Client

    def client(base_url: str, **kwargs: Any) -> Any:
        transport = httpx.MockTransport(handle)
        http = httpx.Client(base_url=base_url, transport=transport)
        return real(base_url, http=http, **kwargs)

    monkeypatch.setattr(services.commands.client, "Client", client)
    monkeypatch.setenv("SETTLEQ_CLIENT_SECRET", "s")


@pytest.mark.regression
@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
@pytest.mark.usefixtures("hostile_api")
def test_every_printer_shows_markup_and_escapes_as_sent(argv: list[str]) -> None:
    result = runner.invoke(app, argv, env=ENV)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output  # no escape reaches the terminal
    text = "".join(result.output.split())  # a table may wrap a long cell
    assert "".join(SHOWN.split()) in text or "".join(visible(URL).split()) in text, result.output


@pytest.mark.regression
@pytest.mark.parametrize("argv", COMMANDS[:3], ids=" ".join)
@pytest.mark.usefixtures("hostile_api")
def test_an_endpoint_url_is_shown_as_sent(argv: list[str]) -> None:
    result = runner.invoke(app, argv, env=ENV)
    assert result.exit_code == 0, result.output
    if argv[1] == "list":
        assert "".join(visible(URL).split()) in "".join(result.output.split()), result.output


def test_json_printers_keep_data_as_json() -> None:
    # dlq show, disputes show, contracts get print the API's JSON: escaped by JSON.
    assert "\\u001b" in json.dumps(HOSTILE)


def test_every_command_prints_through_the_literal_console() -> None:
    # One console reads no markup; a second Console, or markup put back on a
    # print, would print data unescaped again.
    for path in sorted((ROOT / "services" / "commands").rglob("*.py")):
        source = path.read_text()
        if path.name not in ("literal.py", "options.py"):
            assert "Console(" not in source, f"{path.name}: print through options.console"
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.keyword) and node.arg == "markup":
                assert not (isinstance(node.value, ast.Constant) and node.value.value is True), (
                    f"{Path(path).name}: markup=True prints data as markup"
                )
