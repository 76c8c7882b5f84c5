"""settleq gen --format json|ndjson|x12: X12 for the kinds partners send as X12,
a one-line refusal for recipe_cost, --ndjson still an alias."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from services.commands.cli import app
from shared.domain.x12.synthetic import freight_210_file, promo_810_file
from tests.unit.x12.x12_build import interchanges

pytestmark = pytest.mark.usefixtures("restore_logging")
runner = CliRunner()


@pytest.mark.parametrize(
    ("kind", "option", "made"),
    [
        ("freight_audit", "--invoices", freight_210_file(12, seed=4, carriers=3)),
        ("promo_accrual", "--lines", promo_810_file(12, seed=4, vendors=3)),
    ],
)
def test_gen_x12_writes_the_synthetic_file_of_the_kind(kind: str, option: str, made: bytes) -> None:
    args = ["gen", "--kind", kind, "--format", "x12", option, "12", "--partitions", "3"]
    result = runner.invoke(app, [*args, "--seed", "4"])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == made
    (interchange,) = interchanges(result.stdout_bytes.decode("ascii"))
    assert sum(len(g.sets) for g in interchange.groups) == 12


def test_recipe_cost_has_no_x12_form_and_says_so_in_one_line() -> None:
    result = runner.invoke(app, ["gen", "--kind", "recipe_cost", "--format", "x12"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip() == (
        "settleq gen: recipe_cost has no X12 form: --format x12 takes promo_accrual or"
        " freight_audit"
    )


def test_ndjson_is_a_format_and_the_old_flag_its_alias() -> None:
    base = ["gen", "--kind", "freight_audit", "--lines", "4"]
    by_format = runner.invoke(app, [*base, "--format", "ndjson"])
    by_flag = runner.invoke(app, [*base, "--ndjson"])
    assert by_format.exit_code == by_flag.exit_code == 0
    assert by_format.stdout == by_flag.stdout
    assert json.loads(by_format.stdout.splitlines()[0]) == {"kind": "freight_audit"}
    assert json.loads(runner.invoke(app, base).stdout)["kind"] == "freight_audit"
    clash = runner.invoke(app, [*base, "--ndjson", "--format", "x12"])
    assert clash.exit_code == 2 and "two formats" in clash.stderr
