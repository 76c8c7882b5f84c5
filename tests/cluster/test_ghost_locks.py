"""No lock held by a ghost (docs/operations.md#ghost-locks): a worker host cut
off the network in the middle of a transaction that holds the booking lock
and a lineage lock loses them within 30 s, so another host settling that
lineage goes on, and does not wait for the cable to come back.

The ghost is settleq's own engine (``make_engine``: its keepalives, on both
ends) in a worker-host namespace, its transaction open and silent, as a
worker's between two statements of a unit. Before settleq asked for
keepalives, the server kept such a session, and its locks, for the kernel's
two hours.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from sqlalchemy import text

from shared.adapters.db.engine import make_engine
from shared.adapters.db.ledger import priors
from shared.adapters.db.periods import booking
from tests.support.netns import Topology
from tests.support.service_host import ServiceHost
from tests.support.stack import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

RELEASED_WITHIN_S = 30
# A worker mid-unit: the booking lock shared, a lineage locked, then silence.
GHOST = """
import sys, time
from shared.adapters.db.engine import make_engine
from shared.adapters.db.ledger import priors
from shared.adapters.db.periods import booking
with make_engine(sys.argv[1], component="ghost").begin() as conn:
    booking.share(conn)
    priors.lock_lineage_ids(conn, [int(sys.argv[2])])
    print("held", flush=True)
    time.sleep(3600)
"""


def test_a_host_cut_off_mid_transaction_releases_its_locks_within_30_s(
    cluster_topology: Topology, cluster_services: ServiceHost
) -> None:
    [lock] = priors.lock_ids("promo_accrual", {f"V-GHOST|{time.time_ns()}"})
    host = cluster_topology.hosts[0]
    ghost = cluster_topology.run_in(
        host,
        [sys.executable, "-c", GHOST, cluster_services.database_url, str(lock)],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        log_name="ghost",
    )
    engine = make_engine(cluster_services.database_url, component="other-host")
    try:
        assert ghost.stdout is not None
        assert ghost.stdout.readline().strip() == b"held", "the ghost did not take its locks"
        cut_at = time.monotonic()
        cluster_topology.cut(host)
        with engine.begin() as conn:
            # The other host's unit of the same lineage waits on the ghost's lock;
            # past the limit (and a margin), a lock_timeout error fails the test.
            conn.execute(text(f"SET LOCAL lock_timeout = '{RELEASED_WITHIN_S + 15}s'"))
            priors.lock_lineage_ids(conn, [lock])
            took = time.monotonic() - cut_at
            # And the booking lock, which a close takes alone: asked of the lock
            # itself, not of pg_stat_activity, where the ghost's backend may still
            # be on its way out once its transaction has ended (ci-like saw it).
            booking.cut(conn)
        print(f"\nthe lineage lock was free {took:.1f} s after the cut")
        assert took < RELEASED_WITHIN_S, took
    finally:
        cluster_topology.restore(host)
        ghost.kill()
        ghost.wait(timeout=30)
        engine.dispose()
