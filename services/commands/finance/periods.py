"""``settleq periods list|close|journal|lines``, ``settleq balances`` and
``settleq statement PARTITION``: the month-end close from the command line
(docs/operations.md#the-month-end-close, docs/api.md#periods-and-the-close).

A viewer token reads; the close needs an operator's. Balances and a statement
also take a producer key's signature (its own partitions only), as ``settleq
ledger feed`` does. A file written holds the API's bytes, the journal's CSV
whose SHA-256 the close returned among them; only the balances CSV, which the
API does not serve, is made here, from the API's JSON, its cells neutralised
as the API's are. A file appears whole or not at all: it is written beside
its name and renamed once the last byte has arrived."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import IO, Annotated, Any
from urllib.parse import quote, urlencode

import httpx
import typer
from rich.table import Table

from services.commands.errors import FAILED, answer, say
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
    export_progress,
    interruptible,
    kind_name,
    make_client,
    partition_key_option,
    show,
    token_client,
)
from shared.domain.kinds import KINDS
from shared.wire.cells import cell

app = typer.Typer(
    help="Booking periods: list them, close the open one, write a period's journal and its"
    " lines (viewer token to read, operator token to close)."
)
# ``settleq balances`` and ``settleq statement``: top-level commands.
finance = typer.Typer()

KindOpt = Annotated[
    str | None,
    typer.Option(callback=kind_name, help="Only this settlement kind.", show_default=False),
]
PartitionOpt = Annotated[
    str | None, partition_key_option("Only this partition (vendor, carrier, recipe).")
]
PeriodOpt = Annotated[
    str | None,
    typer.Option(help="A period's name; the open one by default.", show_default=False),
]
CsvOpt = Annotated[
    str | None,
    typer.Option("--csv", help="Write the CSV to this file.", show_default=False),
]
JsonOpt = Annotated[
    str | None,
    typer.Option("--json", help="Write the JSON to this file.", show_default=False),
]
# A remittance's rows (docs/architecture.md#remittances-and-deductions).
MATCHES = ("deducted", "written_off")
ACTIVITY = ("opening", "posted", "disputed", "repriced", "resolved", *MATCHES, "closing")
BALANCE_COLUMNS = (
    "kind",
    "partition_key",
    "direction",
    "opening",
    "posted",
    "disputed",
    "repriced",
    "resolved",
    "closing",
    "rows",
    "in_dispute_count",
    "in_dispute_variance",
    # Added last, so a reader of the columns above by position reads them still.
    *MATCHES,
    "currency",
)


def _closed_after(ctx: typer.Context, client: Any) -> Any:
    """``client``, its connections closed when the command ends, however it ends."""
    ctx.call_on_close(client.close)
    return client


def _viewer(ctx: typer.Context, url: str, token: str | None) -> Any:
    return _closed_after(ctx, token_client(url, token, "a viewer"))


def _operator(ctx: typer.Context, url: str, token: str | None) -> Any:
    return _closed_after(ctx, token_client(url, token, "an operator"))


def _reader(
    ctx: typer.Context, url: str, key_id: str | None, secret: str | None, token: str | None
) -> Any:
    """A viewer's token if given, else a producer key's signature."""
    return _closed_after(ctx, make_client(url, key_id, secret, token))


def _query(**fields: Any) -> str:
    given = urlencode({k: v for k, v in fields.items() if v is not None})
    return f"?{given}" if given else ""


def _one_file(csv_file: str | None, json_file: str | None) -> tuple[str, str]:
    """The format and file of a command that writes exactly one."""
    if (csv_file is None) == (json_file is None):
        raise typer.BadParameter("give --csv FILE or --json FILE (one of them)")
    return ("csv", csv_file) if csv_file is not None else ("json", str(json_file))


def _is_money(kind: str) -> bool:
    """A kind whose amounts are money: a recipe's are unit costs (no direction)."""
    known = KINDS.get(kind)
    return known is not None and known.direction is not None


# --- files -----------------------------------------------------------------------


