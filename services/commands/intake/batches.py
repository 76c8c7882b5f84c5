"""``settleq submit``, ``status`` and ``gen``: batches in, outcomes out."""

from __future__ import annotations

import inspect
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn
from urllib.parse import urlencode

import typer

from services.commands.errors import answer
from services.commands.help import default
from services.commands.intake import edi
from services.commands.intake.previews import QUERY as PREVIEW
from services.commands.intake.previews import print_preview
from services.commands.options import (
    DEFAULT_URL,
    KeyOpt,
    SecretOpt,
    TokenOpt,
    UrlOpt,
    console,
    kind_name,
    make_client,
    partition_key_option,
    print_job,
    wait_with_progress,
)
from shared.domain.kinds import KINDS
from shared.domain.synthetic import GENERATORS
from shared.domain.x12.synthetic import GENERATORS as X12_GENERATORS

app = typer.Typer()


ContentType = Literal["application/json", "application/x-ndjson", "application/edi-x12"]


@app.command()
def submit(
    file: Annotated[
        Path,
        typer.Argument(
            help="Batch file (JSON, NDJSON when named *.ndjson, or an X12 file);"
            " - reads stdin (any)."
        ),
    ],
    ndjson: Annotated[
        bool | None,
        typer.Option(
            "--ndjson/--json",
            help="The body's format." + default("by the file name; on stdin, by its first line"),
            show_default=False,
        ),
    ] = None,
    content_type: Annotated[
        ContentType | None,
        typer.Option(
            help="The body's content type (overrides --ndjson/--json)."
            + default("X12 when the file starts with ISA, else as --ndjson/--json"),
            show_default=False,
        ),
    ] = None,
    contract_version: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="X12: the contract version the file's documents settle under"
            " (else its sender's trading-partner profile's).",
        ),
    ] = None,
    partition_key: Annotated[
        str | None,
        partition_key_option(
            "X12 810s: the vendor." + default("REF*IA, REF*VN or the vendor's N1")
        ),
    ] = None,
    period: Annotated[
        str | None,
        typer.Option(
            help="X12 810s: the period." + default("the quarter of BIG-01"), show_default=False
        ),
    ] = None,
    wait: Annotated[
        bool | None,
        typer.Option(
            "--wait/--no-wait",
            help="Show a progress bar until the job completes; print outcomes."
            + default("wait for an X12 file, not for JSON"),
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            help="With --wait: give up (exit 1) after this many seconds; the job goes on."
        ),
    ] = 3600,
    preview: Annotated[
        bool,
        typer.Option(
            "--preview",
            help="Submit nothing: show what submitting now would do (each outcome's lines"
            " and money per partition, why lines would be dead-lettered or duplicates);"
            " JSON or NDJSON, at most 10,000 lines.",
        ),
    ] = False,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(help="Idempotency-Key header." + default("the SHA-256 of the body")),
    ] = None,
) -> None:
    """Sign and submit a batch; with --wait, follow it to its outcome table.
    With --preview, submit nothing: print what submitting it now would do
    (docs/api.md#previewing-a-batch).

    With --wait, exit 3 when lines were dead-lettered (their reasons and counts
    printed), 130 on Ctrl-C (the job goes on). An X12 file
    (docs/api.md#edi-intake) also prints its 997 acknowledgement; a refused one
    prints each problem and the 997 the refusal carries (exit 1).
    """
    if preview and wait:
        raise typer.BadParameter(
            "a preview submits nothing: no job to wait for", param_hint="--wait"
        )
    stdin = str(file) == "-"
    body = sys.stdin.buffer.read() if stdin else file.read_bytes()
    ctype = content_type or _content_type(body, ndjson, None if stdin else file)
    x12 = ctype == edi.EDI_X12
    query = {"contract_version": contract_version, "partition_key": partition_key, "period": period}
    client = make_client(url, key_id, secret, None)
    given = query if x12 else {}
    response = client.submit(
        body, ctype, idempotency_key, {**given, **PREVIEW} if preview else given
    )
    edi.refuse(response)
    if preview:
        print_preview(answer(response))
        return
    accepted = answer(response)
    if response.status_code == 200:
        console.print(f"already submitted as job {accepted['job_id']}: {accepted['lines']} lines")
    else:
        console.print(f"accepted job {accepted['job_id']}: {accepted['lines']} lines")
    job_id = accepted["job_id"]
    job = None
    if wait if wait is not None else x12:
        try:
            job = wait_with_progress(client, job_id, timeout=timeout)
        except KeyboardInterrupt:
            # Only the waiting stops: the batch is accepted and settles regardless.
            typer.echo(
                f"settleq: interrupted: job {job_id} goes on; follow it with"
                f" `settleq status {job_id}`",
                err=True,
            )
            raise typer.Exit(130) from None
        print_job(job)
    if x12:
        edi.print_accepted(client, accepted)
    if job is None:
        return
    if job["state"] != "completed":
        console.print(f"not completed after {timeout:g} s", style="red")
        raise typer.Exit(1)
    if job["outcomes"]["dead_lettered"]:
        print_dead_lettered(
            job_id, job["outcomes"]["dead_lettered"], dead_letter_reasons(client, job_id)
        )
        raise typer.Exit(3)


