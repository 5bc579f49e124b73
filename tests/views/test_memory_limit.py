"""Bounded memory (issue #28, item 2), embedded mode: a session's ``memory_limit`` holds
DuckDB and the state ivm keeps in memory; an epoch that would pass it fails with
``ivm.ResourceError`` naming the table or view, changes nothing, and the next epoch is
exact (``views.resources``, ``ivm.storage.memory``, ``ivm.execution.bounded_arrangements``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from bad_input.unchanged import assert_unchanged, assert_views_recompute, capture
from oracle.harness import Epoch, Harness
from oracle.spark import SPARK_PARTITIONS

import ivm
from ivm.storage.memory import default_limit

TABLE = "CREATE TABLE t (id BIGINT PRIMARY KEY, g INTEGER, s VARCHAR)"


def loaded(views: dict[str, str], rows: int = 2000, groups: int = 1000, pad: str = "") -> Harness:
    """A harness (ivm beside a DuckDB oracle) with ``rows`` rows in ``groups`` groups."""
    harness = Harness(TABLE)
    ops = [("insert", (i, i % groups, f"v{i}{pad}")) for i in range(rows)]
    harness.apply(Epoch.of({"t": ops}))
    harness.create_views(views)
    return harness


def batch(first: int, rows: int, group: int | None = None, text: str = "x") -> pa.Table:
    """Rows ``first``… of ``t``: each in its own group, or all in ``group``."""
    ids = np.arange(first, first + rows)
    groups = np.full(rows, group, np.int32) if group is not None else (ids % 7).astype(np.int32)
    return pa.table({"id": ids, "g": groups, "s": [text] * rows})


def then_exact(harness: Harness, first: int) -> None:
    """With the limit back up, a normal epoch applies, exactly (against the oracle)."""
    harness.db.memory_limit = "1GB"
    harness.apply(Epoch.of({"t": [("insert", (first, 3, "after")),
                                  ("update", (5, 5, "v5"), (5, 6, "moved")),
                                  ("delete", (7, 7, "v7"))]}))


def test_the_limit_is_duckdbs_and_settable(tmp_path: Path) -> None:
    with ivm.connect(tmp_path / "state", memory_limit="64MiB") as db:
        assert db.memory_limit == 64 * 1024**2
        setting = "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
        limit, spill = db._con.sql(setting).fetchall()[0]
        assert limit == "64.0 MiB"  # nothing held yet: all of it
        assert spill == str((tmp_path / "state" / "ivm.duckdb.tmp").resolve())  # can spill
        db.memory_limit = "1GiB"
        assert db._con.sql(setting).fetchall()[0][0] == "1.0 GiB"
        with pytest.raises(ivm.IvmError, match="memory_limit"):
            db.memory_limit = "lots"
    with ivm.connect() as db:  # the default: half of the machine's memory
        assert db.memory_limit == default_limit()
        spill = db._con.sql("SELECT current_setting('temp_directory')").fetchall()[0][0]
        assert "ivm-spill-" in spill  # its own directory, not the working one's .tmp
    with pytest.raises(ivm.IvmError, match="memory_limit"):
        ivm.connect(memory_limit=0)


def test_a_batch_too_large_for_the_limit_is_refused_and_changes_nothing() -> None:
    harness = loaded({"per_group": "SELECT g, COUNT(*) AS n FROM t GROUP BY g"})
    db = harness.db
    try:
        before = capture(db)
        db.memory_limit = "16MB"
        with pytest.raises(ivm.ResourceError) as raised:
            db.ingest("t", batch(10_000, 400_000))
        text = str(raised.value)
        assert "table 't'" in text and "400,000 rows" in text
        assert "memory limit of 16.0 MB" in text and "nothing was applied" in text
        db.memory_limit = "1GB"
        assert_unchanged(db, before)
        then_exact(harness, 10_000)
    finally:
        harness.close()


def test_a_view_whose_change_would_not_fit_is_refused_and_changes_nothing() -> None:
    harness = loaded({"pairs": "SELECT a.id AS x, b.id AS y FROM t a JOIN t b ON a.g = b.g",
                      "per_group": "SELECT g, COUNT(*) AS n FROM t GROUP BY g"})
    db = harness.db
    try:
        before = capture(db)
        db.memory_limit = "24MB"
        with pytest.raises(ivm.ResourceError) as raised:  # 1,300² pairs: 27 MB as Arrow
            db.ingest("t", batch(10_000, 1300, group=5000))
        text = str(raised.value)
        assert "view 'pairs': its change in this epoch (1,690,000 rows)" in text
        assert "memory limit of 24.0 MB" in text
        db.memory_limit = "1GB"
        assert_unchanged(db, before)
        then_exact(harness, 20_000)
    finally:
        harness.close()


def test_duckdb_running_out_of_memory_is_a_resource_error_naming_the_view() -> None:
    harness = loaded({"texts": "SELECT g, string_agg(s, ',' ORDER BY s) AS all_s, "
                               "COUNT(*) AS n FROM t GROUP BY g"})
    db = harness.db
    try:
        before = capture(db)
        db.memory_limit = "4MB"  # one group's string_agg of 600 kB needs more than DuckDB gets
        with pytest.raises(ivm.ResourceError) as raised:
            db.ingest("t", batch(10_000, 3000, group=7, text="z" * 200))
        text = str(raised.value)
        assert "view 'texts' ran out of memory computing its change" in text
        assert "DuckDB: " in text and "memory limit of 4.0 MB" in text  # DuckDB's own words
        assert "SELECT" not in text and "Possible solutions" not in text  # the user's terms
        db.memory_limit = "1GB"
        assert_unchanged(db, before)
        then_exact(harness, 20_000)
    finally:
        harness.close()


TEXTS = "CREATE VIEW texts AS SELECT g, string_agg(s, ',' ORDER BY s) AS all_s FROM t GROUP BY g"


def test_a_new_view_that_runs_out_of_memory_filling_is_refused() -> None:
    harness = loaded({})
    db = harness.db
    try:
        db.ingest("t", batch(10_000, 3000, group=7, text="z" * 200))
        before = capture(db)
        db.memory_limit = "4MB"
        with pytest.raises(ivm.ResourceError) as raised:
            db.execute(TEXTS)
        assert "view 'texts' ran out of memory filling it" in str(raised.value)
        db.memory_limit = "1GB"
        assert_unchanged(db, before)
        db.execute(TEXTS)
        assert_views_recompute(db)
    finally:
        harness.close()


PAD = "-" * 100
PAIRS = "CREATE VIEW pairs AS SELECT a.id AS x, b.s FROM t a JOIN t b ON a.g = b.g WHERE a.id < 100"
"""Its changes read t by g, every column: 50,000 rows of 150 bytes or so arranged."""


def padded() -> ivm.Session:
    """A session whose ``t`` holds 50,000 rows in 2,000 groups, 100-odd characters each."""
    db = ivm.connect()
    db.execute(TABLE)
    ids = np.arange(50_000)
    db.ingest("t", pa.table({"id": ids, "g": (ids % 2000).astype(np.int32),
                             "s": [f"v{i}{PAD}" for i in ids]}))
    return db


def small_epochs(db: ivm.Session, first: int, count: int) -> None:
    """``count`` epochs touching a few groups each (each view then checked against DuckDB
    recomputing it, with room to read whole tables)."""
    for e in range(count):
        base, gone = first + 10 * e, first // 10_000 + e  # a row loaded by padded()
        db.ingest("t", {"id": [base, base + 1, gone], "g": [e % 50, 3, gone % 2000],
                        "s": [f"n{base}", f"n{base + 1}", f"v{gone}{PAD}"], "__w": [1, 1, -1]})
    limit, db.memory_limit = db.memory_limit, "1GB"
    assert_views_recompute(db)
    db.memory_limit = limit


def test_an_arrangement_over_the_budget_is_not_built_and_reads_go_to_the_table() -> None:
    with padded() as db:
        db.memory_limit = "12MB"  # the row index holds 1.2 MB; t by g would hold 7.5 MB more
        db.execute(PAIRS)
        small_epochs(db, 100_000, 3)
        assert db._arrangements.nbytes() == 0  # it does not fit the state's 6 MB
        assert db.stats()["pairs"].memory_bytes == 0
        db.memory_limit = "1GB"
        small_epochs(db, 200_000, 2)  # room now: built, and as exact
        assert db.stats()["pairs"].memory_bytes > 0


def test_an_arrangement_held_is_dropped_when_the_limit_falls_below_it() -> None:
    with padded() as db:
        db.execute(PAIRS)
        small_epochs(db, 100_000, 2)
        assert db.stats()["pairs"].memory_bytes > 0
        db.memory_limit = "12MB"
        small_epochs(db, 200_000, 3)  # dropped at its next read, and still exact
        assert db._arrangements.nbytes() == 0


def test_a_streamed_load_is_cut_in_chunks_the_limit_holds() -> None:
    harness = loaded({"per_group": "SELECT g, COUNT(*) AS n, MAX(s) AS top FROM t GROUP BY g"})
    db = harness.db
    try:
        db.memory_limit = "16MB"  # 300,000 rows at once would need 18 MB
        rows = batch(10_000, 300_000)
        reader = pa.RecordBatchReader.from_batches(rows.schema, rows.to_batches())
        db.ingest("t", reader)
        assert db.epoch == 2  # one epoch
        db.memory_limit = "1GB"
        assert_views_recompute(db)
        assert db.sql("SELECT COUNT(*) AS n FROM t").column("n")[0].as_py() == 302_000
    finally:
        harness.close()


# -- Spark mode -------------------------------------------------------------------------------


def test_a_partition_task_out_of_memory_is_a_resource_error_and_applies_nothing(
    spark: Any, tmp_path: Path
) -> None:
    """Each partition task's DuckDB gets the session's limit; a task that runs out fails
    the epoch on the driver as a ResourceError naming the view, every partition is rolled
    back, and the next epoch is exact."""
    connect = lambda: ivm.connect(  # noqa: E731
        tmp_path / "state", spark=spark, partitions=SPARK_PARTITIONS)
    harness = Harness(TABLE, connect=connect)
    try:
        harness.apply(Epoch.of({"t": [("insert", (i, i % 100, f"v{i}")) for i in range(500)]}))
        harness.create_views({"texts": TEXTS.split(" AS ", 1)[1]})
        db = harness.db
        before = capture(db)
        db.memory_limit = "4MB"
        with pytest.raises(ivm.ResourceError) as raised:
            db.ingest("t", batch(10_000, 3000, group=7, text="z" * 200))
        text = str(raised.value)
        assert "view 'texts' ran out of memory in a partition's task" in text, text
        assert "memory limit of 4.0 MB" in text and "DuckDB: " in text
        db.memory_limit = "1GB"
        assert_unchanged(db, before)
        then_exact(harness, 20_000)
    finally:
        harness.close()


def test_changes_collected_on_the_spark_driver_are_held_to_the_limit(
    spark: Any, tmp_path: Path
) -> None:
    # Two 1,000-row batches whose join is 1M rows: the tasks make the change in their
    # own memory, and the driver refuses to keep it before committing anything. It weighs
    # the change as it arrives, so it stops reading before the whole of it is there.
    with ivm.connect(tmp_path / "s", spark=spark, partitions=SPARK_PARTITIONS) as db:
        db.execute("CREATE TABLE a (id BIGINT PRIMARY KEY, k BIGINT); "
                   "CREATE TABLE b (id BIGINT PRIMARY KEY, k BIGINT); "
                   "CREATE VIEW pairs AS SELECT a.id AS x, b.id AS y FROM a JOIN b ON a.k = b.k")
        db.ingest("a", {"id": [-1], "k": [-1]})
        before = capture(db)
        ones = {"id": list(range(1000)), "k": [1] * 1000}
        db.memory_limit = "24MB"
        with pytest.raises(ivm.ResourceError) as raised:
            db.ingest({"a": ones, "b": ones})
        text = str(raised.value)
        read = re.search(r"view 'pairs': its change in this epoch \(the driver stopped reading "
                         r"it at ([\d,]+) rows\), collected on the Spark driver", text)
        assert read and "nothing was applied" in text, text
        assert int(read[1].replace(",", "")) < 1_000_000, text  # not all of it on the driver
        db.memory_limit = "1GB"
        assert_unchanged(db, before)
        db.ingest({"a": ones, "b": {"id": [5], "k": [1]}})
        assert len(db.read("pairs")) == 1000 == db.sql("SELECT * FROM pairs").num_rows


def test_an_asof_joins_time_indexes_count_against_the_limit() -> None:
    from ivm.views.resources import held_bytes, memory_bytes

    with ivm.connect() as db:
        db.execute("CREATE TABLE t (s INTEGER, ts INTEGER, id INTEGER); "
                   "CREATE TABLE q (s INTEGER, ts INTEGER, p INTEGER); "
                   "CREATE VIEW v AS SELECT t.id, q.p FROM t ASOF JOIN q "
                   "ON t.s = q.s AND t.ts >= q.ts")
        db.ingest({"t": {"s": [1] * 5000, "ts": list(range(5000)), "id": list(range(5000))},
                   "q": {"s": [1] * 5000, "ts": list(range(5000)), "p": list(range(5000))}})
        db.ingest("q", {"s": [1], "ts": [7], "p": [7], "__w": [-1]})  # indexes in use
        held = [memory_bytes(v) for m in db._operator_memory.values() for v in m.values()]
        assert sum(held) > 5000 * 8, held  # two sides' times and rows at least
        others = (db._arrangements.nbytes() + db._ledger.nbytes()
                  + sum(index.nbytes for index in db._row_indexes.values()))
        assert held_bytes(db) == db._budget.held() == others + sum(held)
