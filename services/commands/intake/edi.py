"""``settleq submit`` of an X12 file (docs/api.md#edi-intake): what is sent, and
what is printed of the answer: the job, its outcomes, and its 997; or the
refusal, one problem a line, and the 997 the refusal carries, headed by what it
says (a file refused for what it holds, not its syntax, is acknowledged with
every set accepted).

The 997 is printed as the API stores it, without markup (an X12 element may
hold ``[``); a refusal is printed on stderr, as every refusal is.
"""

from __future__ import annotations

from typing import Annotated, Any

import httpx
import typer

from services.commands.errors import answer, refused, say
from services.commands.options import (
    DEFAULT_URL,
    KeyOpt,
    SecretOpt,
    TokenOpt,
    UrlOpt,
    console,
    make_client,
)
from shared.domain.x12.acknowledging.summary import summarize

EDI_X12 = "application/edi-x12"
_BOM = b"\xef\xbb\xbf"


def is_x12(body: bytes) -> bool:
    """A body is X12 when it starts with an ISA (after a BOM and whitespace)."""
    head = body[:4096].removeprefix(_BOM).lstrip()
    return head[:3] == b"ISA"


def print_997(text: str, heading: str, err: bool = False) -> None:
    typer.echo(f"{heading}:", err=err)
    typer.echo(text if text.endswith("\n") else text + "\n", nl=False, err=err)


def refuse(response: httpx.Response) -> None:
    """Print an X12 refusal (each problem, then the 997) and exit 1; any other
    refusal is left to the command line's answer (services/commands/errors.py)."""
    try:
        error = response.json()["error"]
        code, ack = str(error["code"]), error.get("acknowledgement")
    except (ValueError, KeyError, TypeError, AttributeError):
        return
    if response.status_code != 422 or not code.startswith("edi_"):
        return
    say(str(refused(response)))
    if ack:
        print_997(str(ack), verdict(str(ack)), err=True)
    else:
        typer.echo("no 997: the file's envelope could not be read", err=True)
    raise typer.Exit(1)


def verdict(ack: str) -> str:
    """A 997's heading, by what it says (``shared/domain/x12/acknowledging/summary.py``, as
    a partner's page counts it): its interchange rejected (a TA1 ``R``), the
    sets it does not accept (an AK5 ``R``, or a group its AK9 rejects), or
    every set accepted (a file refused for what it holds, not its syntax)."""
    found = summarize(ack)
    return "997 acknowledgement" if found is None else found.heading()


def print_accepted(client: Any, accepted: dict[str, Any]) -> None:
    """What an accepted file gave beyond the job: the sets skipped, the 997."""
    for skipped in accepted.get("skipped") or []:
        console.print(
            f"skipped set {skipped['control_number']}: {skipped['reason']}",
            markup=False,
        )
    if accepted.get("acknowledgement_url") is None:
        console.print("no 997: the partner's profile asks for none of an accepted file")
        return
    response = client.acknowledgement(accepted["job_id"])
    if response.status_code >= 400:
        answer(response)  # raises: printed as the command line's one-line refusal
    print_997(response.text, verdict(response.text))


ack_app = typer.Typer(help="X12 intake: a job's 997.")


@ack_app.command("ack")
def ack(
    job_id: Annotated[str, typer.Argument(help="The X12 job's id (its POST's answer).")],
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    token: TokenOpt = None,
) -> None:
    """Print an X12 job's 997 as the partner gets it (signed GET, or a viewer token)."""
    response = make_client(url, key_id, secret, token).acknowledgement(job_id)
    if response.status_code >= 400:
        answer(response)  # raises: the one-line refusal (no_acknowledgement, job_not_found)
    print_997(response.text, verdict(response.text))
