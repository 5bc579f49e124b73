"""Concurrency (issue #28, item 4), embedded mode: readers on other threads see only
committed epochs while the session ingests, subscribers miss and repeat none, writers on
several threads take turns, and a second process is refused the state at once, told who
holds it (``views.concurrency``, ``ivm.storage.state_lock``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from concurrency_helpers import (
    CONSISTENT,
    DDL,
    ROWS,
    Checks,
    Loops,
    Readers,
    committed_epoch,
    epoch_batch,
    feed_contents,
)
from oracle.settings import shortened
from oracle.spark import SPARK_PARTITIONS

import ivm
from ivm.storage.state_lock import lock_path

EPOCHS = shortened(200)  # 100 in make test, 200 in the deep profile


def test_readers_on_other_threads_see_only_committed_epochs(tmp_path: Path) -> None:
    with ivm.connect(tmp_path / "state") as db:
        db.execute(DDL)
        db.ingest("t", epoch_batch(1))
        readers = Readers(db)
        readers.start()
        for epoch in range(2, EPOCHS + 1):
            if epoch % 20 == 0:  # every reader has read among these epochs, at least
                readers.wait_for_reads({n: len(s) for n, s in readers.seen.items()})
            db.ingest("t", epoch_batch(epoch))
        readers.check(EPOCHS)
        assert committed_epoch(db.sql(CONSISTENT).to_pylist()[0]) == EPOCHS == db.epoch


def test_subscribers_from_other_threads_miss_and_repeat_no_epoch() -> None:
    with ivm.connect() as db:
        db.execute(DDL)
        db.ingest("t", epoch_batch(1))
        feeds: list[list[tuple[int, pa.Table]]] = []
        errors: list[BaseException] = []
        done = threading.Event()

        def subscribe() -> None:
            try:
                while not done.is_set() and len(feeds) < 40:
                    feed: list[tuple[int, pa.Table]] = []
                    db.subscribe("by_k", lambda e, d, feed=feed: feed.append((e, d)))
                    feeds.append(feed)
                    time.sleep(0.005)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)

        thread = threading.Thread(target=subscribe, daemon=True)
        thread.start()
        for epoch in range(2, 81):
            db.ingest("t", epoch_batch(epoch))
        done.set()
        thread.join(timeout=60)
        assert not errors, errors[0]
        assert len(feeds) > 1
        final = Counter({(r["k"],): r["n"] for r in db.read("by_k").to_pylist()})
        for feed in feeds:
            epochs = [e for e, _ in feed]
            assert epochs == list(range(epochs[0], db.epoch + 1)), epochs  # each once, in turn
            contents: Counter[tuple[int, ...]] = Counter()
            for _, delta in feed:
                for row in delta.to_pylist():
                    contents[(row["k"],)] += row["n"] * row["__w"]
            assert +contents == final, epochs[0]  # snapshot + deltas = the contents


def test_writers_on_several_threads_take_turns() -> None:
    with ivm.connect() as db:
        db.execute("CREATE TABLE w (id BIGINT PRIMARY KEY, who VARCHAR);"
                   "CREATE VIEW per AS SELECT who, COUNT(*) AS n FROM w GROUP BY who")
        errors: list[BaseException] = []

        def write(who: str, first: int) -> None:
            try:
                for i in range(30):
                    db.ingest("w", [{"id": first + i, "who": who}])
                    db.explain("per", analyze=True)  # the connection's other users wait too
                    db.stats()
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=write, args=(w, 1000 * n))
                   for n, w in enumerate(("a", "b", "c"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors[0]
        assert db.epoch == 90
        assert sorted(db.read("per").to_pylist(), key=str) == [
            {"who": w, "n": 30} for w in ("a", "b", "c")]


CHILD = """
import json, sys
import ivm
options = json.loads(sys.argv[2])
if options.pop("spark", False):  # Spark mode: refused before anything touches Spark
    options["spark"] = object()
try:
    db = ivm.connect(sys.argv[1], **options)
except ivm.StateError as error:
    print(json.dumps({"error": type(error).__name__, "message": str(error)}))
else:
    print(json.dumps({"error": None}))
    if len(sys.argv) > 3:  # hold it until killed
        sys.stdout.flush()
        import time
        time.sleep(600)
