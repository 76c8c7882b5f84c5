"""Query and path parameters several routes share, checked alike: a settlement
kind's name, a partition key, and the partitions a reader may read."""

from __future__ import annotations

from typing import Annotated

from pydantic import WithJsonSchema

from services.api.auth import Principal
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


def readable_partitions(who: Principal, partition_key: str | None) -> list[str] | None:
    """The partitions a read covers (None: every one): a producer key reads its
    own only (403 ``partition_not_allowed`` for another's), a token any."""
    if who.role != "producer" or who.key is None or "*" in who.key.partitions:
        return None if partition_key is None else [partition_key]
    if partition_key is None:
        return list(who.key.partitions)
    if partition_key not in who.key.partitions:
        raise ApiError(403, "partition_not_allowed", "this key may not read that partition")
    return [partition_key]
