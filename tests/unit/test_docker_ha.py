"""The ledger's high-availability examples, checked structurally (no Docker
engine or Kubernetes cluster here): docker/compose.ha.yaml's pg_auto_failover
formation and deploy/kubernetes/settleq-cloudnative-pg.yaml. The failover
itself is tested for real by tests/cluster/test_failover.py, with the same
timeouts as the compose file's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from shared.config.settings import Settings
from tests.support.auto_failover import KEEPER_SETTINGS, MONITOR_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
NODES = ("postgres", "postgres-2")


def load(path: str) -> Any:
    return yaml.safe_load((ROOT / path).read_text())


def test_every_settleq_service_reaches_whichever_node_takes_writes() -> None:
    base = load("docker/compose.yaml")["services"]
    overlay = load("docker/compose.ha.yaml")["services"]
    settleq = {name for name, service in base.items() if service.get("image") == "settleq:local"}
    for name in settleq:
        url = overlay[name]["environment"]["SETTLEQ_DATABASE_URL"]
        query = parse_qs(urlsplit(url).query)
        assert query["host"] == [f"{node}:5432" for node in NODES], name
        assert query["target_session_attrs"] == ["read-write"], name
        assert Settings(database_url=url).database_url == url


def test_the_formation_has_the_tested_timeouts() -> None:
    overlay = load("docker/compose.ha.yaml")["services"]
    monitor = " ".join(overlay["pg-monitor"]["command"])
    tuned = dict(re.findall(r"ALTER SYSTEM SET (\S+) = (\d+)", monitor))
    assert tuned == MONITOR_SETTINGS
    for node in NODES:
        command = " ".join(overlay[node]["command"])
        assert "--monitor postgres://autoctl_node@pg-monitor/" in command
        assert f"--hostname {node} --name {node}" in command
        for setting, value in KEEPER_SETTINGS.items():
            assert f"config set {setting} {value}" in command
    # A cut-off primary demotes itself before the monitor lets the standby take
    # writes (docs/operations.md#when-the-primary-is-gone).
    demotes = int(KEEPER_SETTINGS["timeout.network_partition_timeout"]) * 1000
    unhealthy = int(MONITOR_SETTINGS["pgautofailover.node_considered_unhealthy_timeout"])
    assert demotes < unhealthy + int(MONITOR_SETTINGS["pgautofailover.primary_demote_timeout"])


def test_the_kubernetes_example_keeps_a_synchronous_standby_and_follows_the_primary() -> None:
    cluster, deployment = load_all("deploy/kubernetes/settleq-cloudnative-pg.yaml")
    assert cluster["kind"] == "Cluster" and cluster["spec"]["instances"] >= 2
    assert cluster["spec"]["minSyncReplicas"] >= 1
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert list(env).index("DB_PASSWORD") < list(env).index("SETTLEQ_DATABASE_URL")
    url = env["SETTLEQ_DATABASE_URL"]["value"]
    assert urlsplit(url).hostname == f"{cluster['metadata']['name']}-rw"
    assert parse_qs(urlsplit(url).query)["target_session_attrs"] == ["read-write"]
    Settings(database_url=url.replace("$(DB_PASSWORD)", "secret"))


def load_all(path: str) -> list[Any]:
    return list(yaml.safe_load_all((ROOT / path).read_text()))
