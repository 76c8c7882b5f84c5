"""Query and path parameters several routes share, checked alike: a settlement
kind's name, a partition key."""

from __future__ import annotations

from typing import Annotated

from pydantic import WithJsonSchema

from services.api.errors import ApiError
from shared.domain.kinds import KINDS
from shared.domain.kinds.ids import address_problem, refusal_message

KindName = Annotated[str, WithJsonSchema({"type": "string", "enum": list(KINDS)})]


def not_a_kind(name: str) -> str:
    return f"{name[:40]!r} is not a settlement kind; the kinds: {', '.join(KINDS)}"


def check_kind(name: str, loc: list[str]) -> str:
    """A settlement kind's name; 422 ``unknown_kind`` for any other."""
    if name not in KINDS:
        message = not_a_kind(name)
        raise ApiError(
            422, "unknown_kind", message, [{"loc": loc, "type": "unknown_kind", "msg": message}]
        )
    return name


def check_partition(partition_key: str, loc: list[str]) -> str:
    problem = address_problem(partition_key)
    if problem is not None:
        message = refusal_message("partition_key", partition_key, problem)
        detail = {"loc": loc, "type": "partition_key_invalid", "msg": message}
        raise ApiError(422, "partition_key_invalid", message, [detail])
    return partition_key
