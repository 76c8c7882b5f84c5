"""The settlement kinds (docs/api.md#kinds): what differs by kind, read from
the registry, so that the dashboard and other readers name no kind themselves."""

from __future__ import annotations

from fastapi import APIRouter

from services.api.auth import Viewer
from services.api.errors import ErrorBody
from services.api.schemas import KindInfo
from shared.domain.kinds import KINDS

router = APIRouter(tags=["kinds"])


def kind_infos() -> list[KindInfo]:
    return [
        KindInfo(
            name=kind.name,
            quantum=str(kind.quantum),
            places=-int(kind.quantum.as_tuple().exponent),
            partition_noun=kind.partition_noun,
            line_ref_name=kind.line_ref_name,
            x12_set=kind.x12_set,
            line_columns=list(kind.line_columns),
            amounts_are_totals=kind.amounts_are_totals,
        )
        for kind in KINDS.values()
    ]


@router.get(
    "/v1/kinds",
    operation_id="listKinds",
    responses={401: {"model": ErrorBody, "description": "unauthenticated"}},
)
async def list_kinds(_: Viewer) -> list[KindInfo]:
    """Every settlement kind this server settles: its quantum and the places its
    amounts are shown with, its partition's noun, its line reference, its X12
    transaction set and its columns in a job's lines CSV."""
    return kind_infos()
