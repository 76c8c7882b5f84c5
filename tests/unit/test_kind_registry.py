"""A kind is one module and one line in the registry (docs/architecture.md#settlement-kinds):
every registry that holds something per kind holds every kind of ``KINDS``, and
nothing outside the files a new kind touches names a kind."""

from __future__ import annotations

import inspect
import re
from decimal import Decimal
from pathlib import Path

from services.api.routes.kinds import kind_infos
from services.commands.money import money
from shared.domain.kinds import BATCH, KINDS
from shared.domain.synthetic import GENERATORS
from shared.domain.x12.mapping.files import MAPPERS as X12_MAPPERS
from shared.domain.x12.mapping.files import kinds_by_set
from shared.domain.x12.synthetic import GENERATORS as X12_GENERATORS

ROOT = Path(__file__).resolve().parents[2]

# The files that may name a kind (docs/architecture.md#settlement-kinds says why
# each): its module and the registry's line, and its synthetic batch for `settleq
# gen`, the demo and the benches. The X12 codec and intake read a kind's X12 facts
# from it (``x12_set``, ``x12_query``, ``x12_fast_path``) and map by set.
MAY_NAME_A_KIND = (
    "shared/domain/kinds/",
    "shared/domain/synthetic.py",
)


def test_every_kind_has_every_fact_a_reader_needs() -> None:
    for name, kind in KINDS.items():
        assert kind.name == name
        assert isinstance(kind.quantum, Decimal) and kind.quantum > 0
        assert kind.partition_noun and kind.line_ref_name
        assert kind.delta_basis in ("key_versions", "line_history")


def test_the_api_lists_every_kind_from_the_registry() -> None:
    infos = {info.name: info for info in kind_infos()}
    assert list(infos) == list(KINDS)
    for name, kind in KINDS.items():
        info = infos[name]
        assert Decimal(info.quantum) == kind.quantum
        assert Decimal(1).scaleb(-info.places) == kind.quantum  # the dashboard's places
        assert info.x12_set == kind.x12_set
        assert info.line_columns == list(kind.line_columns)


def test_the_cli_shows_each_kind_at_its_quantum() -> None:
    for name, kind in KINDS.items():
        places = -int(kind.quantum.as_tuple().exponent)
        shown = money("1234.5", name)
        assert shown == "1,234." + "5".ljust(places, "0"), (name, shown)


def test_every_kind_has_a_synthetic_batch_that_the_front_door_takes() -> None:
    assert set(GENERATORS) == set(KINDS)
    for name, kind in KINDS.items():
        make_batch, make_contract = GENERATORS[name]
        noun = kind.partition_noun + "s"  # `settleq gen --partitions` names it so
        assert noun in inspect.signature(make_batch).parameters, (name, noun)
        batch = BATCH.validate_python(make_batch(3, **{noun: 2}))
        assert batch.kind == name
        kind.contract_for_publication(make_contract())


def test_the_x12_sets_are_the_kinds_that_say_so() -> None:
    by_set = {kind.x12_set: name for name, kind in KINDS.items() if kind.x12_set}
    assert len(by_set) == len([k for k in KINDS.values() if k.x12_set]), "a set of two kinds"
    assert {code: kind.name for code, kind in kinds_by_set().items()} == by_set
    assert set(X12_MAPPERS) == set(by_set)
    assert set(X12_GENERATORS) == set(by_set)


def test_a_kinds_x12_facts_agree_with_what_the_x12_intake_reads() -> None:
    for name, kind in KINDS.items():
        assert not kind.x12_fast_path or kind.x12_set == "210", name
        assert not kind.x12_query or kind.x12_set, name
        assert set(kind.x12_query) <= {"partition_key", "period"}, name


def test_no_file_outside_a_kinds_own_names_a_kind() -> None:
    names = re.compile("|".join(re.escape(n) for n in KINDS))
    naming = []
    for package in ("shared", "services"):
        for path in sorted((ROOT / package).rglob("*")):
            if path.suffix not in (".py", ".js", ".html") or "migrations" in path.parts:
                continue
            relative = str(path.relative_to(ROOT))
            if relative.startswith(MAY_NAME_A_KIND):
                continue
            if names.search(path.read_text(encoding="utf-8")):
                naming.append(relative)
    assert not naming, f"these name a kind; read it from shared.domain.kinds instead: {naming}"