"""


def second_process(state: Path, **options: Any) -> dict[str, Any]:
    """What a second process opening ``state`` is told."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(state), json.dumps(options)],
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_is_refused_at_once_naming_the_holder(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with ivm.connect(state) as db:
        db.execute(DDL)
        db.ingest("t", epoch_batch(1))
        told = second_process(state)
        assert told["error"] == "StateError", told
        message = told["message"]
        assert f"in use by process {os.getpid()} on this host" in message, message
        assert os.path.basename(sys.executable) in message  # the holder's command line
        assert db.epoch == 1 and db.read("totals").num_rows == 1  # the holder goes on
        db.ingest("t", epoch_batch(2))
    assert not lock_path(state / "ivm.duckdb").exists()  # a clean close leaves no lock
    assert second_process(state)["error"] is None  # free once closed


def test_a_killed_holder_leaves_the_state_free(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with ivm.connect(state) as db:
        db.execute(DDL)
        db.ingest("t", epoch_batch(1))
    holder = subprocess.Popen([sys.executable, "-c", CHILD, str(state), "{}", "hold"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert json.loads(holder.stdout.readline())["error"] is None  # it holds the state
        with pytest.raises(ivm.StateError, match=f"process {holder.pid} on"):
            ivm.connect(state)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    finally:
        holder.kill()
    with ivm.connect(state) as db:  # its lock died with it
        assert db.epoch == 1 and db.read("totals").to_pylist()[0]["total"] == ROWS
        assert json.loads(lock_path(state / "ivm.duckdb").read_text())["pid"] == os.getpid()
        assert socket.gethostname() in lock_path(state / "ivm.duckdb").read_text()


# -- Spark mode -------------------------------------------------------------------------------

SPARK_EPOCHS = 5


def waiting_read(db: ivm.Session, name: str, call: Callable[[], Any]) -> Any:
    """What ``db.read(name)`` on another thread gets when it waits for the session (held
    here) while ``call`` runs (a DDL dropping it, a close): Spark-mode reads take turns."""
    got: list[Any] = []

    def read() -> None:
        try:
            got.append(db.read(name))
        except ivm.IvmError as error:
            got.append(error)

    reader = threading.Thread(target=read)
    with db._lock:
        reader.start()
        time.sleep(0.3)  # it passed the checks made before its turn, and waits
        call()
    reader.join(timeout=60)
    return got[0]


def test_spark_readers_and_subscribers_see_committed_state(spark: Any, tmp_path: Path) -> None:
    """A Spark epoch's tasks write the partition files before the driver commits: reads
    wait for it, and see only committed epochs; subscriptions made on another thread hear
    every later epoch once; during a CREATE VIEW (filled on Spark) and a DROP VIEW reads see
    the view whole or not at all; reads racing ``close()`` end in ``StateError``."""
    with ivm.connect(tmp_path / "state", spark=spark, partitions=SPARK_PARTITIONS) as db:
        db.execute(DDL)
        db.ingest("t", epoch_batch(1))
        readers, checks = Readers(db), Checks(db)
        checks.SUBSCRIPTIONS = 8
        readers.start()
        subscribing = Loops({"subscribe": lambda: checks.subscribe("by_k")}).start()
        for epoch in range(2, SPARK_EPOCHS):
            readers.wait_for_reads({n: len(s) for n, s in readers.seen.items()})
            db.ingest("t", epoch_batch(epoch))
        readers.check(SPARK_EPOCHS - 1)
        subscribing.check()
        ddl = Loops({"sql": checks.sql, "table": checks.table, "extra": checks.extra}).start()
        db.execute("CREATE VIEW extra AS SELECT k, COUNT(*) AS n FROM t GROUP BY k")
        db.ingest("t", epoch_batch(SPARK_EPOCHS))
        ddl.wait_for("extra", "present")  # a read gets its turn between two calls
        dropped = waiting_read(db, "extra", lambda: db.execute("DROP VIEW extra"))
        outcomes = ddl.check()
        with pytest.warns(ivm.IvmWarning, match="dropped"):  # the subscriptions end
            db.execute("DROP VIEW by_k")
        closing = Loops({"table": checks.table, "totals": lambda: db.read("totals")},
                        ends=(ivm.StateError,))
        closing.start()
        closed = waiting_read(db, "totals", db.close)
    ended = closing.check()
    assert isinstance(dropped, ivm.SqlError) and "no table or view named" in str(dropped)
    assert isinstance(closed, ivm.StateError) and "closed" in str(closed)
    assert {"absent", "present"} <= set(outcomes["extra"]), Counter(outcomes["extra"])
    assert outcomes["sql"] == sorted(outcomes["sql"]) and outcomes["sql"][-1] == SPARK_EPOCHS
    assert all(isinstance(seen[-1], ivm.StateError) for seen in ended.values()), ended
    assert len(checks.feeds) > 1
    for subscription, feed in checks.feeds:
        epochs = [e for e, _ in feed]
        assert epochs == list(range(epochs[0], SPARK_EPOCHS + 1)), epochs  # each once
        assert feed_contents(feed) == Counter({(SPARK_EPOCHS, ROWS): 1})
        assert subscription.ended == "the view was dropped"


def test_a_second_process_is_refused_spark_held_state(spark: Any, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with ivm.connect(state, spark=spark, partitions=SPARK_PARTITIONS) as db:
        db.execute(DDL)
        db.ingest("t", epoch_batch(1))
        for options in ({}, {"spark": True}):
            told = second_process(state, **options)
            assert told["error"] == "StateError", told
            assert f"in use by process {os.getpid()} on this host" in told["message"]
        assert db.read("totals").to_pylist() == [{"n": ROWS, "total": ROWS, "squares": ROWS}]
