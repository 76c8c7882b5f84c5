"""The query of an ``application/edi-x12`` submission (docs/api.md#edi-intake):
what an X12 file does not say. Checked whatever the content type (an invalid
value is refused, never ignored), and once the file's kind is known, refused
where it would not apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from services.api.errors import ApiError
from shared.domain.kinds import KINDS
from shared.domain.kinds.base import Identifier
from shared.domain.kinds.ids import address_problem, refusal_message


@dataclass(frozen=True)
class EdiQuery:
    """The query of an X12 submission: what the file itself does not say."""

    # None: the file's sender's trading-partner profile says it (edi/ingest.py).
    contract_version: int | None
    partition_key: str | None = None  # 810s: else REF*IA, REF*VN or the vendor's N1
    period: str | None = None  # 810s: else the quarter of BIG-01


# The documents' own identifier rule: a query value becomes a document's field.
_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)


def _identifier(params: Mapping[str, str], name: str) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if name == "partition_key":  # a partition's own rule, as a document's
        problem = address_problem(value)
        if problem is None:
            return value
        raise ApiError(422, "partition_key_invalid", refusal_message(name, value, problem))
    try:
        return _IDENTIFIER.validate_python(value)
    except ValidationError:
        raise ApiError(
            422, f"{name}_invalid", f"{name} must be 1-128 characters, no control character or |"
        ) from None


def edi_query(params: Mapping[str, str], media: str) -> EdiQuery | None:
    """The X12 query parameters, checked whatever the content type (an invalid
    one is refused, never ignored); None for a JSON or NDJSON body, which
    carries its own contract versions, partitions and periods."""
    raw = params.get("contract_version")
    version = None
    if raw is not None:
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 2**31 - 1:
            raise ApiError(
                422, "contract_version_invalid", "contract_version must be an integer from 1"
            )
        version = int(raw)
    partition_key = _identifier(params, "partition_key")
    period = _identifier(params, "period")
    if media != "application/edi-x12":
        return None
    # Without a contract_version, the sender's profile must give one (else
    # edi_partner_unknown, once the file's envelope is read).
    return EdiQuery(version, partition_key, period)


def query_applies(query: EdiQuery, kind: str) -> None:
    """``partition_key`` and ``period`` apply to the files of a kind whose
    ``x12_query`` names them (an 810's vendor and period). A 210's partition is
    its carrier (B3-11) and its period is not asked: a parameter that would be
    ignored is refused, so that no one believes a file of 210s was settled under
    a partition or period it was not."""
    registered = KINDS.get(kind)
    takes = registered.x12_query if registered is not None else ()
    given = [
        n for n in ("partition_key", "period") if getattr(query, n) is not None and n not in takes
    ]
    if given:
        sets = f"{registered.x12_set}s" if registered is not None else "its sets"
        takers = " and ".join(
            f"{k.x12_set}s" for k in KINDS.values() if k.x12_set and set(given) <= set(k.x12_query)
        )
        raise ApiError(
            422,
            "query_parameter_not_applicable",
            f"{' and '.join(given)} apply to {takers or 'no file'} only: a file of {sets}"
            " would ignore them",
            [{"loc": ["query", name], "msg": f"not applicable to {sets}"} for name in given],
        )
