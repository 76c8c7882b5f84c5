"""The 210 fast path (shared/domain/x12/mapping/freight_210/fast.py) answers only what
map_210's rules answer: on random 210s, whatever it maps map_210 maps the same, without a
problem, and what it leaves to map_210 is left whole."""

from __future__ import annotations

import re
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.domain.x12.mapping.freight_210.document import BASIS
from shared.domain.x12.mapping.freight_210.fast import fast_210
from shared.domain.x12.mapping.numbers import is_identifier
from shared.domain.x12.mapping.sets import Place, Query
from shared.domain.x12.reading.reader import read_file
from shared.domain.x12.synthetic import freight_210_file
from tests.unit.x12.build import fast_and_slow_agree, freight, x12

AMOUNTS = ["0", "65940", "-301791", "1500", "00007", "1" + "0" * 17, "12.5", "x", "", " 100"]
RATES = ["", ".07", "-.62", "11.8", "46.09", "1.2.3", "1e3"]
QUALIFIERS = [*BASIS, "", "ZZ", "ph"]
CODES = ["", "400", "FUE", "405", "DSC", "GST", "HST", "CUS", "LiftGate", "A|B", "ENS"]
UNITS = ["", "DM", "MR", "QS", "DK", "KM", "XX"]
MILES = ["", "412", "412.0", "400", "-1", "x"]
WEIGHTS = ["", "7889", "1340.5", "-5", "x"]


def _value(draw: st.DrawFn, values: list[str], good: int = 4) -> str:
    """One of the first ``good`` (well-formed) values nine times in ten, else any."""
    if draw(st.integers(0, 9)):
        return draw(st.sampled_from(values[:good]))
    return draw(st.sampled_from(values))


@st.composite
def freight_body(draw: st.DrawFn) -> list[str]:
    segments = []
    for line in range(1, draw(st.integers(1, 5)) + 1):
        code = "" if line == 1 else _value(draw, CODES[1:], 8)
        qualifier = _value(draw, QUALIFIERS, len(BASIS))
        rate, amount = _value(draw, RATES, 5), _value(draw, AMOUNTS, 5)
        segment = f"L1*{line}*{rate}*{qualifier}*{amount}****{code}"
        if draw(st.booleans()):
            segment += f"*********{_value(draw, MILES)}*{_value(draw, UNITS, 4)}"
        segments.append(segment)
    total = sum(int(s.split("*")[4]) for s in segments if s.split("*")[4].lstrip("-").isdigit())
    due = str(total) if draw(st.integers(0, 9)) else draw(st.sampled_from(AMOUNTS))
    document_id = _value(draw, ["INV-1", "", "X" * 129, "A|B"], 1)
    scac = _value(draw, ["SCAC", "scac", "", "Σ"], 2)
    correction = _value(draw, ["", "Y"], 1)
    body = [f"B3**{document_id}*1*PP**20260105*{due}*{correction}*20260106*035*{scac}"]
    if not draw(st.integers(0, 9)):
        body.append(draw(st.sampled_from(["B2A*00", "B2A*01"])))
    for line in range(1, draw(st.integers(0, 2)) + 1):
        miles, unit = _value(draw, MILES), _value(draw, UNITS, 4)
        weight, count = _value(draw, WEIGHTS, 3), _value(draw, ["3", "", "2.5", "x"], 3)
        kilos = _value(draw, ["", "L", "K"], 2)
        body.append(f"L0*{line}*{miles}*{unit}*{weight}*G***{count}*PLT**{kilos}")
    body += segments
    if draw(st.booleans()):
        body.append(f"L3*1*G***{total if draw(st.integers(0, 9)) else 7}")
    return body


@settings(max_examples=600, deadline=None, derandomize=True, database=None)
@given(freight_body())
def test_the_fast_path_agrees_with_map_210(body: list[str]) -> None:
    fast_and_slow_agree(read_file(x12([("210", "0001", body)])))


def test_the_random_210s_often_take_the_fast_path() -> None:
    """So the property above is not vacuous: a fair share of its bodies map fast."""
    mapped = 0

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(freight_body())
    def count(body: list[str]) -> None:
        nonlocal mapped
        [interchange] = read_file(x12([("210", "0001", body)]))
        place = Place(interchange, interchange.groups[0], interchange.groups[0].sets[0])
        mapped += fast_210(place, Query(1, None, None)) is not None

    count()
    assert mapped >= 50, mapped


def test_generated_files_take_the_fast_path_and_agree() -> None:
    """Every set of ``settleq gen --format x12``'s 210s (all its rate bases, taxes and
    accessorials) maps fast, to map_210's document and its bytes, valid for the model."""
    for seed in (1, 7, 12):
        data = freight_210_file(600, seed=seed, carriers=5, sets_per_group=250)
        assert fast_and_slow_agree(read_file(data), seed) == 600


def test_a_set_not_in_ascii_reads_its_numbers_by_the_rules_regexes() -> None:
    """str.isdigit() takes any script's digits; N2 and R take 0-9 only. The fast path
    trusts isdigit only in an ASCII set: elsewhere the regexes decide, as in map_210."""
    accented = "N1*SH*PAPIER MÉTIS"
    for body in (
        [freight()[0], accented, *freight()[1:]],  # mapped, by the regexes
        freight(L1CUS="L1*2***１５００****CUS"),  # fullwidth digits: not N2
        freight(L1="L1*1*４６.09*PH*363604"),  # nor R
        freight(L0="L0*1***７８８９*G***3*PCS"),
    ):
        assert fast_and_slow_agree(read_file(x12([("210", "0001", body)]))) == (body[1] == accented)


def test_the_identifier_check_is_the_identifier_rule() -> None:
    """numbers.is_identifier decides a printable string without the regex: it must
    answer as the regex (shared.domain.kinds.base.Identifier) for every character."""
    rule = re.compile(r"[^\x00-\x1f\x7f-\x9f|]{1,128}").fullmatch
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        assert is_identifier(char) == (rule(char) is not None), hex(code)
    assert not is_identifier("") and is_identifier("A" * 128) and not is_identifier("A" * 129)
