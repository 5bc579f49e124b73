"""Spark mode on a real standalone cluster (``ivm.views.spark.local_cluster``): a master
and two workers, each its own JVM, state on this machine's disk; a worker is killed
in the middle of an epoch, and the epoch still applies exactly once.

A process holds one SparkContext, and the test session's is ``local``: the test starts
the cluster and runs this file as a script against it (the ``scenario``), which checks
every epoch against the oracle and says which worker it killed.

Four JVMs and a cluster's start cost about two minutes of the 2-core machine, so the test
is in the deep profile (``make test-deep``); ``make test`` keeps exactly-once under
failed and retried tasks on local Spark (``test_spark_mode.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
PARTITIONS = 4
ORDERS = "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DECIMAL(12,2))"
CUSTOMERS = "CREATE TABLE customers (name VARCHAR PRIMARY KEY, region VARCHAR)"
VIEWS = {
    "revenue": "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n "
               "FROM orders o JOIN customers c ON o.customer = c.name GROUP BY c.region",
    "big_orders": "SELECT id, customer, amount FROM orders WHERE amount > 50",
    "busy": "SELECT region FROM revenue WHERE n > 30",
}
PAUSE = 300.0  # seconds a paused task sleeps: longer than the test waits
NAMES = [f"c{i}" for i in range(12)]


def order(i: int) -> tuple:
    return (i, NAMES[i % len(NAMES)], Decimal(i * 37 % 100))


SCRIPT = [
    {"customers": [("insert", (n, f"r{i % 3}")) for i, n in enumerate(NAMES)],
     "orders": [("insert", order(i)) for i in range(200)]},
    # The epoch a worker dies in: deletes, updates and inserts of both tables.
    {"orders": [("delete", order(i)) for i in range(0, 60, 3)]
     + [("update", order(i), (i, NAMES[(i + 5) % 12], Decimal(99))) for i in range(1, 60, 3)]
     + [("insert", order(i)) for i in range(200, 260)],
     "customers": [("update", ("c1", "r1"), ("c1", "r2"))]},
    {"orders": [("insert", order(i)) for i in range(260, 300)]},
]


def scenario(master: str, root: Path) -> None:
    """Run SCRIPT on the cluster at ``master``, every epoch checked by the oracle. In the
    second epoch, a task of the join's stage pauses once it has written its partitions
    (by then the tables' stages have run, their outputs spread over both workers),
    naming its process in ``<root>/markers/paused``: the test kills its worker."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from oracle.harness import Epoch, Harness
    from pyspark.sql import SparkSession

    import ivm
    from ivm.execution.spark.tasks import FailurePoint

    fast_jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    spark = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executor.memory", "1g")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.driver.extraJavaOptions", fast_jvm)
        .config("spark.executor.extraJavaOptions", fast_jvm)
        .config("spark.python.unix.domain.socket.enabled", "true")
        .getOrCreate()
    )
    connect = lambda: ivm.connect(root / "state", spark=spark, partitions=PARTITIONS)  # noqa: E731
    harness = Harness([ORDERS, CUSTOMERS], connect=connect)
    harness.create_views(VIEWS)
    harness.apply(Epoch.of(SCRIPT[0], fmt="weighted"))
    harness.db._failure = FailurePoint(stage="-revenue/", attempts=None,
                                      marker=str(root / "markers"), pause=PAUSE)
    harness.apply(Epoch.of(SCRIPT[1], fmt="debezium"))
    harness.db._failure = None
    harness.apply(Epoch.of(SCRIPT[2]))
    harness.reopen()  # every relation checked again from the partition files
    harness.close()
    spark.stop()


@pytest.mark.deep
def test_a_killed_worker_mid_epoch_applies_the_epoch_exactly_once(tmp_path: Path) -> None:
    from ivm.views.spark.local_cluster import LocalCluster

    (tmp_path / "markers").mkdir()
    paused = tmp_path / "markers" / "paused"
    # The project's root before tests/ (see conftest.py), for the oracle's imports.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    log = tmp_path / "scenario.log"  # a file: a pipe nobody reads while we wait could fill
    with LocalCluster(tmp_path / "cluster", workers=2, cores=1, memory="1536m") as cluster, \
            log.open("w") as output:
        run = subprocess.Popen([sys.executable, __file__, cluster.master_url, str(tmp_path)],
                               env=env, stdout=output, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 400
            while not (paused.exists() and paused.read_text()):
                if run.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"no task paused; the scenario said:\n{log.read_text()[-6000:]}")
                time.sleep(0.1)
            killed = cluster.worker_running(int(paused.read_text()))
            assert killed is not None, "the paused task runs on no worker of the cluster"
            cluster.kill_worker(killed)
            run.wait(timeout=400)
        finally:
            run.kill()
        assert run.returncode == 0, log.read_text()[-6000:]
        assert not cluster.alive(killed) and cluster.alive(1 - killed)

if __name__ == "__main__":
    scenario(sys.argv[1], Path(sys.argv[2]))
