"""``settleq remittances submit|list|show`` and ``settleq deductions
list|show|aging|decide``: what payers paid and took off, from the command line
(docs/operations.md#remittances-and-deductions,
docs/api.md#remittances-and-deductions).

A remittance is submitted signed by a producer key, as ``settleq submit``
signs a batch: an X12 820 when the file starts with ISA, else JSON. Reads take
a viewer's token (or an operator's); a decision an operator's. Money is shown
at the accrual kind's quantum, as the API sends it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

import typer
from rich.table import Table

from services.commands.errors import FAILED, answer, say
from services.commands.intake import edi
from services.commands.money import money
from services.commands.options import (
    DEFAULT_URL,
    KeyOpt,
    OperatorTokenOpt,
    SecretOpt,
    TokenOpt,
    UrlOpt,
    amount_column,
    console,
    export_csv,
    make_client,
    partition_key_option,
    print_more,
    show,
    token_client,
)
from shared.domain.kinds import DEDUCTION_KIND

app = typer.Typer(
    help="Remittances (what payers paid and took off): submit an 820 or JSON, list, show"
    " (producer key to submit, viewer token to read)."
)
deductions = typer.Typer(
    help="Deductions (money a payer took): list, export (CSV), show, aging, and decide a"
    " disputed one (viewer token to read, operator token to decide)."
)

PartitionOpt = Annotated[str | None, partition_key_option("Only this payer partition's.")]
LimitOpt = Annotated[int, typer.Option(min=1, max=1000, help="At most this many (one page).")]
CursorOpt = Annotated[str | None, typer.Option(help="The next page's cursor.")]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the API's answer as JSON (for a script).")
]


def _m(value: str | None) -> str:
    return money(value, DEDUCTION_KIND)


def _query(**fields: Any) -> str:
    given = urlencode({k: v for k, v in fields.items() if v is not None})
    return f"?{given}" if given else ""


def _viewer(ctx: typer.Context, url: str, token: str | None) -> Any:
    client = token_client(url, token, "a viewer")
    ctx.call_on_close(client.close)
    return client


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


# --- remittances ------------------------------------------------------------------


def _with_partition(body: bytes, partition_key: str) -> bytes:
    """A JSON remittance with ``partition_key`` (the file's own, when it names
    the same or none); another is a usage error."""
    try:
        given = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body  # the API says what is wrong with it
    if not isinstance(given, dict):
        return body
    named = given.get("partition_key")
    if named is not None and named != partition_key:
        raise typer.BadParameter(
            f"the file names partition_key {named!r}, not {partition_key!r}",
            param_hint="--partition-key",
        )
    given["partition_key"] = partition_key
    return json.dumps(given).encode()


@app.command("submit")
def remittances_submit(
    file: Annotated[
        Path,
        typer.Argument(help="An X12 820 (starts with ISA) or a JSON remittance; - reads stdin."),
    ],
    partition_key: Annotated[
        str | None,
        partition_key_option(
            "JSON: the payer partition, when the file names none (an 820's payer names its"
            " own, through its trading-partner profile)."
        ),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
) -> None:
    """Sign and submit a remittance: its deductions are matched on receipt, and
    each remittance is printed with what was matched, written off and disputed.
    The same file again answers the same remittances (nothing changes); an
    820 refused prints each problem and its 997 (exit 1)."""
    try:
        body = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
    except OSError as exc:
        say(f"cannot read {file}: {exc.strerror or type(exc).__name__}")
        raise typer.Exit(FAILED) from None
    x12 = edi.is_x12(body)
    if x12 and partition_key is not None:
        raise typer.BadParameter(
            "an 820's payer names its partition (its trading-partner profile's"
            " payer_partition_key): give --partition-key for JSON only",
            param_hint="--partition-key",
        )
    if partition_key is not None:
        body = _with_partition(body, partition_key)
    client = make_client(url, key_id, secret, None)
    ctype = edi.EDI_X12 if x12 else "application/json"
    response = client.signed("POST", "/v1/remittances", body, {"Content-Type": ctype})
    if x12:
        edi.refuse(response)
    got = answer(response)
    for r in got["remittances"]:
        said = "received" if r["created"] else "already received as"
        console.print(
            f"{said} remittance {r['id']} (trace {r['trace']}, payer {r['payer']},"
            f" partition {r['partition_key']}): {r['deductions']} deduction(s);"
            f" matched {_m(r['matched'])}, written off {_m(r['written_off'])},"
            f" disputed {_m(r['disputed'])}",
            soft_wrap=True,
        )
        check = r["balance_difference"]
        if check is not None:
            console.print(
                f"  does not balance: stated {_m(check['stated'])}, computed"
                f" {_m(check['computed'])}, difference {_m(check['difference'])}",
                soft_wrap=True,
            )
    if got.get("acknowledgement"):
        edi.print_997(got["acknowledgement"], edi.verdict(got["acknowledgement"]))


@app.command("list")
def remittances_list(
    ctx: typer.Context,
    partition_key: PartitionOpt = None,
    limit: LimitOpt = 100,
    cursor: CursorOpt = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """List remittances, newest first, with their deductions' sums."""
    client = _viewer(ctx, url, token)
    path = "/v1/remittances" + _query(partition_key=partition_key, limit=limit, cursor=cursor)
    page = answer(client.bearer("GET", path))
    if as_json:
        _print_json(page)
        return
    table = Table(title="remittances")
    for column in ("id", "received", "partition", "payer", "trace", "format"):
        table.add_column(column, no_wrap=column in ("id", "received"))
    for column in ("paid", "deductions", "matched", "written off", "disputed", "unbalanced by"):
        amount_column(table, column)
    for r in page["remittances"]:
        check = r["balance_difference"]
        table.add_row(
            r["id"],
            r["received_at"][:19] + "Z",
            r["partition_key"],
            r["payer"],
            r["trace"],
            r["source_format"],
            f"{_m(r['paid_total'])} {r['currency']}",
            str(r["deductions"]),
            _m(r["matched"]),
            _m(r["written_off"]),
            _m(r["disputed"]),
            "" if check is None else _m(check["difference"]),
        )
    show(table)
    print_more(page)


