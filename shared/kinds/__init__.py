"""Registry of settlement kinds: a new kind is one module and one line here."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from shared.kinds.base import Kind
from shared.kinds.promo_accrual import PromoAccrual

KINDS: dict[str, Kind[Any, Any]] = {kind.name: kind for kind in (PromoAccrual(),)}


def get_kind(name: str) -> Kind[Any, Any]:
    return KINDS[name]


def _batch_adapter() -> TypeAdapter[Any]:
    models = tuple(getattr(kind, "batch_model") for kind in KINDS.values())  # noqa: B009
    union: Any = models[0] if len(models) == 1 else Annotated[models, Field(discriminator="kind")]
    return TypeAdapter(union)


BATCH = _batch_adapter()
