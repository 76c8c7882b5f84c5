"""Fixtures of the cluster tests: a network of namespaces (a services host and
worker hosts) and, on the services host, a three-node RabbitMQ cluster, a Redis
and a PostgreSQL of the run's own. Session-scoped: the cluster takes ~25 s to
form, and each test leaves it as it found it (a host it cut off is restored).

They need root and iproute2; without them the tests fail, saying so (a skip
would let a run pass that tested nothing).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.netns import Topology, requirements_missing, sweep
from tests.support.service_host import ServiceHost, service_host

WORKER_HOSTS = 3  # the third joins mid-batch in test_faults


@pytest.fixture(scope="session")
def cluster_topology(request: pytest.FixtureRequest) -> Iterator[Topology]:
    """A bridge, ``services`` and ``hosts[0..2]`` namespaces (tests/support/netns.py)."""
    missing = requirements_missing()
    if missing:
        pytest.fail(missing, pytrace=False)
    sweep()  # what a run killed outright (SIGKILL, a lost machine) left behind
    topology = Topology(hosts=WORKER_HOSTS)
    # Besides the context manager: a finalizer runs even when setup fails part way.
    request.addfinalizer(topology.teardown)
    with topology:
        yield topology


@pytest.fixture(scope="session")
def cluster_services(cluster_topology: Topology) -> Iterator[ServiceHost]:
    """RabbitMQ x3, Redis and PostgreSQL in the services namespace, and their URLs."""
    with service_host(cluster_topology) as services:
        yield services
