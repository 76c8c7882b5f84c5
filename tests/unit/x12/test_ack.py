"""The 997 (shared/domain/x12/acknowledging/answer.py): the envelope back to the sender, AK1..AK9
per group and AK2/AK5 per set, AK3/AK4 pointing at what is wrong, each code of
acknowledging/codes.py where it belongs; and pyx12 finds every 997 valid."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from shared.domain.x12.acknowledging.answer import acknowledge
from shared.domain.x12.acknowledging.loops import loop_id
from shared.domain.x12.acknowledging.summary import summarize
from shared.domain.x12.model import Interchange, Problem, Segment
from shared.domain.x12.synthetic import freight_210_file, promo_810_file
from tests.unit.x12.pyx12_peer import map_dir, validate_997
from tests.unit.x12.x12_build import interchanges, segments

NOW = datetime(2026, 10, 2, 9, 30, tzinfo=UTC)

# Two groups of 210s from a carrier (ISA qualifier 01: a DUNS number), one of
# two sets and one of one. Positions: ISA 1, GS 2, ST 3..SE 9, ST 10..SE 16,
# GE 17, GS 18, ST 19..SE 23, GE 24, IEA 25.
CARRIER_ISA = (
    "ISA*00*          *00*          *01*123456789      *ZZ*SETTLEQ        "
    "*261001*0800*U*00401*000000417*0*P*>~\n"
)
CARRIER_FILE = (
    CARRIER_ISA
    + """\
