"""Registry of settlement kinds: a new kind is one module and one line here."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from functools import lru_cache
from typing import Annotated, Any, Union, overload

from pydantic import Field, TypeAdapter

from shared.domain.kinds.base import Kind
from shared.domain.kinds.freight_audit import FreightAudit
from shared.domain.kinds.promo_accrual import PromoAccrual
from shared.domain.kinds.recipe_cost import RecipeCost
from shared.domain.money import BASIS, at_quantum, plain

KINDS: dict[str, Kind[Any, Any]] = {
    kind.name: kind for kind in (PromoAccrual(), RecipeCost(), FreightAudit())
}


# The kind whose documents a remittance's promotion deductions are matched to
# (docs/architecture.md#remittances-and-deductions): the accruals a payer owes.
DEDUCTION_KIND: str = PromoAccrual.name


def get_kind(name: str) -> Kind[Any, Any]:
    return KINDS[name]


def finest_quantum(kinds: Iterable[str]) -> Decimal:
    """The finest quantum of these kinds, so that a sum over them cuts no kind's
    digits; a kind no longer registered (or none at all) is shown with the
    ledger column's four places."""
    return min((KINDS[k].quantum if k in KINDS else BASIS for k in kinds), default=BASIS)


@overload
def shown(kind: str, value: Decimal) -> str: ...
@overload
def shown(kind: str, value: None) -> None: ...
@overload
def shown(kind: str, value: Decimal | None) -> str | None: ...
def shown(kind: str, value: Decimal | None) -> str | None:
    """An amount of ``kind`` as every read shows it (API, CLI, CSV, dashboard,
    audit): at the kind's quantum (``-2.5000`` of a promo is ``-2.50``), never
    rounded (an amount with more places keeps them: ``money.at_quantum``), in
    plain notation; None stays None. The ledger holds NUMERIC(20,4) whatever
    the kind, so its four places are the column's, never the amount's."""
    return None if value is None else shown_over((kind,), value)


def shown_over(kinds: Iterable[str], value: Decimal) -> str:
    """A sum over several kinds as ``shown`` shows an amount: at the finest of
    their quanta, so that no kind's digits are cut."""
    return plain(at_quantum(value, finest_quantum(kinds)))


def batch_adapter() -> TypeAdapter[Any]:
    """One adapter over the batch of every kind registered now, told apart by
    ``kind``. Built once for each set of kinds: a kind registered after import
    (``KINDS[name] = kind``, as the toy kind's test does) is in the next one."""
    return _adapter_of(tuple(KINDS.values()))


@lru_cache(maxsize=8)
def _adapter_of(kinds: tuple[Kind[Any, Any], ...]) -> TypeAdapter[Any]:
    models = tuple(kind.batch_model for kind in kinds)
    if len(models) == 1:
        return TypeAdapter(models[0])
    # A union built at run time from the registry: no static type form describes
    # it, so it is typed as Any (pydantic >= 2.14 types TypeAdapter's argument as
    # a TypeForm, which a subscripted special form in a variable is not).
    batch: Any = Annotated[Union[models], Field(discriminator="kind")]  # noqa: UP007
    return TypeAdapter(batch)


class _Batch:
    """``batch_adapter()`` under the one name every reader imports: each call asks
    the registry as it is then (a tuple of its kinds and a cache lookup)."""

    def validate_json(self, data: str | bytes | bytearray, /, **options: Any) -> Any:
        return batch_adapter().validate_json(data, **options)

    def validate_python(self, data: Any, /, **options: Any) -> Any:
        return batch_adapter().validate_python(data, **options)

    def dump_json(self, batch: Any, /, **options: Any) -> bytes:
        return batch_adapter().dump_json(batch, **options)

    def json_schema(self, **options: Any) -> dict[str, Any]:
        return batch_adapter().json_schema(**options)


BATCH = _Batch()
batch_adapter()  # the registered kinds' adapter, built once at import as before