# Lines read to count a job's dead-letter reasons: a job whose every line was
# dead-lettered may have hundreds of thousands, all with one or two reasons.
REASONS_READ = 100_000
_PAGE = 1000  # the most GET /v1/jobs/{id}/lines gives at once


def dead_letter_reasons(client: Any, job_id: str, most: int = REASONS_READ) -> Counter[str]:
    """How many of the job's dead-lettered lines (the first ``most``) each reason
    holds, from what its producer (or a viewer) may read: the job's lines."""
    reasons: Counter[str] = Counter()
    cursor = None
    while sum(reasons.values()) < most:
        query = {
            "outcome": "dead_lettered",
            "limit": _PAGE,
            **({"cursor": cursor} if cursor else {}),
        }
        page = answer(client.get(f"/v1/jobs/{job_id}/lines?{urlencode(query)}"))
        reasons.update(line["reason"] or "no reason recorded" for line in page["items"])
        cursor = page.get("next_cursor")
        if not cursor:
            break
    return reasons


def print_dead_lettered(job_id: str, lines: int, reasons: Counter[str]) -> None:
    """Why a job's lines were dead-lettered, most frequent reason first, and where to see them."""
    counted = sum(reasons.values())
    of = "" if counted >= lines else f" (reasons of the first {counted:,})"
    typer.echo(f"dead-lettered: {lines:,} line(s){of}")
    width = max((len(reason) for reason in reasons), default=0)
    for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
        typer.echo(f"  {reason:<{width}}  {count:>,}")
    typer.echo(f"see them: settleq dlq list --job-id {job_id}   (operator token)")


def _content_type(body: bytes, ndjson: bool | None, file: Path | None) -> str:
    if ndjson is None and edi.is_x12(body):
        return edi.EDI_X12
    if ndjson is None:
        ndjson = is_ndjson(body) if file is None else file.suffix == ".ndjson"
    return "application/x-ndjson" if ndjson else "application/json"


@app.command()
def status(
    job_id: Annotated[str, typer.Argument(help="The job id a submission answered.")],
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    token: TokenOpt = None,
) -> None:
    """Show a job's state, outcome counts and amounts (signed GET, or a bearer token)."""
    print_job(make_client(url, key_id, secret, token).job(job_id))


def is_ndjson(body: bytes) -> bool:
    """A body read from stdin is NDJSON when its first line is a whole JSON object
    and more lines follow (`settleq gen --ndjson | settleq submit -`); a JSON
    batch, even pretty-printed, is one value."""
    first, _, rest = body.lstrip().partition(b"\n")
    if not rest.strip():
        return False
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False


