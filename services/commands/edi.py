"""``settleq submit`` of an X12 file (docs/api.md#edi-intake): what is sent, and
what is printed of the answer: the job, its outcomes, and its 997; or the
refusal, one problem a line, and the 997 rejecting the file.

The 997 is printed as the API stores it, without markup (an X12 element may
hold ``[``); a refusal is printed on stderr, as every refusal is.
"""

from __future__ import annotations

from typing import Any

import httpx
import typer

from services.commands.errors import answer
from services.commands.options import console

EDI_X12 = "application/edi-x12"
_BOM = b"\xef\xbb\xbf"


def is_x12(body: bytes) -> bool:
    """A body is X12 when it starts with an ISA (after a BOM and whitespace)."""
    head = body[:4096].removeprefix(_BOM).lstrip()
    return head[:3] == b"ISA"


def _where(problem: dict[str, Any]) -> str:
    parts = []
    if problem.get("segment") is not None:
        tag = f" {problem['tag']}" if problem.get("tag") else ""
        parts.append(f"segment {problem['segment']}{tag}")
    if problem.get("element") is not None:
        parts.append(f"element {problem['element']}")
    if problem.get("control_number"):
        parts.append(f"control number {problem['control_number']}")
    return ", ".join(parts)


def print_997(text: str, heading: str, err: bool = False) -> None:
    typer.echo(f"{heading}:", err=err)
    typer.echo(text if text.endswith("\n") else text + "\n", nl=False, err=err)


def refuse(response: httpx.Response) -> None:
    """Print an X12 refusal (its code, each problem, the 997) and exit 1; any
    other refusal is left to the command line's one-line answer."""
    try:
        error = response.json()["error"]
        code = str(error["code"])
    except (ValueError, KeyError, TypeError):
        return
    if response.status_code != 422 or not code.startswith("edi_"):
        return
    typer.echo(f"settleq: 422 {code}: {error.get('message', '')}", err=True)
    for problem in error.get("details") or []:
        where = _where(problem) if isinstance(problem, dict) else ""
        what = problem.get("message", "") if isinstance(problem, dict) else str(problem)
        code_of = problem.get("code", code) if isinstance(problem, dict) else code
        typer.echo(f"  {code_of}: {what}" + (f" ({where})" if where else ""), err=True)
    ack = error.get("acknowledgement")
    if ack:
        print_997(str(ack), "997 rejecting the file", err=True)
    else:
        typer.echo("no 997: the file's envelope could not be read", err=True)
    raise typer.Exit(1)


def print_accepted(client: Any, accepted: dict[str, Any]) -> None:
    """What an accepted file gave beyond the job: the sets skipped, the 997."""
    for skipped in accepted.get("skipped") or []:
        console.print(
            f"skipped set {skipped['control_number']}: {skipped['reason']}",
            markup=False,
        )
    response = client.acknowledgement(accepted["job_id"])
    if response.status_code >= 400:
        answer(response)  # raises: printed as the command line's one-line refusal
    print_997(response.text, "997 acknowledgement")
