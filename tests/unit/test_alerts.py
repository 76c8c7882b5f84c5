"""docker/prometheus/alerts.yml: valid rules, the field's thresholds, our metric names.

The rules are loaded by Prometheus' own checker, ``promtool`` (Debian's
``prometheus`` package; ``.ci/run`` installs it): a missing ``promtool`` fails
the test rather than passing it unchecked. The rest is parsed and checked here.
"""

from __future__ import annotations

import operator
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from services.api.disputes.metrics import DISPUTES_OLDEST_AGE
from services.api.metrics import (
    API_METRICS,
    FEED_HELD_BACK,
    PROCESS_CRASH_LOOPING,
    SUPERVISOR_METRICS,
    RestartCollector,
)
from services.supervisor.counts import write_counts
from services.worker.metrics import WORKER_METRICS
from shared.config.settings import Settings

RULES = Path(__file__).resolve().parents[2] / "docker" / "prometheus" / "alerts.yml"
SUFFIXES = ("_bucket", "_count", "_sum")


def rules() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    found = {}
    for group in groups:
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            assert rule["labels"]["severity"] in ("warning", "critical")
            assert rule["annotations"]["summary"]
            found[rule["alert"]] = rule
    return found


def test_promtool_loads_the_rules() -> None:
    promtool = shutil.which("promtool")
    assert promtool is not None, (
        "promtool is not on the PATH: install it (apt-get install prometheus, "
        "as .ci/run does) so the alert rules are checked by Prometheus itself"
    )
    result = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_use_only_metrics_settleq_serves() -> None:
    served = set(API_METRICS) | set(SUPERVISOR_METRICS) | set(WORKER_METRICS)
    for name, rule in rules().items():
        used = set(re.findall(r"\bsettleq_[a-z_]+", rule["expr"]))
        assert used, name
        for metric in used:
            for suffix in SUFFIXES:
                if metric.endswith(suffix) and metric.removesuffix(suffix) in served:
                    metric = metric.removesuffix(suffix)
            assert metric in served, f"{name} uses {metric}, which no settleq process serves"


def test_thresholds_are_the_fields() -> None:
    found = rules()
    depth = found["SettleqQueueDepthHigh"]["expr"]
    assert re.search(r"> 2 \* avg_over_time\(settleq_queue_depth\[1h\]\)", depth)

    timeout = found["SettleqTaskPastTimeout"]["expr"]
    bound = re.search(r'le=~"(\d+)', timeout)
    assert bound and int(bound.group(1)) == Settings.model_fields["task_timeout_s"].default
    assert "settleq_task_duration_seconds_count" in timeout

    dead = found["SettleqDeadLetterRateHigh"]["expr"]
    assert re.search(
        r"rate\(settleq_dead_letters_total\[\w+\]\)\)\s*/\s*sum\(rate\(settleq_lines_total", dead
    )
    assert re.search(r">\s*0\.02\b", dead)


def test_a_dispute_open_over_14_days_alerts_from_a_gauge_the_api_serves() -> None:
    rule = rules()["SettleqDisputeOpenTooLong"]
    found = re.fullmatch(rf"\s*{DISPUTES_OLDEST_AGE}\s*>\s*(\d+)\s*\*\s*(\d+)\s*", rule["expr"])
    assert found, rule["expr"]
    days, day_s = (int(n) for n in found.groups())
    assert (days, day_s) == (14, 86400)  # 14 days, written so a reader sees it
    assert DISPUTES_OLDEST_AGE in API_METRICS  # the API serves it (every kind, 0 when none)
    assert rule["labels"]["severity"] == "warning"


def test_a_crash_looping_component_alerts_from_the_gauge_its_supervisor_reports(
    tmp_path: Path,
) -> None:
    # Issue 29 item 4: a component that keeps dying no longer stops the stack,
    # so this alert is how an operator hears of it.
    rule = rules()["SettleqComponentCrashLooping"]
    found = re.fullmatch(r"\s*(settleq_[a-z_]+)\s*(==|>=|>)\s*(\d+)\s*", rule["expr"])
    assert found, rule["expr"]
    metric, comparison, bound = found.group(1), found.group(2), int(found.group(3))
    assert metric == PROCESS_CRASH_LOOPING
    assert "for" not in rule  # the first evaluation that sees it fires
    assert rule["labels"]["severity"] == "critical"
    assert "{{ $labels.component }}" in rule["annotations"]["summary"]
    compare = {"==": operator.eq, ">=": operator.ge, ">": operator.gt}[comparison]
    counts = tmp_path / "restarts.json"
    restarts = {"api": 0, "fast_path": 6, "compute_heavy": 2, "relay": 0}

    def firing() -> set[str]:
        """The components the rule fires for, on what the API serves of the file."""
        values = {
            sample.labels["component"]: sample.value
            for family in RestartCollector(str(counts)).collect()
            if family.name == metric
            for sample in family.samples
        }
        assert set(values) == set(restarts)  # every component, 0 or 1
        return {component for component, value in values.items() if compare(value, bound)}

    write_counts(counts, restarts, ["fast_path"])
    assert firing() == {"fast_path"}
    write_counts(counts, restarts)  # it stayed up: restarts are no reason to page
    assert firing() == set()


def test_a_feed_held_back_over_a_minute_alerts_from_the_gauge_the_api_serves() -> None:
    rule = rules()["SettleqLedgerFeedHeldBack"]
    found = re.fullmatch(rf"\s*{FEED_HELD_BACK}\s*>\s*(\d+)\s*", rule["expr"])
    assert found and int(found.group(1)) == 60, rule["expr"]
    assert FEED_HELD_BACK in API_METRICS