@contextmanager
def _writing(target: str) -> Iterator[IO[bytes]]:
    """``target`` written whole or not at all: a temporary file beside it,
    renamed over it at the end; one that cannot be written is one line, exit 1."""
    path = Path(target)
    try:
        fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    except OSError as exc:
        say(f"cannot write {target}: {exc.strerror or type(exc).__name__}")
        raise typer.Exit(FAILED) from None
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        os.replace(scratch, path)
    except OSError as exc:
        say(f"cannot write {target}: {exc.strerror or type(exc).__name__}")
        raise typer.Exit(FAILED) from None
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)


def _write(target: str, data: bytes) -> None:
    with _writing(target) as out:
        out.write(data)


def _bytes(response: httpx.Response) -> bytes:
    """A successful answer's bytes; a refusal raises (one line per problem)."""
    if response.status_code >= 400:
        answer(response)
    return response.content


# --- periods ----------------------------------------------------------------------


def _periods(client: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = answer(client.bearer("GET", "/v1/periods"))["items"]
    return items


def _named(periods: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((p for p in periods if p["name"] == name), None)


def _count(count: int, noun: str, plural: str | None = None) -> str:
    """``1 row``, ``2 rows``, ``1,000 entries``."""
    return f"{count:,} " + (noun if count == 1 else plural or f"{noun}s")


def _totals(period: dict[str, Any]) -> str:
    """A period's sums of delta per kind, outcome and currency, one per line."""
    return "\n".join(
        f"{t['kind']} {t['outcome']} {_in(t)}{money(t['delta'], t['kind'])}"
        f" ({_count(t['rows'], 'row')})"
        for t in period["totals"]
    )


def _in(item: dict[str, Any]) -> str:
    """``EUR `` before an amount in its currency: none is added to another's."""
    return f"{item['currency']} " if item.get("currency") else ""


@app.command("list")
def periods_list(
    ctx: typer.Context,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the API's answer as JSON (for a script).")
    ] = False,
) -> None:
    """List the booking periods, newest first: the open one, then the closed
    ones with their totals and their journal's SHA-256."""
    client = _viewer(ctx, url, token)
    if as_json:
        page = answer(client.bearer("GET", "/v1/periods"))
        sys.stdout.write(json.dumps(page, ensure_ascii=False, indent=2) + "\n")
        return
    table = Table(title="periods")
    for column in ("period", "status", "opened", "closed"):
        table.add_column(column, no_wrap=column in ("opened", "closed"))
    amount_column(table, "rows")
    table.add_column("totals (delta)")
    table.add_column("journal sha256", no_wrap=True)
    for p in _periods(client):
        table.add_row(
            p["name"],
            p["status"],
            p["opened_at"][:19] + "Z",
            (p["closed_at"] or "")[:19] + ("Z" if p["closed_at"] else ""),
            f"{p['rows']:,}",
            _totals(p),
            p["journal_sha256"] or "",
        )
    show(table)


def _preview(client: Any, period: dict[str, Any], next_name: str | None) -> None:
    """What closing ``period`` does: its totals, the disputes it carries over
    (open now) and the dead letters waiting."""
    if period["status"] == "ended":
        opens = f"it ended at {period['ends_at'][:19]}Z into {next_name}; the close makes it final"
    else:
        opens = f"the close opens {next_name}"
    console.print(
        f"period {period['name']} (open since {period['opened_at'][:19]}Z):"
        f" {period['rows']:,} ledger rows; {opens}",
        soft_wrap=True,
    )
    if period["totals"]:
        console.print(_totals(period))
    balances = answer(client.bearer("GET", "/v1/balances"))["items"]
    disputes: dict[tuple[str, str], tuple[int, Decimal]] = {}
    for b in balances:
        key = (b["kind"], b["currency"])
        count, variance = disputes.get(key, (0, Decimal(0)))
        wait = b["in_dispute"]
        disputes[key] = (count + wait["count"], variance + Decimal(wait["variance"]))
    carried = [(k, c, v) for k, (c, v) in sorted(disputes.items()) if c]
    for (kind, currency), count, variance in carried:
        console.print(
            f"open {kind} disputes it carries over: {count:,},"
            f" variance {currency} {money(variance, kind)}"
        )
    if not carried:
        console.print("open disputes it carries over: none")
    stats = answer(client.bearer("GET", "/admin/dead-letters/stats"))
    dead = [d for d in stats["items"] if d["status"] == "dead"]
    count, lines = sum(d["count"] for d in dead), sum(d["lines"] for d in dead)
    console.print(f"dead letters waiting: {count:,} ({lines:,} lines)")


def _print_closed(p: dict[str, Any]) -> None:
    # A dated period's next opened at its cut, and may itself have ended since.
    after = (
        f"it ended at {p['ends_at'][:19]}Z into {p['next']}"
        if p.get("ended_at")
        else f"{p['next']} is open"
    )
    console.print(f"closed {p['name']}: {p['rows']:,} ledger rows; {after}", soft_wrap=True)
    if p["totals"]:
        console.print(_totals(p))
    carried = p.get("carried") or {"disputes": [], "dead_letters": []}
    for d in carried["disputes"]:
        console.print(
            f"open {d['kind']} disputes carried over: {d['count']:,},"
            f" variance {_in(d)}{money(d['variance'], d['kind'])}"
        )
    for d in carried["dead_letters"]:
        console.print(f"{d['kind']} dead letters waiting: {d['count']:,} ({d['lines']:,} lines)")
    console.print(f"journal sha256 {p['journal_sha256']}", soft_wrap=True)


@app.command("close")
def periods_close(
    ctx: typer.Context,
    period: Annotated[str, typer.Argument(help="The open period, named: the close's guard.")],
    next_name: Annotated[
        str | None,
        typer.Option(
            "--next",
            help="The period the close opens (1-32 of A-Z a-z 0-9 . _ -); an ended"
            " (dated) period's close opens none: its cut opened the next.",
            show_default=False,
        ),
    ] = None,
    note: Annotated[
        str | None,
        typer.Option(
            help="Why, or what (kept with the period and in the audit log).", show_default=False
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Close without asking.")] = False,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Close the open period and open --next: shows its totals and what it
    carries over and asks first (unless --yes); prints the journal's SHA-256.

    The same close again answers the same period; naming a period that is not
    the open one is refused (409 period_not_open), so is a --next already used.
    """
    client = _operator(ctx, url, token)
    found = _named(_periods(client), period)
    # A period that is not open is the API's to refuse, or (the same close
    # again) to answer as it did: nothing is closed that needs confirming.
    if found is not None and found["status"] in ("open", "ended") and not yes:
        _preview(client, found, next_name or found.get("next"))
        opens = f" and open {next_name}" if next_name else ""
        typer.confirm(f"Close {period}{opens}?", abort=True)
    body: dict[str, Any] = {"period": period, "note": note}
    if next_name is not None:
        body["next"] = next_name
    _print_closed(answer(client.bearer("POST", "/admin/periods/close", body)))


# --- the journal and its lines ----------------------------------------------------------


class ErpFormat(StrEnum):
    """The ERPs whose journal import file the API writes (shared/domain/erp_journal.py)."""

    netsuite = "netsuite"
    oracle_gl = "oracle_gl"
    sap = "sap"


@app.command("journal")
def periods_journal(
    ctx: typer.Context,
    period: Annotated[str, typer.Argument(help="The period's name.")],
    csv_file: CsvOpt = None,
    json_file: JsonOpt = None,
    erp: Annotated[
        ErpFormat | None,
        typer.Option(
            "--erp",
            help="With --csv: that ERP's journal import file (netsuite, oracle_gl or sap)"
            " instead of settleq's CSV.",
        ),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Write a period's journal (balanced entries per kind and partition) as
    the API's bytes; print its SHA-256 and whether it is final (a closed
    period's CSV SHA-256 is the one its close returned). --erp writes an
    ERP's import file of the same entries."""
    fmt, target = _one_file(csv_file, json_file)
    client = _viewer(ctx, url, token)
    if erp is not None:
        if fmt != "csv":
            say("--erp writes a CSV file: give it with --csv")
            raise typer.Exit(FAILED)
        path = f"/v1/periods/{quote(period, safe='')}/journal?format={erp.value}"
        data = _bytes(client.bearer("GET", path))
        _write(target, data)
        found = max(len(list(csv.reader(io.StringIO(data.decode())))) - 1, 0)
        console.print(f"wrote {target} ({erp.value}, {_count(found, 'line', 'lines')})")
        return
    data = _bytes(
        client.bearer("GET", f"/v1/periods/{quote(period, safe='')}/journal?format={fmt}")
    )
    if fmt == "json":
        _write(target, data)
        _said_json(target, json.loads(data))
        return
    digest = hashlib.sha256(data).hexdigest()
    row = _named(_periods(client), period)
    closed = row is not None and row["status"] == "closed"
    if closed and row is not None and row["journal_sha256"] != digest:
        # Never the case while a closed period's journal is fixed bytes: refuse
        # to leave a file finance could import.
        say(
            f"the journal's sha256 {digest} is not its close's {row['journal_sha256']}: not written"
        )
        raise typer.Exit(FAILED)
    _write(target, data)
    entries = max(len(list(csv.reader(io.StringIO(data.decode())))) - 1, 0) // 2
    console.print(f"wrote {target} ({_count(entries, 'entry', 'entries')})", soft_wrap=True)
    console.print(f"sha256 {digest}", soft_wrap=True)
    if closed:
        console.print(f"final: the sha256 the close of {period} returned", soft_wrap=True)
    else:
        console.print("a preview: the period is open, its journal changes until it closes")


def _said_json(target: str, journal: dict[str, Any]) -> None:
    state = "final" if journal["final"] else "a preview: the period is open"
    entries = _count(len(journal["entries"]), "entry", "entries")
    # Per currency: two are never added together.
    sums = "; ".join(
        f"{t['currency']} debits {t['debits']}, credits {t['credits']}"
        for t in journal.get("totals", [])
    )
    console.print(
        f"wrote {target} ({entries}; {sums or 'nothing booked'}); {state}", soft_wrap=True
    )
    if journal["sha256"]:
        console.print(f"its CSV's sha256 {journal['sha256']}", soft_wrap=True)


class _RowCounter:
    """Rows of a streamed answer as they arrive: a CSV row ends in a line break
    (no cell holds one), a JSON line item starts with ``{"period":`` (a string
    holding that is escaped); a marker split between two chunks is counted."""

    def __init__(self, marker: bytes) -> None:
        self.marker = marker
        self.tail = b""

    def __call__(self, chunk: bytes) -> int:
        text = self.tail + chunk
        self.tail = text[-(len(self.marker) - 1) :] if len(self.marker) > 1 else b""
        return text.count(self.marker)


def _lines_total(client: Any, period: str, kind: str | None, partition_key: str | None) -> int:
    """The rows the export will hold: the period's, or its balances' in a filter's scope."""
    if kind is None and partition_key is None:
        row = _named(_periods(client), period)
        return 0 if row is None else int(row["rows"])
    query = _query(period=period, kind=kind, partition_key=partition_key)
    response = client.bearer("GET", f"/v1/balances{query}")
    if response.status_code >= 400:
        return 0  # the export's own answer says why
    return sum(int(b["rows"]) for b in response.json()["items"])


class _Stopped(Exception):
    """Ctrl-C during an export: the file is not written."""


def _stream(
    client: Any,
    path: str,
    accept: str,
    target: str,
    count: Callable[[bytes], int],
    total: int,
) -> int:
    """The API's streamed answer into ``target`` as it arrives, a progress bar
    of rows on the terminal; the rows written. Ctrl-C leaves no file (exit 130)."""
    rows = 0
    try:
        with interruptible() as stop, client.get_stream(path, accept) as response:
            if response.status_code >= 400:
                response.read()
                answer(response)
            with _writing(target) as out, export_progress(target, total) as advance:
                for chunk in response.iter_bytes():
                    if stop.is_set():
                        raise _Stopped
                    out.write(chunk)
                    seen = count(chunk)
                    rows += seen
                    advance(seen)
    except (_Stopped, KeyboardInterrupt):
        say(f"interrupted: {target} not written")
        raise typer.Exit(130) from None
    return rows


@app.command("lines")
def periods_lines(
    ctx: typer.Context,
    period: Annotated[str, typer.Argument(help="The period's name.")],
    kind: KindOpt = None,
    partition_key: PartitionOpt = None,
    csv_file: CsvOpt = None,
    json_file: JsonOpt = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Write one line per ledger row booked in the period, each with its journal
    entry's external_id (an entry's lines add up to it), streamed as the API
    sends them, with a progress bar."""
    fmt, target = _one_file(csv_file, json_file)
    client = _viewer(ctx, url, token)
    total = _lines_total(client, period, kind, partition_key)
    query = _query(format=fmt, kind=kind, partition_key=partition_key)
    path = f"/v1/periods/{quote(period, safe='')}/journal/lines{query}"
    if fmt == "csv":
        rows = (
            _stream(client, path, "text/csv", target, _RowCounter(b"\n"), total) - 1
        )  # the header
    else:
        counter = _RowCounter(b'{"period":')
        rows = (
            _stream(client, path, "application/json", target, counter, total) - 1
        )  # the document's own
    console.print(f"wrote {target} ({_count(rows, 'row')})", soft_wrap=True)


# --- balances and statements --------------------------------------------------------


def _balance_cells(b: dict[str, Any]) -> list[str]:
    wait = b["in_dispute"]
    return [
        cell(b["kind"]),
        cell(b["partition_key"]),
        cell(b["direction"]),
        *(cell(Decimal(b[name])) for name in ACTIVITY if name not in MATCHES),
        str(b["rows"]),
        str(wait["count"]),
        cell(Decimal(wait["variance"])),
        *(cell(Decimal(b[name])) for name in MATCHES),
        cell(b["currency"]),
    ]


def _balances_csv(items: list[dict[str, Any]]) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(BALANCE_COLUMNS)
    writer.writerows(_balance_cells(b) for b in items)
    return out.getvalue().encode()


def _balances_title(page: dict[str, Any]) -> str:
    if page["period"] is None:
        return f"balances as of {page['as_of']}"
    if page["final"]:
        state = "closed: final"
    elif page.get("status") == "ended":
        state = "ended: they no longer change; final once it is closed"
    else:
        state = "open: they change until it closes"
    return f"balances, period {page['period']} ({state})"


def _print_balances(page: dict[str, Any]) -> None:
    console.print(_balances_title(page), soft_wrap=True)
    table = Table()
    table.add_column("kind")
    table.add_column("partition")
    table.add_column("currency")
    for column in (*ACTIVITY, "rows", "in dispute", "variance"):
        amount_column(table, column)
    # Totals per kind and currency: two currencies are never added.
    sums: dict[tuple[str, str], list[Decimal]] = {}
    for b in page["items"]:
        k = b["kind"]
        wait = b["in_dispute"]
        table.add_row(
            k,
            b["partition_key"],
            b["currency"],
            *(money(b[name], k) for name in ACTIVITY),
            f"{b['rows']:,}",
            f"{wait['count']:,}",
            money(wait["variance"], k),
        )
        if _is_money(k):  # a recipe's unit costs are never added up
            total = sums.setdefault((k, b["currency"]), [Decimal(0)] * (len(ACTIVITY) + 3))
            for i, value in enumerate(
                [
                    *(Decimal(b[n]) for n in ACTIVITY),
                    b["rows"],
                    wait["count"],
                    Decimal(wait["variance"]),
                ]
            ):
                total[i] += value
    for (k, currency), total in sorted(sums.items()):
        money_cells = [money(v, k) for v in total[: len(ACTIVITY)]]
        table.add_row(
            k,
            "total",
            currency,
            *money_cells,
            f"{int(total[-3]):,}",
            f"{int(total[-2]):,}",
            money(total[-1], k),
            style="bold",
        )
    show(table)
    costs = sorted({b["kind"] for b in page["items"] if not _is_money(b["kind"])})
    if costs:
        console.print(
            f"{', '.join(costs)} amounts are unit costs: shown, never added to a total",
            markup=False,
        )


@finance.command("balances")
def balances(
    ctx: typer.Context,
    period: PeriodOpt = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            help="Instead of --period: the sum of the deltas committed up to this RFC 3339"
            " instant (2026-12-31T23:59:59Z).",
            show_default=False,
        ),
    ] = None,
    kind: KindOpt = None,
    partition_key: PartitionOpt = None,
    csv_file: Annotated[
        str | None,
        typer.Option("--csv", help="Write the balances as CSV to this file.", show_default=False),
    ] = None,
    json_file: Annotated[
        str | None,
        typer.Option("--json", help="Write the API's JSON to this file.", show_default=False),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    token: TokenOpt = None,
) -> None:
    """Balances per kind and partition: opening, the period's activity (posted,
    disputed, repriced, resolved, deducted, written off), closing and what is
    in dispute. A viewer token, or a producer key (its own partitions only)."""
    if period is not None and as_of is not None:
        raise typer.BadParameter("give --period or --as-of, not both")
    client = _reader(ctx, url, key_id, secret, token)
    query = _query(kind=kind, partition_key=partition_key, period=period, as_of=as_of)
    data = _bytes(client.get(f"/v1/balances{query}"))
    page = json.loads(data)
    if json_file is not None:
        _write(json_file, data)
        console.print(
            f"wrote {json_file} ({_count(len(page['items']), 'balance')})", soft_wrap=True
        )
    if csv_file is not None:
        _write(csv_file, _balances_csv(page["items"]))
        console.print(f"wrote {csv_file} ({_count(len(page['items']), 'balance')})", soft_wrap=True)
    if csv_file is None and json_file is None:
        _print_balances(page)


def _print_section(statement: dict[str, Any], s: dict[str, Any]) -> None:
    k = s["kind"]
    table = Table(title=f"{k}, {statement['partition_key']}, period {statement['period']}")
    for column in ("document", "line", "version", "outcome"):
        table.add_column(column)
    for column in ("amount", "claimed", "delta"):
        amount_column(table, column)
    table.add_row("opening", "", "", "", "", "", money(s["opening"], k), style="bold")
    for d in s["documents"]:
        for line in d["lines"]:
            table.add_row(
                d["document_id"],
                line["line_ref"],
                f"v{line['contract_version']}",
                # As balances sum it: a re-priced line is no second "posted".
                line["activity"],
                money(line["amount"], k),
                money(line["claimed_amount"], k),
                money(line["delta"], k),
            )
        table.add_row(d["document_id"], "", "", "total", "", "", money(d["total"], k))
    table.add_row("closing", "", "", "", "", "", money(s["closing"], k), style="bold")
    show(table)
    wait = s["in_dispute"]
    if wait["count"]:
        console.print(f"in dispute: {wait['count']:,} (variance {money(wait['variance'], k)})")
    if s["owed"] is not None:
        console.print(s["owed"], soft_wrap=True)
    else:
        console.print(f"{k} amounts are unit costs: nothing is owed on them")


@finance.command("statement")
def statement(
    ctx: typer.Context,
    partition_key: Annotated[str, typer.Argument(help="A vendor, carrier or recipe.")],
    period: PeriodOpt = None,
    kind: KindOpt = None,
    csv_file: CsvOpt = None,
    json_file: JsonOpt = None,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    token: TokenOpt = None,
) -> None:
    """One partition's statement for a period: its opening balance, each
    document's lines booked in the period, its closing balance and who owes
    it. A viewer token, or a producer key (its own partitions only)."""
    if csv_file is not None and json_file is not None:
        raise typer.BadParameter("give --csv FILE or --json FILE, not both")
    client = _reader(ctx, url, key_id, secret, token)
    fmt = "csv" if csv_file is not None else "json"
    query = _query(period=period, kind=kind, format=fmt)
    data = _bytes(client.get(f"/v1/partitions/{quote(partition_key, safe='')}/statement{query}"))
    target = csv_file or json_file
    if target is not None:
        _write(target, data)
        console.print(f"wrote {target}", soft_wrap=True)
        return
    made = json.loads(data)
    state = "final" if made["final"] else "open: it changes until the period closes"
    console.print(
        f"statement of {made['partition_key']}, period {made['period']} ({state})", soft_wrap=True
    )
    if not made["sections"]:
        console.print("nothing booked")
    for s in made["sections"]:
        _print_section(made, s)
