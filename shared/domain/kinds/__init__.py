"""Registry of settlement kinds: a new kind is one module and one line here."""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter

from shared.domain.kinds.base import Kind
from shared.domain.kinds.freight_audit import FreightAudit
from shared.domain.kinds.promo_accrual import PromoAccrual
from shared.domain.kinds.recipe_cost import RecipeCost

KINDS: dict[str, Kind[Any, Any]] = {
    kind.name: kind for kind in (PromoAccrual(), RecipeCost(), FreightAudit())
}


def get_kind(name: str) -> Kind[Any, Any]:
    return KINDS[name]


def _batch_adapter() -> TypeAdapter[Any]:
    """One adapter over every kind's batch, told apart by ``kind``."""
    models = tuple(kind.batch_model for kind in KINDS.values())
    if len(models) == 1:
        return TypeAdapter(models[0])
    # A union built at run time from the registry: no static type form describes
    # it, so it is typed as Any (pydantic >= 2.14 types TypeAdapter's argument as
    # a TypeForm, which a subscripted special form in a variable is not).
    batch: Any = Annotated[Union[models], Field(discriminator="kind")]  # noqa: UP007
    return TypeAdapter(batch)


BATCH = _batch_adapter()
