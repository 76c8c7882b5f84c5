"""``settleq partners``: trading-partner profiles (docs/api.md#trading-partners);
``settleq partitions``: a partition's counterparty in the ERP
(docs/api.md#a-partitions-erp-counterparty). ``put`` needs an operator token,
``list`` and ``show`` a viewer's."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.table import Table

from services.commands.errors import answer
from services.commands.intake.edi import verdict
from services.commands.options import (
    DEFAULT_URL,
    OperatorTokenOpt,
    TokenOpt,
    UrlOpt,
    console,
    show,
    token_client,
)
from shared.domain.partners import ACKNOWLEDGE
from shared.domain.remittances.profile import DEFAULT_WINDOW_DAYS

app = typer.Typer(help="Trading-partner profiles: what an X12 sender's files settle against.")
partitions = typer.Typer(
    help="A partition's counterparty in the ERP its journal is imported into (the id its"
    " vendor, carrier or recipe has there)."
)
PartitionArg = Annotated[str, typer.Argument(help="A vendor, carrier or recipe.")]
QualifierArg = Annotated[str, typer.Argument(help="The sender's ISA05 qualifier, e.g. ZZ or 02.")]
SenderArg = Annotated[str, typer.Argument(help="The sender's ISA06 id, without its padding.")]


def _path(qualifier: str, sender_id: str) -> str:
    return f"/v1/partners/{quote(qualifier, safe='')}/{quote(sender_id, safe='')}"


def _acknowledge(value: str) -> str:
    if value not in ACKNOWLEDGE:
        raise typer.BadParameter(f"{value!r}: one of {', '.join(ACKNOWLEDGE)}")
    return value


def _payer(
    partition_key: str | None, absolute: str | None, percent: str | None, reasons: list[str] | None
) -> dict[str, Any]:
    """A payer's part of the body: what the API checks, sent as typed."""
    body: dict[str, Any] = {}
    if partition_key is not None:
        body["payer_partition_key"] = partition_key
    tolerance = {k: v for k, v in (("absolute", absolute), ("percent", percent)) if v is not None}
    if tolerance:
        body["tolerance"] = tolerance
    if reasons:
        pairs = [r.partition("=") for r in reasons]
        if any(not code or not sep or not cls for code, sep, cls in pairs):
            raise typer.BadParameter("--reason takes CODE=CLASS, e.g. 70=promotion")
        body["deduction_reasons"] = {code: cls for code, _, cls in pairs}
    return body


