"""A CSV cell's text, for the spreadsheet finance works in
(docs/api.md#csv-exports): the API's exports and the command line's write
their cells alike."""

from __future__ import annotations

from decimal import Decimal

Cell = str | Decimal | int | None

# What makes Excel, LibreOffice and Google Sheets read a cell as a formula
# (OWASP, "CSV Injection"); tab and CR can hide one after a line break.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_FIRST = frozenset(FORMULA_START)


def cell(value: Cell) -> str:
    """One cell's text (see the module's docstring)."""
    # By exact type first: this runs for every cell of an export.
    kind = type(value)
    if kind is str:
        text: str = value  # type: ignore[assignment]
        return "'" + text if text and text[0] in _FORMULA_FIRST else text
    if value is None:
        return ""
    if kind is Decimal or isinstance(value, Decimal):
        number: Decimal = value  # type: ignore[assignment]
        return format(number.copy_abs() if number.is_zero() else number, "f")
    if isinstance(value, str):  # a str subclass (an enum's value)
        return cell(str(value))
    return str(value)
