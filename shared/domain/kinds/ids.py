"""``partition_key`` and ``document_id``: one rule, asked at every door
(docs/api.md#partition-keys-and-document-ids).

A partition names a contract, which an operator addresses by URL
(``/v1/contracts/{kind}/{partition_key}/...``): a partition no URL can name
would dead-letter every line for want of a contract no one could publish. So
both ids are 1-128 characters with no ``/`` (it splits a path), no control,
format or surrogate character (Cc, Cf, Cs: invisible, or no text a URL
carries) and no whitespace first or last (a trimmed copy names another
partition). As every id (``base.Identifier``) they hold no ``|``, which joins a
reconciliation key's fields; and neither is ``.`` or ``..``, path segments URL
clients remove even percent-encoded (RFC 3986 §5.2.4, the WHATWG URL standard).

The models (``PartitionKey``, ``DocumentId``), the screen, the X12 mappers and
the contract routes all ask :func:`address_problem`; a refusal is
``partition_key_invalid`` or ``document_id_invalid``.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, GetJsonSchemaHandler, StrictStr
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

MAX_LENGTH = 128
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})
_NOT_SEGMENTS = frozenset({".", ".."})
RULE = (
    "1-128 characters; no '/', '|', control or format character; no leading or"
    " trailing whitespace; not '.' or '..'"
)


def address_problem(value: str) -> str | None:
    """What keeps ``value`` from being a partition_key or document_id, or None."""
    if not 0 < len(value) <= MAX_LENGTH:
        return f"has {len(value)} characters"
    if "/" in value or "|" in value:
        return f"holds {'/' if '/' in value else '|'!r}"
    if value.isascii():  # printable ASCII has no control character; its one space is " "
        bad, edges = not value.isprintable(), value[0] == " " or value[-1] == " "
    else:
        bad = any(unicodedata.category(c) in _REFUSED_CATEGORIES for c in value)
        edges = value[0].isspace() or value[-1].isspace()
    if bad:
        return "holds a control or format character"
    if edges:
        return "starts or ends with whitespace"
    return "is a URL's dot segment" if value in _NOT_SEGMENTS else None


def is_address(value: str) -> bool:
    return address_problem(value) is None


def sound_ids(document: Any) -> bool:
    """A document's (or a screened one's) partition_key and document_id are addresses."""
    return is_address(document.partition_key) and is_address(document.document_id)


def refusal_message(field: str, value: str, problem: str) -> str:
    """``partition_key 'A/B' holds '/': ...``, the value cut short and escaped."""
    return f"{field} {value[:40]!r} {problem}: a {field} is {RULE}"


@functools.cache
def _json_pattern() -> str:
    """The rule as a JSON Schema pattern (openapi.yaml), from this Python's Unicode
    database: a scan of every code point, on the first schema asked for. Without
    the surrogates: no JSON text or URL the server reads carries one (a lone
    \\ud800 is json_invalid), and a regex engine over UTF-8 (a validator's, e.g.
    jsonschema-rs) refuses a pattern that names them."""
    published = _REFUSED_CATEGORIES - {"Cs"}
    ranges: list[list[int]] = []
    for c in range(sys.maxunicode + 1):
        if unicodedata.category(chr(c)) in published:
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])
    # \uXXXX for the BMP (read alike by ECMA-262 and Python); astral ones as themselves.
    cls = "".join(_escaped(a) if a == b else f"{_escaped(a)}-{_escaped(b)}" for a, b in ranges)
    # Not a dot segment, no whitespace first or last, then the characters.
    return f"^(?!\\.{{1,2}}$)(?!\\s)(?!.*\\s$)[^/|{cls}]+$"


def _escaped(code: int) -> str:
    return f"\\u{code:04x}" if code <= 0xFFFF else chr(code)


class AddressSchema:
    """Publishes the rule in the JSON Schema, lengths and pattern (alone: for a value
    checked elsewhere, e.g. a path parameter read from the raw path)."""

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        found = handler(schema)
        found.update(minLength=1, maxLength=MAX_LENGTH, pattern=_json_pattern())
        return found


def _validator(field: str) -> AfterValidator:
    def check(value: str) -> str:
        problem = address_problem(value)
        if problem is not None:
            raise PydanticCustomError(f"{field}_invalid", refusal_message(field, value, problem))
        return value

    return AfterValidator(check)


PartitionKey = Annotated[StrictStr, _validator("partition_key"), AddressSchema()]
DocumentId = Annotated[StrictStr, _validator("document_id"), AddressSchema()]