FormatName = Literal["json", "ndjson", "x12"]
# The kinds partners send as X12, as `--format x12` names them.
_X12_FORMS = " or ".join(f"{k.x12_set}s ({k.name})" for k in KINDS.values() if k.x12_set)
_X12_KINDS = " or ".join(k.name for k in KINDS.values() if k.x12_set)


@app.command()
def gen(
    kind: Annotated[
        str,
        typer.Option(
            callback=kind_name,
            help="Settlement kind of the batch: " + ", ".join(KINDS) + ".",
        ),
    ] = next(iter(KINDS)),
    lines: Annotated[
        int,
        typer.Option(
            "--lines",
            "--invoices",
            min=1,
            help="Lines in the batch; with --format x12, invoices (one ST..SE each:"
            " a 210 is one line, an 810 has 1-8).",
        ),
    ] = 100,
    partitions: Annotated[
        int,
        typer.Option(
            "--partitions", "--vendors", min=1, help="Vendors, recipes or carriers to spread over."
        ),
    ] = 5,
    seed: Annotated[int, typer.Option(help="Same seed, same batch.")] = 7,
    output: Annotated[
        FormatName,
        typer.Option(
            "--format",
            help='json; ndjson (first line {"kind": ...}) for `submit x.ndjson`; x12: an ANSI'
            f" X12 4010 file of {_X12_FORMS}.",
        ),
    ] = "json",
    ndjson: Annotated[
        bool,
        typer.Option("--ndjson", help="The same as --format ndjson."),
    ] = False,
) -> None:
    """Print a synthetic batch on stdout (deterministic for a seed).

    Its contracts (version 1) are what `settleq demo` publishes, for as many
    partitions as the demo's batches have (5): the lines of any more are
    dead-lettered until their contracts are published, as gen says.
    """
    if ndjson and output not in ("json", "ndjson"):
        _refuse(f"--ndjson and --format {output} ask for two formats")
    _say_uncovered(kind, partitions)
    if output == "x12":
        make_file = X12_GENERATORS.get(KINDS[kind].x12_set or "")
        if make_file is None:
            _refuse(f"{kind} has no X12 form: --format x12 takes {_X12_KINDS}")
        spread = {KINDS[kind].partition_noun + "s": partitions}
        sys.stdout.buffer.write(make_file(lines, seed=seed, **spread))
        sys.stdout.flush()
        return
    make_batch = GENERATORS[kind][0]
    batch = make_batch(lines, seed=seed, **{KINDS[kind].partition_noun + "s": partitions})
    if ndjson or output == "ndjson":
        sys.stdout.write(json.dumps({"kind": batch["kind"]}) + "\n")
        sys.stdout.writelines(json.dumps(d) + "\n" for d in batch["documents"])
    else:
        sys.stdout.write(json.dumps(batch) + "\n")


def _say_uncovered(kind: str, partitions: int) -> None:
    """A note on stderr (stdout is the batch) when the batch spreads over more
    partitions than ``settleq demo`` publishes contracts for: their lines would
    be dead-lettered ``unknown_contract_version``, unsaid until the job ends."""
    noun = KINDS[kind].partition_noun + "s"
    # The demo's batches are made with the generator's default spread.
    covered = inspect.signature(GENERATORS[kind][0]).parameters[noun].default
    if partitions <= covered:
        return
    typer.echo(
        f"settleq gen: note: `settleq demo` publishes {kind} contracts (version 1) for"
        f" {covered} {noun}; the lines of the other {partitions - covered} are"
        " dead-lettered (unknown_contract_version) until theirs are published"
        f" (settleq contracts put {kind} KEY 1 FILE), or use --partitions {covered}",
        err=True,
    )


def _refuse(line: str) -> NoReturn:
    """A usage error: one line on stderr, exit 2 (as click's own)."""
    typer.echo(f"settleq gen: {line}", err=True)
    raise typer.Exit(2)
