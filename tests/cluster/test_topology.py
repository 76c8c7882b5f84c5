"""Smoke test of the cluster harness: from a worker host's namespace, over its
veth and the bridge, each RabbitMQ node takes and hands back a message on a
quorum queue, Redis answers PING and PostgreSQL SELECT 1; a host cut off the
network fails to reach them within seconds and reaches them again once restored;
and the three RabbitMQ nodes run as one cluster.

The probes run as ``ip netns exec <host> python -c ...``: a process inside the
host's namespace, as a settleq worker on that host would be.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from tests.support.netns import Namespace, Topology
from tests.support.service_host import ServiceHost

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

# argv: pairs of (amqp|redis|postgres, URL). Short timeouts everywhere: a host
# that is cut off must fail in seconds, not after the kernel's TCP retries.
PROBE = """
import sys, uuid

def amqp(url):
    import pika
    params = pika.URLParameters(url)
    params.connection_attempts, params.socket_timeout = 1, 3
    params.blocked_connection_timeout, params.stack_timeout = 5, 5
    connection = pika.BlockingConnection(params)
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        queue = "settleq.cluster-probe." + uuid.uuid4().hex[:12]
        channel.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
        body = uuid.uuid4().hex.encode()
        channel.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2))
        got = None
        for _ in range(50):
            method, _props, got = channel.basic_get(queue)
            if method is not None:
                channel.basic_ack(method.delivery_tag)
                break
            connection.sleep(0.1)
        channel.queue_delete(queue)
        assert got == body, f"{url}: published {body!r}, got {got!r}"
    finally:
        connection.close()

def redis_(url):
    import redis
    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        assert client.ping() is True
    finally:
        client.close()

def postgres(url):
    import psycopg
    with psycopg.connect(url, connect_timeout=3) as connection:
        assert connection.execute("SELECT 1").fetchone() == (1,)

args = sys.argv[1:]
for kind, url in zip(args[::2], args[1::2]):
    {"amqp": amqp, "redis": redis_, "postgres": postgres}[kind](url)
    print(kind, "ok", url, flush=True)
"""


def probe(
    topology: Topology, host: Namespace, *targets: tuple[str, str]
) -> tuple[bool, float, str]:
    """Run the probe in ``host``: (it passed, seconds it took, its output)."""
    argv = [sys.executable, "-c", PROBE, *(part for target in targets for part in target)]
    started = time.monotonic()
    done = topology.run(host, argv, timeout=60)
    return done.returncode == 0, time.monotonic() - started, done.stdout + done.stderr


def every_service(services: ServiceHost) -> list[tuple[str, str]]:
    return [
        *(("amqp", url) for url in services.broker_urls),
        ("redis", services.redis_url),
        ("postgres", services.database_url),
    ]


def test_each_host_reaches_every_service(
    cluster_topology: Topology, cluster_services: ServiceHost
) -> None:
    assert len(cluster_services.broker_urls) == 3
    for url in cluster_services.broker_urls:
        assert f"@{cluster_services.address}:" in url  # the services namespace's, not 127.0.0.1
    for host in cluster_topology.hosts:
        ok, _seconds, output = probe(cluster_topology, host, *every_service(cluster_services))
        assert ok, f"{host.name}: {output}"
        assert output.count(" ok ") == 5, output


def test_a_host_cut_off_fails_fast_and_recovers(
    cluster_topology: Topology, cluster_services: ServiceHost
) -> None:
    host, other = cluster_topology.hosts[0], cluster_topology.hosts[1]
    targets = every_service(cluster_services)
    cluster_topology.cut(host)
    try:
        for target in [("redis", cluster_services.redis_url), targets[0], targets[-1]]:
            ok, seconds, output = probe(cluster_topology, host, target)
            assert not ok, f"{host.name} reached {target} while cut off: {output}"
            assert seconds < 10, f"{target}: failed only after {seconds:.1f} s"
        # The cut is this host's alone.
        ok, _seconds, output = probe(cluster_topology, other, *targets)
        assert ok, f"{other.name}, not cut off: {output}"
    finally:
        cluster_topology.restore(host)
    deadline = time.monotonic() + 20
    while True:
        ok, _seconds, output = probe(cluster_topology, host, *targets)
        if ok or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert ok, f"{host.name} restored but still cannot reach the services: {output}"


def test_three_nodes_run_as_one_cluster(cluster_services: ServiceHost) -> None:
    status = json.loads(
        cluster_services.rabbitmqctl(1, "-q", "cluster_status", "--formatter", "json")
    )
    assert sorted(status["running_nodes"]) == sorted(cluster_services.node_names)
    assert sorted(status["disk_nodes"]) == sorted(cluster_services.node_names)
    assert not status.get("partitions"), status["partitions"]
