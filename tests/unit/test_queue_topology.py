"""Which queues a stack declares, per queue type, and with what
(shared/domain/pipeline/queues.py)."""

from __future__ import annotations

import pytest

from shared.config.explain import explain
from shared.config.settings import Settings
from shared.domain.pipeline.messages import MAX_PRIORITY, priority_for
from shared.domain.pipeline.queues import (
    dead_queue_arguments,
    every_queue,
    family_queues,
    lane_of,
    queue_for,
    work_queue_arguments,
)


def test_classic_is_one_queue_a_tier_ordered_by_priority() -> None:
    assert family_queues("acc1", "fast_path", "classic") == ("acc1.fast_path",)
    assert queue_for("acc1", "compute_heavy", "classic", 1) == "acc1.compute_heavy"
    assert work_queue_arguments("classic", 9, 20) == {"x-max-priority": 9}
    assert dead_queue_arguments("classic") == {}


def test_quorum_has_one_lane_per_job_size_and_no_priorities() -> None:
    assert family_queues("acc1", "fast_path", "quorum") == (
        "acc1.fast_path.small",
        "acc1.fast_path.medium",
        "acc1.fast_path.large",
    )
    arguments = work_queue_arguments("quorum", 9, 20)
    assert arguments == {
        "x-queue-type": "quorum",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
        "x-delivery-limit": 20,
    }
    assert "x-max-priority" not in arguments
    assert dead_queue_arguments("quorum")["x-queue-type"] == "quorum"


@pytest.mark.parametrize(
    ("lines", "lane"), [(10, "small"), (1_000, "small"), (1_001, "medium"), (50_001, "large")]
)
def test_a_jobs_size_picks_its_lane(lines: int, lane: str) -> None:
    assert lane_of(priority_for(lines)) == lane
    assert queue_for("s", "fast_path", "quorum", priority_for(lines)) == f"s.fast_path.{lane}"


def test_every_priority_has_a_lane_and_a_requeue_goes_first() -> None:
    assert {lane_of(p) for p in range(-3, 256)} == {"small", "medium", "large"}
    assert lane_of(MAX_PRIORITY) == "small"


def test_every_queue_names_each_lane_with_its_delay_and_dead_letter_queue() -> None:
    names = every_queue("p", "quorum")
    assert len(names) == 2 * 3 * 3
    assert "p.compute_heavy.large.DQ" in names and "p.fast_path.small.XQ" in names
    assert every_queue("p", "classic") == [
        "p.fast_path",
        "p.fast_path.DQ",
        "p.fast_path.XQ",
        "p.compute_heavy",
        "p.compute_heavy.DQ",
        "p.compute_heavy.XQ",
    ]
    assert not set(names) & set(every_queue("p", "classic"))


def test_settings_route_a_tier_to_its_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETTLEQ_QUEUE_TYPE", "quorum")
    s = Settings(queue_prefix="acc1")
    assert s.queues_of("compute_heavy")[0] == "acc1.compute_heavy.small"
    assert s.queue_for("fast_path", 1) == "acc1.fast_path.large"
    assert Settings().queue_type == "quorum"
    monkeypatch.delenv("SETTLEQ_QUEUE_TYPE")
    assert Settings().queue_type == "classic"


def test_a_delivery_limit_below_the_attempts_is_refused_by_name() -> None:
    with pytest.raises(ValueError) as refused:
        Settings(max_attempts=6, queue_delivery_limit=5)
    line = explain(refused.value)
    assert line.startswith(
        "SETTLEQ_QUEUE_DELIVERY_LIMIT: must be at least SETTLEQ_MAX_ATTEMPTS (6)"
    )
    assert Settings(max_attempts=6, queue_delivery_limit=6).delivery_limit() == 6


def test_an_unset_delivery_limit_is_20_or_the_attempts_where_more() -> None:
    """Raising SETTLEQ_MAX_ATTEMPTS alone must not stop a stack (classic or quorum)."""
    assert Settings().delivery_limit() == 20
    assert Settings(max_attempts=50).delivery_limit() == 50
    assert Settings(max_attempts=50, queue_delivery_limit=60).delivery_limit() == 60


def test_an_unknown_queue_type_is_refused_by_name() -> None:
    with pytest.raises(ValueError) as refused:
        Settings(queue_type="mirrored")  # type: ignore[arg-type]
    assert explain(refused.value).startswith("SETTLEQ_QUEUE_TYPE: Input should be 'classic' or")
