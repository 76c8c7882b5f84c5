"""Decimal text of any length, and what docs/architecture.md#decimal-limits says of it, for property
tests.

``decimal_texts`` writes numbers the way a producer might: long fractions,
long integer parts, runs of leading and trailing zeros, a nonzero digit far
after a run of zeros (``1.3000…0001``), exponents small, large and absurd.
``verdict`` is the SPEC's answer, computed from ``Decimal(text)`` (exact: a
Decimal built from a string is never rounded) without the code under test.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

GRAMMAR = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
ABS_LIMIT = Decimal(10) ** 12

_digits = st.text("0123456789", min_size=1, max_size=3)


def _run(max_size: int) -> Any:
    """Usually short, sometimes very long."""
    return st.one_of(st.integers(0, 3), st.integers(0, max_size), st.integers(0, 2000)).map(int)


@st.composite
def decimal_texts(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "-"]))
    whole = "0" * draw(_run(20)) + draw(_digits) + "0" * draw(_run(20))
    text = sign + whole
    if draw(st.booleans()):
        head = draw(st.text("0123456789", max_size=8))
        zeros = "0" * draw(_run(40))
        tail = draw(st.text("0123456789", max_size=2))
        fraction = head + zeros + tail + "0" * draw(_run(40))
        text += "." + (fraction or "0")
    if draw(st.booleans()):
        exponent = draw(
            st.one_of(
                st.integers(-40, 40),
                st.integers(-(10**7), 10**7),
                st.integers(10**12, 10**30),
                st.integers(-(10**30), -(10**12)),
            )
        )
        letter = draw(st.sampled_from("eE"))
        plus = "+" if exponent >= 0 and draw(st.booleans()) else ""
        padded = "0" * draw(st.integers(0, 3)) + str(abs(exponent))
        text += f"{letter}{'-' if exponent < 0 else plus}{padded}"
    return text


def not_quite_decimals() -> Any:
    """Strings near the grammar's edges: most are not numbers at all."""
    return st.text(alphabet="0123456789.eE+- ,\u0661", max_size=12)


def exact_value(text: str) -> Decimal | None:
    """The value ``text`` writes, or None when it is not a plain decimal. An
    exponent of more than 15 digits is only ever zero or out of range, and
    near 10**18 too big for Decimal itself (its Emax, with the digits' own
    shift, is exceeded: ``100e999999999999999998`` raises); its value is
    reported as zero or as 10**99 accordingly."""
    if not GRAMMAR.fullmatch(text):
        return None
    mantissa, _, exponent = text.lower().partition("e")
    if len(exponent.lstrip("+-").lstrip("0")) > 15:
        return Decimal(0) if set(mantissa) <= set("-0.") else Decimal("1e99")
    return Decimal(text)


def within_limits(value: Decimal, places: int) -> bool:
    """docs/architecture.md#decimal-limits: at most ``places`` significant decimal places, |value| <
    10**12. Trailing zeros are stripped by hand: ``normalize()`` would round."""
    if value == 0:
        return True
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    lowest = exponent + len(text) - len(text.rstrip("0"))
    return -lowest <= places and value.copy_abs() < ABS_LIMIT