@app.command("put")
def put(
    qualifier: QualifierArg,
    sender_id: SenderArg,
    name: Annotated[str, typer.Option(help="The partner's name, for people.")],
    contract_version: Annotated[
        int, typer.Option(min=1, help="The contract version its files settle against.")
    ],
    partition_key: Annotated[
        str | None, typer.Option(help="810s: the vendor its invoices settle for.")
    ] = None,
    period: Annotated[str | None, typer.Option(help="810s: the period, e.g. 2026-Q3.")] = None,
    acknowledge: Annotated[
        str,
        typer.Option(callback=_acknowledge, help="997s: " + ", ".join(ACKNOWLEDGE) + "."),
    ] = "always",
    key_id: Annotated[
        list[str] | None,
        typer.Option(
            "--key-id",
            help="A producer key that may send its files (repeat for several); none: any key.",
        ),
    ] = None,
    payer_partition_key: Annotated[
        str | None,
        typer.Option(help="820s: the partition the payer's deductions are matched in."),
    ] = None,
    tolerance_absolute: Annotated[
        str | None,
        typer.Option(
            help="820s: how far a promotion deduction may pass an open amount, e.g. 1.00."
        ),
    ] = None,
    tolerance_percent: Annotated[
        str | None,
        typer.Option(
            help="820s: the same in points of the open amount (2 is 2%); both: the smaller."
        ),
    ] = None,
    reason: Annotated[
        list[str] | None,
        typer.Option(
            "--reason",
            help="820s: the payer's own reason code and its class, CODE=CLASS (repeat).",
        ),
    ] = None,
    dispute_window_days: Annotated[
        int | None,
        typer.Option(min=0, help="820s: the days a deduction may be disputed in (30)."),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Create or replace a trading partner's profile (operator token; audited)."""
    body: dict[str, Any] = {
        "name": name,
        "contract_version": contract_version,
        "acknowledge": acknowledge,
    }
    if key_id:
        body["key_ids"] = key_id
    if partition_key is not None:
        body["partition_key"] = partition_key
    if period is not None:
        body["period"] = period
    body |= _payer(payer_partition_key, tolerance_absolute, tolerance_percent, reason)
    if dispute_window_days is not None:
        body["dispute_window_days"] = dispute_window_days
    client = token_client(url, token, "an operator")
    response = client.bearer("PUT", _path(qualifier, sender_id), body)
    found = answer(response)
    verb = "created" if response.status_code == 201 else "replaced"
    console.print(
        f"{verb} partner {found['isa_qualifier']}/{found['isa_id']} ({found['name']}):"
        f" contract version {found['contract_version']}, acknowledge {found['acknowledge']}",
        markup=False,
    )


@app.command("list")
def list_partners(url: UrlOpt = DEFAULT_URL, token: TokenOpt = None) -> None:
    """Every trading partner's profile (viewer token)."""
    page = answer(token_client(url, token, "a viewer").bearer("GET", "/v1/partners"))
    table = Table(title="trading partners")
    columns = ("sender", "name", "version", "partition", "period", "acknowledge", "last file")
    for column in (*columns, "refused"):
        table.add_column(column)
    for p in page["items"]:
        table.add_row(
            f"{p['isa_qualifier']}/{p['isa_id']}",
            p["name"],
            str(p["contract_version"]),
            p["partition_key"] or "",
            p["period"] or "",
            p["acknowledge"],
            p["last_file_at"] or "none yet",
            f"{p['refusal_rate']:.0%}",
        )
    show(table)


@app.command("show")
def show_partner(
    qualifier: QualifierArg,
    sender_id: SenderArg,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """A trading partner's profile and health: its latest files, the lines of its
    jobs waiting in dead letters and why, its open disputes (viewer token)."""
    p = answer(token_client(url, token, "a viewer").bearer("GET", _path(qualifier, sender_id)))
    for label, value in (
        ("sender", f"{p['isa_qualifier']}/{p['isa_id']}"),
        ("name", p["name"]),
        ("contract version", p["contract_version"]),
        ("partition", p["partition_key"] or "-"),
        ("period", p["period"] or "-"),
        ("acknowledge", p["acknowledge"]),
        ("sent by", ", ".join(p.get("key_ids") or []) or "any producer key"),
        ("payer of", p.get("payer_partition_key") or "-"),
        ("tolerance", _tolerance(p.get("tolerance"))),
        ("reason codes", _reasons(p.get("deduction_reasons"))),
        ("dispute window", f"{_window(p.get('dispute_window_days'))} days"),
        ("updated", p["updated_at"]),
    ):
        console.print(f"{label}: {value}", markup=False)
    _print_health(p)


def _tolerance(tolerance: dict[str, str] | None) -> str:
    if not tolerance:
        return "none (a deduction matches exactly or is disputed)"
    parts = [f"{tolerance['absolute']}" if "absolute" in tolerance else ""]
    parts.append(f"{tolerance['percent']}%" if "percent" in tolerance else "")
    return ", ".join(p for p in parts if p) + (" (the smaller)" if all(parts) else "")


def _window(days: int | None) -> int:
    return DEFAULT_WINDOW_DAYS if days is None else days


def _reasons(reasons: dict[str, str] | None) -> str:
    return ", ".join(f"{c}={k}" for c, k in sorted((reasons or {}).items())) or "X12's defaults"


# What a partner's dead-lettered lines are waiting for, said to its operator.
_WAITING = {
    "unknown_contract_version": (
        "the contract version its files settle at is not published for their partition:"
        " publish it (settleq contracts put KIND PARTITION {version} FILE), then requeue"
        " them (settleq dlq requeue)"
    ),
}


def _print_health(p: dict[str, Any]) -> None:
    health = p["health"]
    files = health["accepted_files"] + health["refused_files"]
    console.print(
        f"files: {files} ({health['refused_files']} refused, {health['refusal_rate']:.0%})",
        markup=False,
    )
    if health["files"]:
        table = Table(title="latest files")
        for column in ("received", "job", "sets accepted", "sets refused", "refused for"):
            table.add_column(column)
        for f in health["files"]:
            table.add_row(
                f["received_at"],
                f["job_id"] or "refused",
                str(f["sets_accepted"]),
                str(f["sets_refused"]),
                ", ".join(f["refusal_codes"]),
            )
        show(table)
    for f in health["files"]:
        if f["job_id"] is None and f.get("refusal_message"):
            # Headed as the 997 it carried says (as ``settleq submit`` heads it).
            said = verdict(f["acknowledgement"]) if f.get("acknowledgement") else "no 997"
            console.print(
                f"refused {f['received_at']} ({said}): {f['refusal_message']}",
                markup=False,
                soft_wrap=True,
            )
    for reason, count in health["dead_letters"].items():
        why = _WAITING.get(reason, "see settleq dlq list --reason " + reason)
        console.print(
            f"{count:,} line(s) wait in dead letters as {reason}: "
            + why.format(version=p["contract_version"]),
            markup=False,
            soft_wrap=True,
        )
    disputes = health["open_disputes"]
    console.print(
        f"open disputes: {disputes['count']:,} (variance {disputes['variance']})", markup=False
    )


@partitions.command("put")
def put_partition(
    partition_key: PartitionArg,
    erp_counterparty: Annotated[
        str | None,
        typer.Option(
            help="Its id in the ERP (a NetSuite entity, an Oracle third party, a SAP business"
            " partner); none given: it has none.",
            show_default=False,
        ),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Name a partition's counterparty in the ERP (operator token; audited)."""
    client = token_client(url, token, "an operator")
    path = f"/v1/partitions/{quote(partition_key, safe='')}"
    response = client.bearer("PUT", path, {"erp_counterparty": erp_counterparty})
    found = answer(response)
    verb = "set" if response.status_code == 201 else "replaced"
    console.print(
        f"{verb} partition {found['partition_key']}: ERP counterparty"
        f" {found['erp_counterparty'] or 'none'}",
        markup=False,
    )


@partitions.command("show")
def show_partition(
    partition_key: PartitionArg, url: UrlOpt = DEFAULT_URL, token: TokenOpt = None
) -> None:
    """A partition's counterparty in the ERP, and when it was put (viewer token)."""
    client = token_client(url, token, "a viewer")
    found = answer(client.bearer("GET", f"/v1/partitions/{quote(partition_key, safe='')}"))
    console.print(
        f"partition {found['partition_key']}: ERP counterparty"
        f" {found['erp_counterparty'] or 'none'} (updated {found['updated_at']})",
        markup=False,
    )
