"""docker/compose.cluster.yaml: three RabbitMQ nodes and quorum queues over the
one-host stack, checked structurally (no Docker engine here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from shared.adapters.rabbitmq.broker import broker_urls
from shared.config.settings import Settings

DOCKER = Path(__file__).resolve().parents[2] / "docker"
NODES = ("rabbitmq", "rabbitmq-2", "rabbitmq-3")


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DOCKER / name).read_text())
    return loaded


def test_the_overlay_gives_every_settleq_service_the_node_list_and_quorum_queues() -> None:
    base, overlay = load("compose.yaml")["services"], load("compose.cluster.yaml")["services"]
    settleq = {name for name, service in base.items() if service.get("image") == "settleq:local"}
    assert settleq == {"migrate", "api", "worker-fast", "worker-heavy", "relay", "webhooks"}
    for name in settleq:
        environment = overlay[name]["environment"]
        assert environment["SETTLEQ_QUEUE_TYPE"] == "quorum"
        hosts = [
            re.search(r"@([^:/]+)", url).group(1)
            for url in broker_urls(environment["SETTLEQ_BROKER_URL"])
        ]  # type: ignore[union-attr]
        assert hosts == list(NODES)
        settings = Settings(
            **{k.removeprefix("SETTLEQ_").lower(): v for k, v in environment.items()}
        )
        assert settings.queue_type == "quorum"


def test_three_named_nodes_share_a_cookie_and_list_one_another() -> None:
    overlay = load("compose.cluster.yaml")["services"]
    config = (DOCKER / "rabbitmq" / "cluster.conf").read_text()
    peers = re.findall(
        r"^cluster_formation\.classic_config\.nodes\.\d+ = rabbit@(\S+)$", config, re.M
    )
    assert peers == list(NODES)
    cookies = set()
    for name in NODES:
        node = overlay[name]
        assert node["hostname"] == name  # the node is rabbit@<hostname>
        assert "./rabbitmq/cluster.conf:/etc/rabbitmq/conf.d/20-cluster.conf:ro" in node["volumes"]
        cookies.add(node["environment"]["RABBITMQ_ERLANG_COOKIE"])
        assert node["restart"] == "unless-stopped" and node["healthcheck"]["test"]
    assert len(cookies) == 1


def test_worker_tiers_run_their_replicas() -> None:
    base = load("compose.yaml")["services"]
    assert base["worker-fast"]["deploy"]["replicas"] == Settings().fast_path_processes
    assert base["worker-heavy"]["deploy"]["replicas"] == Settings().compute_heavy_processes