def _reason(d: dict[str, Any]) -> str:
    """Its class and the payer's own code, once when they are the same word."""
    if d["reason_code"] == d["reason_class"]:
        return str(d["reason_class"])
    return f"{d['reason_class']} ({d['reason_code']})"


def _deductions_table(title: str, found: list[dict[str, Any]]) -> Table:
    table = Table(title=title)
    for column in ("id", "partition", "reason", "reference", "deducted on", "status"):
        table.add_column(column, no_wrap=column in ("id", "deducted on"))
    for column in ("amount", "matched", "written off", "open", "days"):
        amount_column(table, column)
    table.add_column("due on", no_wrap=True)
    for d in found:
        late = " (past window)" if d["past_window"] else ""
        table.add_row(
            str(d["id"]),
            d["partition_key"],
            _reason(d),
            d["reference"] or "",
            d["deducted_on"],
            d["status"] + late,
            _m(d["amount"]),
            _m(d["matched"]),
            _m(d["written_off"]),
            _m(d["disputed"]),
            str(d["days_outstanding"]),
            d["due_on"],
        )
    return table


@app.command("show")
def remittances_show(
    ctx: typer.Context,
    remittance_id: Annotated[str, typer.Argument(help="The remittance's id (rm_...).")],
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Show one remittance: its balance check, lines, adjustments, deductions
    (with where each stands) and the 997 sent with it."""
    client = _viewer(ctx, url, token)
    r = answer(client.bearer("GET", f"/v1/remittances/{remittance_id}"))
    if as_json:
        _print_json(r)
        return
    console.print(
        f"remittance {r['id']}: trace {r['trace']}, payer {r['payer']}, partition"
        f" {r['partition_key']} ({r['source_format']}), paid {_m(r['paid_total'])}"
        f" {r['currency']} on {r['paid_at'] or '-'}, received {r['received_at']}",
        soft_wrap=True,
    )
    check = r["balance_difference"]
    console.print(
        f"balances: the stated {_m(r['paid_total'])} is the lines paid plus the standalone"
        " adjustments"
        if check is None
        else f"does not balance: stated {_m(check['stated'])}, computed"
        f" {_m(check['computed'])}, difference {_m(check['difference'])}"
    )
    lines = Table(title="lines")
    for column in ("reference", "qualifier"):
        lines.add_column(column)
    for column in ("paid", "invoiced", "discount"):
        amount_column(lines, column)
    lines.add_column("adjustments")
    for line in r["lines"]:
        lines.add_row(
            line["reference"],
            line["qualifier"] or "",
            _m(line["paid"]),
            _m(line["invoiced"]),
            _m(line["discount"]),
            "; ".join(_adjustment(a) for a in line["adjustments"]),
        )
    show(lines)
    if r["adjustments"]:
        console.print("adjustments: " + "; ".join(_adjustment(a) for a in r["adjustments"]))
    show(_deductions_table("deductions", r["deductions"]))
    console.print(
        f"matched {_m(r['matched'])}, written off {_m(r['written_off'])}, open {_m(r['disputed'])}"
    )
    if r["acknowledgement"]:
        edi.print_997(r["acknowledgement"], edi.verdict(r["acknowledgement"]))


def _adjustment(a: dict[str, Any]) -> str:
    reference = f" {a['reference']}" if a["reference"] else ""
    return f"{_m(a['amount'])} ({a['reason_code']}){reference}"


# --- deductions -------------------------------------------------------------------


@deductions.command("list")
def deductions_list(
    ctx: typer.Context,
    status: Annotated[
        str | None,
        typer.Option(help="open (disputed or denied), matched, written_off, disputed or denied."),
    ] = None,
    partition_key: PartitionOpt = None,
    reason_class: Annotated[
        str | None, typer.Option(help="promotion, pricing, shortage, freight, other...")
    ] = None,
    aged_over: Annotated[
        int | None, typer.Option(min=0, help="Only those deducted more than N days ago.")
    ] = None,
    limit: LimitOpt = 100,
    cursor: CursorOpt = None,
    csv_file: Annotated[
        str | None,
        typer.Option(
            "--csv", help="Write EVERY matching deduction as CSV to this file ('-': stdout)."
        ),
    ] = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """List deductions, oldest first, filtered; or export them all with --csv FILE."""
    client = _viewer(ctx, url, token)
    filters = {
        "status": status,
        "partition_key": partition_key,
        "reason_class": reason_class,
        "aged_over": aged_over,
    }
    if csv_file is not None:
        path = "/v1/deductions" + _query(**filters, format="csv")
        export_csv(client, path, csv_file, "deductions")
        return
    page = answer(
        client.bearer("GET", "/v1/deductions" + _query(**filters, limit=limit, cursor=cursor))
    )
    if as_json:
        _print_json(page)
        return
    show(_deductions_table(f"deductions ({status or 'all'})", page["deductions"]))
    print_more(page)


@deductions.command("show")
def deductions_show(
    ctx: typer.Context,
    deduction_id: Annotated[int, typer.Argument(help="The deduction's id.")],
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Show one deduction: where it stands, its dates, its decision and the
    ledger rows booked for it."""
    client = _viewer(ctx, url, token)
    d = answer(client.bearer("GET", f"/v1/deductions/{deduction_id}"))
    if as_json:
        _print_json(d)
        return
    table = Table(title=f"deduction {d['id']}", show_header=False)
    table.add_column("field")
    table.add_column("value")
    for name in (
        "remittance_id",
        "seq",
        "partition_key",
        "status",
        "reason_class",
        "reason_code",
        "reference",
        "line_reference",
        "deducted_on",
        "due_on",
        "days_outstanding",
        "past_window",
        "dispute_reason",
        "dispute_document_id",
        "decision",
        "decision_note",
        "decided_at",
    ):
        value = d[name]
        table.add_row(
            name,
            "" if value is None else str(value).lower() if isinstance(value, bool) else str(value),
        )
    for name in ("amount", "matched", "written_off", "disputed"):
        table.add_row(name, _m(d[name]))
    show(table)
    if d["matches"]:
        booked = Table(title="ledger rows booked for it")
        booked.add_column("document")
        booked.add_column("outcome")
        amount_column(booked, "amount")
        for m in d["matches"]:
            booked.add_row(m["document_id"], m["outcome"], _m(m["amount"]))
        show(booked)


@deductions.command("aging")
def deductions_aging(
    ctx: typer.Context,
    partition_key: PartitionOpt = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """What payers still owe (disputed and undecided, or denied), per partition,
    by age (days since deducted), past its window, with the amount-weighted
    days outstanding; then per reason class."""
    client = _viewer(ctx, url, token)
    aging = answer(
        client.bearer("GET", "/v1/deductions/aging" + _query(partition_key=partition_key))
    )
    if as_json:
        _print_json(aging)
        return
    buckets = ("0-30", "31-60", "61-90", "90+")
    table = Table(title=f"open deductions as of {aging['as_of']}")
    table.add_column("partition")
    for column in ("count", "open", *buckets, "past window", "days outstanding"):
        amount_column(table, column)

    def row(name: str, a: dict[str, Any]) -> None:
        days = a["days_outstanding"]
        table.add_row(
            name,
            f"{a['open_count']:,}",
            _m(a["open_amount"]),
            *(_m(a["buckets"][b]) for b in buckets),
            _m(a["past_window"]),
            "-" if days is None else days,
        )

    for p in aging["partitions"]:
        row(p["partition_key"], p)
    row("total", aging["totals"])
    show(table)
    reasons = Table(title="open by reason")
    reasons.add_column("reason class")
    amount_column(reasons, "count")
    amount_column(reasons, "open")
    for r in aging["by_reason"]:
        reasons.add_row(r["reason_class"], f"{r['open_count']:,}", _m(r["open_amount"]))
    show(reasons)


def _matches(given: list[str]) -> list[dict[str, str]]:
    found = []
    for pair in given:
        document_id, sep, amount = pair.rpartition("=")
        if not sep or not document_id or not amount:
            raise typer.BadParameter(f"{pair!r} is not DOC=AMOUNT", param_hint="--match")
        found.append({"document_id": document_id, "amount": amount})
    return found


@deductions.command("decide")
def deductions_decide(
    ctx: typer.Context,
    deduction_id: Annotated[int, typer.Argument(help="The disputed deduction's id.")],
    note: Annotated[str, typer.Option(help="Why (kept in the audit log).")],
    accept: Annotated[bool, typer.Option("--accept", help="Write its disputed part off.")] = False,
    deny: Annotated[
        bool,
        typer.Option("--deny", help="Book nothing: the payer still owes it (to recover)."),
    ] = False,
    match: Annotated[
        list[str] | None,
        typer.Option(
            "--match",
            metavar="DOC=AMOUNT",
            help="DOC=AMOUNT: take this much from this settled accrual document (repeat it;"
            " the amounts add up to the disputed part).",
            show_default=False,
        ),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Decide a disputed deduction, once (operator token; audited): --accept,
    --deny, or --match DOC=AMOUNT ... The same decision again answers the same;
    another is refused (409 deduction_already_decided)."""
    chosen = [
        name for name, given in (("accept", accept), ("deny", deny), ("match", match)) if given
    ]
    if len(chosen) != 1:
        raise typer.BadParameter("give exactly one of --accept, --deny or --match DOC=AMOUNT")
    body: dict[str, Any] = {"decision": chosen[0], "note": note}
    if match:
        body["matches"] = _matches(match)
    client = token_client(url, token, "an operator")
    ctx.call_on_close(client.close)
    got = answer(client.bearer("POST", f"/admin/deductions/{deduction_id}/decide", body))
    rows = ", ".join(str(i) for i in got["ledger_ids"]) or "none"
    again = " (decided so before: nothing booked now)" if got["again"] else ""
    console.print(
        f"deduction {got['deduction_id']}: {got['decision']}{again}; ledger rows {rows}",
        soft_wrap=True,
    )
