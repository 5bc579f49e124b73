"""Spark Structured Streaming into ivm (issue #27, item 5): ``foreachBatch(db.sink(...))``
applies each batch id exactly once, across a query killed mid-stream and restarted from
its checkpoint, and across the ivm session itself reopened."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import ivm

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
from streaming_debezium import DDL, FILES, order, write_events  # noqa: E402

VIEW_SQL = "SELECT customer, SUM(amount) AS total, COUNT(*) AS n FROM orders GROUP BY customer"

MORE = [
    [{"op": "c", "after": order(4, "cy", 1)}, {"op": "c", "after": order(5, "ada", 2)}],
    [{"op": "u", "before": order(4, "cy", 1), "after": order(4, "bob", 3)}],
]
"""Two more files: five micro-batches in all."""


def rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


class Crash(RuntimeError):
    """The sink's process dies: before or after the batch's epoch committed."""


def crashing(sink: Any, batch: int, after: bool, calls: list[int]) -> Any:
    """``sink``, but micro-batch ``batch`` dies before it is applied, or after."""

    def run(frame: Any, batch_id: int) -> None:
        calls.append(batch_id)
        if batch_id == batch and not after:
            raise Crash(f"killed before batch {batch_id}")
        sink(frame, batch_id)
        if batch_id == batch and after:
            raise Crash(f"killed after batch {batch_id}")

    return run


def run_query(spark: Any, sink: Any, events: Path, checkpoint: Path) -> None:
    """Run the query over every file there is (one file per micro-batch) and wait."""
    query = (
        spark.readStream.schema("op STRING, before STRUCT<id: BIGINT, customer: STRING, "
                                "amount: BIGINT>, after STRUCT<id: BIGINT, customer: STRING, "
                                "amount: BIGINT>")
        .option("maxFilesPerTrigger", 1).json(str(events))
        .writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination()


def exact(db: Any) -> None:
    """The view equals its recomputation over the table."""
    assert rows(db.read("revenue")) == rows(db.sql(VIEW_SQL))


@pytest.mark.parametrize("mode", ["embedded", "spark"])
def test_a_killed_query_restarts_exactly_once(spark: Any, tmp_path: Path, mode: str) -> None:
    options = {"spark": spark, "partitions": 2} if mode == "spark" else {}
    events, checkpoint, state = tmp_path / "events", tmp_path / "ckpt", tmp_path / "state"
    for number, batch in enumerate(FILES + MORE):
        write_events(events, number, batch)
    db = ivm.connect(state, **options)
    db.execute(DDL)
    calls: list[int] = []
    # Killed after batch 1 committed in ivm, before Spark recorded it done: Spark runs
    # batch 1 again at restart, and the sink skips it.
    with pytest.raises(Exception, match="killed after batch 1"):
        run_query(spark, crashing(db.sink("orders"), 1, True, calls), events, checkpoint)
    assert (db.epoch, db.sink("orders").last_batch()) == (2, 1)
    db.close()  # the whole job dies: the session is opened again
    db = ivm.connect(state, **options)
    # Killed before batch 3 is applied: it runs again at restart, and is applied then.
    with pytest.raises(Exception, match="killed before batch 3"):
        run_query(spark, crashing(db.sink("orders"), 3, False, calls), events, checkpoint)
    run_query(spark, crashing(db.sink("orders"), -1, False, calls), events, checkpoint)
    assert calls == [0, 1, 1, 2, 3, 3, 4]
    assert db.epoch == 5  # one epoch per micro-batch, each exactly once
    assert rows(db.read("orders")) == [(1, "ada", 12), (3, "bob", 7), (4, "bob", 3),
                                       (5, "ada", 2)]
    exact(db)
    db.close()


@pytest.mark.parametrize("mode", ["embedded", "spark"])
def test_one_stream_feeds_several_tables(spark: Any, tmp_path: Path, mode: str) -> None:
    options = {"spark": spark, "partitions": 2} if mode == "spark" else {}
    db = ivm.connect(tmp_path / "s", **options)
    join = "SELECT a.id, a.v + b.v AS s FROM a JOIN b USING (id)"
    db.execute(f"""
        CREATE TABLE a (id BIGINT, v BIGINT);
        CREATE TABLE b (id BIGINT, v BIGINT);
        CREATE VIEW j AS {join};
    """)
    sink = db.sink({"a": lambda f: f.where("t = 'a'").drop("t"),
                    "b": lambda f: f.where("t = 'b'").drop("t")}, name="ab")
    schema = "t string, id long, v long"
    frame = spark.createDataFrame([("a", 1, 10), ("b", 1, 5), ("b", 2, 7)], schema)
    sink(frame, 0)  # foreachBatch's call: the micro-batch and its id
    sink(frame, 0)  # a repeat: skipped
    assert db.epoch == 1 and rows(db.read("j")) == [(1, 15)]
    sink(spark.createDataFrame([("a", 2, 1), ("a", 1, 20)], schema), 1)  # one table only
    assert db.epoch == 2 and rows(db.read("a")) == [(1, 10), (1, 20), (2, 1)]
    assert rows(db.read("j")) == rows(db.sql(join)) == [(1, 15), (1, 25), (2, 8)]
    assert sink.last_batch() == 1 and db.sink({"a": None}).last_batch() == -1
    db.close()


def test_a_sink_is_refused_what_it_cannot_apply() -> None:
    db = ivm.connect()
    db.execute(DDL)
    with pytest.raises(ivm.SchemaError, match="'revenue' is a view"):
        db.sink("revenue")
    with pytest.raises(ivm.IvmError, match="function of the micro-batch"):
        db.sink({"orders": "id > 1"})
    with pytest.raises(ivm.IvmError, match="unknown ingest mode"):
        db.sink("orders", mode="merge")


def test_the_example_runs(spark: Any, tmp_path: Path) -> None:
    from streaming_debezium import run

    run(spark, tmp_path).close()


def recomputed(events: list[list[dict]]) -> tuple[list[tuple], list[tuple]]:
    """The orders and the view that every event of every file gives, applied once each
    in order (the table in Python, the view by DuckDB over it)."""
    live: dict[int, dict] = {}
    for event in (e for batch in events for e in batch):
        if event["op"] in ("u", "d"):
            del live[event["before"]["id"]]
        if event["op"] in ("c", "u"):
            live[event["after"]["id"]] = event["after"]
    orders = pa.Table.from_pylist(list(live.values()))  # noqa: F841 - DuckDB reads it
    return (sorted(tuple(o.values()) for o in live.values()),
            rows(duckdb.sql(VIEW_SQL).to_arrow_table()))


@pytest.mark.deep
@pytest.mark.parametrize(("point", "at"), [("commit.before", 3), ("commit.after", 2)])
def test_a_query_killed_mid_stream_restarts_exactly_once(spark: Any, tmp_path: Path,
                                                         point: str, at: int) -> None:
    """A Spark-mode streaming job in a process of its own, SIGKILLed mid-stream (inside the
    epoch of a micro-batch, before its COMMIT or just after it, Spark not told), then run
    again on the same checkpoint and state: every file applied exactly once."""
    for number, batch in enumerate(FILES + MORE):
        write_events(tmp_path / "events", number, batch)
    child = [sys.executable, str(Path(__file__).with_name("stream_child.py")), str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLES), *sys.path])}
    killed = subprocess.Popen([*child, point, str(at)], env=env, start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = killed.communicate(timeout=900)[0]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(killed.pid, signal.SIGKILL)  # its JVM too: the whole job dies
    assert killed.returncode == -signal.SIGKILL, output
    killed_run = (tmp_path / "progress").read_text().splitlines()
    applied = [line for line in killed_run if line.startswith("applied")]
    assert 1 <= len(applied) < len(FILES + MORE), killed_run  # killed mid-stream
    done = subprocess.run(child, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    # Spark runs the batch it was killed in again: applied then if its epoch had not
    # committed, skipped (its epoch there already) if it had.
    rerun, n = (tmp_path / "progress").read_text().splitlines()[len(killed_run):], len(applied)
    before = n if point == "commit.before" else n + 1
    assert rerun[:2] == [f"start {n} {before}", f"applied {n} {n + 1}"], rerun
    orders, view = recomputed(FILES + MORE)
    with ivm.connect(tmp_path / "state", spark=spark, partitions=2) as db:
        assert db.epoch == len(FILES + MORE)  # one epoch per file, each exactly once
        assert db.sink("orders").last_batch() == len(FILES + MORE) - 1
        assert rows(db.read("orders")) == orders
        assert rows(db.read("revenue")) == view == rows(db.sql(VIEW_SQL))