GS*IM*CARRIER1*SETTLEQAP*20261001*0800*417*X*004010~
ST*210*0001~
B3**PRO-1*BOL1*PP*L*20260901*8238**20260830*035*CARRIER-000~
N1*BT*SETTLEQ FREIGHT PAYABLE~
LX*1~
L0*1*112*DM~
L1*1*2.15*PM*8238~
SE*7*0001~
ST*210*0002~
B3**PRO-2*BOL2*PP*L*20260901*4500**20260830*035*CARRIER-000~
N1*BT*SETTLEQ FREIGHT PAYABLE~
LX*1~
L0*1~
L1*1*45*FR*4500~
SE*7*0002~
GE*2*417~
GS*IM*CARRIER1*SETTLEQAP*20261001*0800*418*X*004010~
ST*210*0001~
B3**PRO-3*BOL3*PP*L*20260901*4500**20260830*035*CARRIER-000~
LX*1~
L1*1*45*FR*4500~
SE*5*0001~
GE*1*418~
IEA*2*000000417~
"""
)


@pytest.fixture(scope="module")
def maps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return map_dir(tmp_path_factory.mktemp("pyx12"))


def ack(text: str, *problems: Problem, numbers: tuple[int, ...] = (5,)) -> list[Segment]:
    data = acknowledge(interchanges(text), problems, control_numbers=numbers, now=NOW)
    assert data.endswith(b"~\n") and b"\r" not in data
    return segments(data.decode("ascii"))


def rows(answer: list[Segment]) -> list[str]:
    return ["*".join((s.tag, *s.elements)) for s in answer]


def test_an_accepted_file_is_answered_back_to_its_sender_set_by_set(maps: Path) -> None:
    data = acknowledge(interchanges(CARRIER_FILE), [], control_numbers=[7], now=NOW)
    assert validate_997(data, maps) == []
    isa, *rest = data.decode().split("~\n")
    assert len(isa) == 105 and isa[3] == "*" and isa[-1] == ">"  # 106 with its terminator
    assert isa.split("*")[5:9] == ["ZZ", "SETTLEQ        ", "01", "123456789      "]
    assert isa.split("*")[9:16] == ["261002", "0930", "U", "00401", "000000007", "0", "P"]
    assert rows(ack(CARRIER_FILE, numbers=(7,)))[1:] == [
        "GS*FA*SETTLEQAP*CARRIER1*20261002*0930*7*X*004010",
        "ST*997*0001",
        "AK1*IM*417",
        "AK2*210*0001",
        "AK5*A",
        "AK2*210*0002",
        "AK5*A",
        "AK9*A*2*2*2",
        "SE*8*0001",
        "ST*997*0002",
        "AK1*IM*418",
        "AK2*210*0001",
        "AK5*A",
        "AK9*A*1*1*1",
        "SE*6*0002",
        "GE*2*7",
        "IEA*1*000000007",
    ]


def test_a_rejected_set_points_at_its_segment_loop_and_element(maps: Path) -> None:
    problems = [
        # the second set's L1 (file position 15) is the 6th segment of its set
        Problem("edi_total_mismatch", "sum of L1-04 is not B3-07", 15, "L1", 4, "0002"),
        Problem("edi_bad_number", "a '.' in an N2 amount", 11, "B3", 7, "0002"),
        # a mandatory element left empty: AK403 1, whatever the code says
        Problem("edi_unmappable", "no L0 quantity", 14, "L0", 2, "0002"),
    ]
    data = acknowledge(interchanges(CARRIER_FILE), problems, control_numbers=[8], now=NOW)
    assert validate_997(data, maps) == []
    first_group = rows(segments(data.decode()))[3:16]
    assert first_group == [
        "AK1*IM*417",
        "AK2*210*0001",
        "AK5*A",
        "AK2*210*0002",
        "AK3*L1*6*0400*8",
        "AK4*4**7",
        "AK3*B3*2**8",
        "AK4*7**6",
        "AK3*L0*5*0400*8",
        "AK4*2**1",
        "AK5*R*5",
        "AK9*P*2*2*1",
        "SE*14*0001",
    ]


def test_a_group_whose_every_set_is_rejected_is_rejected(maps: Path) -> None:
    problem = Problem("edi_unsupported_purpose", "B3-08 correction", 20, "B3", 8)
    data = acknowledge(interchanges(CARRIER_FILE), [problem], control_numbers=[9], now=NOW)
    assert validate_997(data, maps) == []
    assert rows(segments(data.decode()))[-8:-4] == [
        "AK2*210*0001",
        "AK3*B3*2**8",
        "AK4*8**1",
        "AK5*R*5",
    ]
    assert rows(segments(data.decode()))[-4] == "AK9*R*1*1*0"


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        (Problem("edi_count_mismatch", "SE01", 9, "SE", 1), "AK5*R*4"),
        (Problem("edi_control_mismatch", "SE02", 9, "SE", 2), "AK5*R*3"),
        (Problem("edi_duplicate_control", "ST02 twice", 3, "ST", 2), "AK5*R*23"),
        (Problem("edi_unsupported_transaction_set", "ST01", 3, "ST", 1), "AK5*R*1"),
    ],
)
def test_an_envelope_problem_of_a_set_is_its_ak5_code_alone(
    problem: Problem, expected: str, maps: Path
) -> None:
    answer = rows(ack(CARRIER_FILE, problem))
    assert answer[4:7] == ["AK2*210*0001", expected, "AK2*210*0002"]
    assert not any(row.startswith("AK3") for row in answer)
    assert "AK9*P*2*2*1" in answer
    data = acknowledge(interchanges(CARRIER_FILE), [problem], control_numbers=[5], now=NOW)
    assert validate_997(data, maps) == []


@pytest.mark.parametrize(
    ("problem", "ak9"),
    [
        (Problem("edi_count_mismatch", "GE01", 24, "GE", 1), "AK9*R*1*1*1*5"),
        (Problem("edi_control_mismatch", "GE02", 24, "GE", 2), "AK9*R*1*1*1*4"),
        (Problem("edi_duplicate_control", "GS06 twice", 18, "GS", 6), "AK9*R*1*1*1*6"),
        (Problem("edi_syntax", "a bad GS", 18, "GS", 4), "AK9*R*1*1*1"),
    ],
)
def test_a_group_level_problem_rejects_the_group_in_its_ak9(
    problem: Problem, ak9: str, maps: Path
) -> None:
    answer = rows(ack(CARRIER_FILE, problem))
    assert "AK9*A*2*2*2" in answer  # the other group
    assert answer[answer.index("AK1*IM*418") + 3] == ak9
    data = acknowledge(interchanges(CARRIER_FILE), [problem], control_numbers=[5], now=NOW)
    assert validate_997(data, maps) == []


@pytest.mark.parametrize(
    ("problem", "ta1"),
    [
        (Problem("edi_count_mismatch", "IEA01", 25, "IEA", 1), "TA1*000000417*261001*0800*R*021"),
        (Problem("edi_control_mismatch", "IEA02", 25, "IEA", 2), "TA1*000000417*261001*0800*R*001"),
        (Problem("edi_syntax", "ISA15", 1, "ISA", 15), "TA1*000000417*261001*0800*R*020"),
        (Problem("edi_duplicate_interchange", "seen", None, None, None, "000000417"),
         "TA1*000000417*261001*0800*R*025"),
    ],
)  # fmt: skip
def test_an_interchange_level_problem_is_a_ta1_after_the_isa(problem: Problem, ta1: str) -> None:
    # pyx12's 997 map expects a TA1 after the groups, where the X12 control
    # structure (ISA, TA1, GS..GE, IEA) does not put it: not validated here.
    answer = rows(ack(CARRIER_FILE, problem))
    assert answer[1] == ta1 and answer[2].startswith("GS*FA*")
    # An interchange rejected is never acknowledged as accepted: every set and
    # group R, none accepted.
    assert "AK9*R*2*2*0" in answer and "AK9*R*1*1*0" in answer
    assert [row for row in answer if row.startswith("AK5")] == ["AK5*R"] * 3


@pytest.mark.regression
def test_an_unknown_senders_997_never_says_accepted() -> None:
    """Issue 42: a TA1 R 006 above AK9 A's: a translator reading the AK9s
    believed the file went through."""
    problem = Problem("edi_partner_unknown", "no profile", 1, "ISA", 6)
    data = acknowledge(interchanges(CARRIER_FILE), [problem], control_numbers=[5], now=NOW)
    answer = rows(segments(data.decode("ascii")))
    assert [row for row in answer if row.startswith("TA1")][0].endswith("*R*006")
    assert not [row for row in answer if row.startswith("AK9*A")]
    # Issue 52: every set rejected, 0 accepted (an AK5 A and AK9*R*1*1*1 beside
    # the TA1 R still read as accepted to a translator that counts the sets).
    assert [row for row in answer if row.startswith("AK5")] == ["AK5*R"] * 3
    assert [row for row in answer if row.startswith("AK9")] == ["AK9*R*2*2*0", "AK9*R*1*1*0"]
    said = summarize(data)
    assert said is not None and (said.accepted, said.interchange_rejected) == (0, True)
    assert said.heading() == "997 rejecting the interchange"


def test_a_file_refused_for_nothing_to_settle_has_every_set_accepted(maps: Path) -> None:
    problem = Problem("edi_no_documents", "no allowance to settle")
    assert ack(CARRIER_FILE, problem) == ack(CARRIER_FILE)


def test_a_problem_without_a_position_is_placed_by_its_control_number() -> None:
    by_set = rows(ack(CARRIER_FILE, Problem("edi_unmappable", "x", control_number="0002")))
    assert by_set[5:9] == ["AK5*A", "AK2*210*0002", "AK5*R*5", "AK9*P*2*2*1"]
    by_group = rows(ack(CARRIER_FILE, Problem("edi_mixed_kinds", "x", control_number="418")))
    assert by_group[-4] == "AK9*R*1*1*1*1"
    anywhere = rows(ack(CARRIER_FILE, Problem("edi_mixed_kinds", "x")))
    assert anywhere[1] == "TA1*000000417*261001*0800*R*024"


def test_each_interchange_gets_its_own_997_with_its_control_number(maps: Path) -> None:
    second = CARRIER_FILE.replace("000000417", "000000419").replace(
        "*01*123456789 ", "*ZZ*OTHER     "
    )
    both = interchanges(CARRIER_FILE + second)
    problem = Problem("edi_total_mismatch", "x", 25 + 15, "L1", 4)  # the second file's L1
    data = acknowledge(both, [problem], control_numbers=[11, 12], now=NOW)
    assert validate_997(data, maps) == []
    answer = segments(data.decode())
    isas = [s for s in answer if s.tag == "ISA"]
    assert [s.get(13) for s in isas] == ["000000011", "000000012"]
    assert [s.get(8).strip() for s in isas] == ["123456789", "OTHER"]
    assert [s.get(6) for s in answer if s.tag == "GS"] == ["11", "12"]
    assert [r for r in rows(answer) if r.startswith("AK9")] == [
        "AK9*A*2*2*2", "AK9*A*1*1*1", "AK9*P*2*2*1", "AK9*A*1*1*1",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="one control number per interchange"):
        acknowledge(both, [], control_numbers=[11], now=NOW)


def test_an_aware_time_is_written_in_utc_and_the_version_follows_the_group() -> None:
    eastern = NOW.astimezone(timezone(timedelta(hours=-5)))
    assert ack(CARRIER_FILE) == segments(
        acknowledge(interchanges(CARRIER_FILE), [], control_numbers=[5], now=eastern).decode()
    )
    assert ack(CARRIER_FILE.replace("*X*004010~", "*X*003010~"))[1].get(8) == "003010"
    no_version = CARRIER_FILE.replace("*X*004010~", "*X*~").replace("*00401*", "*00305*")
    assert ack(no_version)[1].get(8) == "003050"
    # a stray character glued to GS08 (a file read with the wrong terminator) is no version
    glued = _with_gs(interchanges(CARRIER_FILE)[0], 8, "004010?")
    answer = acknowledge([glued], [], control_numbers=[5], now=NOW).decode()
    assert answer.splitlines()[1].endswith("*X*004010~")


def test_a_delimiter_in_a_partner_value_makes_us_choose_another() -> None:
    # A partner separating elements with "|" may have a "*" in its GS02.
    plain = acknowledge(interchanges(CARRIER_FILE), [], control_numbers=[5], now=NOW).decode()
    assert plain[3] == "*"
    starred = _with_gs(interchanges(CARRIER_FILE)[0], 2, "CAR*RIER")
    chosen = acknowledge([starred], [], control_numbers=[5], now=NOW).decode()
    assert chosen[3] == "|" and "GS|FA|SETTLEQAP|CAR*RIER|" in chosen
    assert len(chosen.split("~\n")[0]) == 105


def _with_gs(ic: Interchange, n: int, value: str) -> Interchange:
    """``ic`` with element ``n`` of every GS replaced by ``value``."""
    from dataclasses import replace

    def changed(gs: Segment) -> Segment:
        return replace(gs, elements=(*gs.elements[: n - 1], value, *gs.elements[n:]))

    return replace(ic, groups=tuple(replace(g, gs=changed(g.gs)) for g in ic.groups))


def test_loops_are_the_4010_tables_ids() -> None:
    (freight,) = interchanges(CARRIER_FILE)[0].groups[0].sets[:1]
    tags = [s.tag for s in freight.segments]
    assert tags == ["ST", "B3", "N1", "LX", "L0", "L1", "SE"]
    assert [loop_id("210", freight.segments, i) for i in range(6)] == [
        "", "", "0100", "0400", "0400", "0400",
    ]  # fmt: skip
    (invoice,) = interchanges(promo_810_file(1, seed=3, vendors=1).decode())[0].groups[0].sets
    found = {(s.tag, loop_id("810", invoice.segments, i)) for i, s in enumerate(invoice.segments)}
    assert {("BIG", ""), ("REF", ""), ("N1", "N1"), ("N4", "N1"), ("ITD", "")} <= found
    assert {("IT1", "IT1"), ("PID", "PID"), ("SAC", "SAC"), ("TDS", ""), ("CTT", "")} <= found
    assert loop_id("850", invoice.segments, 3) == ""


@pytest.mark.parametrize("code", ["210", "810"])
def test_the_997_of_a_large_generated_file_is_valid(code: str, maps: Path) -> None:
    shape = {"seed": 11, "sets_per_group": 250, "groups_per_interchange": 3}
    if code == "210":
        text = freight_210_file(1_200, carriers=3, **shape).decode()
    else:
        text = promo_810_file(1_200, vendors=3, **shape).decode()
    received = interchanges(text)
    assert len(received) == 2 and [len(ic.groups) for ic in received] == [3, 2]
    some = received[1].groups[0].sets[17]
    problem = Problem("edi_total_mismatch", "x", some.body[0].position, some.body[0].tag, 7)
    data = acknowledge(received, [problem], control_numbers=[21, 22], now=NOW)
    assert validate_997(data, maps) == []
    ak9s = [s for s in segments(data.decode()) if s.tag == "AK9"]
    assert [s.get(1) for s in ak9s] == ["A", "A", "A", "P", "A"]
    assert [s.get(2) for s in ak9s] == ["250", "250", "250", "250", "200"]
    assert sum(int(s.get(4)) for s in ak9s) == 1_199
