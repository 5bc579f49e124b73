"""Spark mode (API.md, Spark): exactly-once tasks, failed epochs, the Spark SQL catalog,
Spark DataFrame batches, and its errors. Every scripted epoch is checked by the oracle
harness against DuckDB's recomputation; the random constructs run in
tests/test_sql_constructs.py (``test_constructs_on_spark``).
"""

from __future__ import annotations

import datetime
import re
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from oracle.harness import Epoch, Harness, rows_of
from oracle.spark import SPARK_PARTITIONS
from state_files import partition_epochs

import ivm
from ivm.execution.spark.tasks import FailurePoint

pytestmark = pytest.mark.xdist_group("spark_mode")
"""Under xdist, one worker runs the module: its module-scoped fixtures are made once."""

ORDERS = (
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DECIMAL(12,2), "
    "qty INTEGER)"
)
CUSTOMERS = "CREATE TABLE customers (name VARCHAR PRIMARY KEY, region VARCHAR)"
VIEWS = {
    "revenue": "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n, MAX(o.qty) AS top "
               "FROM orders o JOIN customers c ON o.customer = c.name GROUP BY c.region",
    "big_orders": "SELECT id, customer, amount FROM orders WHERE amount > 5",
    "order_count": "SELECT COUNT(*) AS n, SUM(qty) AS q FROM orders",
    "busy": "SELECT region FROM revenue WHERE n > 1",
}

A, B, C = ("a", "north"), ("b", "south"), ("c", "north")


def order(i: int, customer: str | None = "a", amount: str = "7.00", qty: int | None = 1) -> tuple:
    return (i, customer, Decimal(amount), qty)


SCRIPT = [
    {"customers": [("insert", A), ("insert", B), ("insert", C)],
     "orders": [("insert", order(1)), ("insert", order(2, "b", "3.00", 2)),
                ("insert", order(3, "c", "9.50", None))]},
    {"orders": [("update", order(1), order(1, "b", "1.00", 4)), ("insert", order(4, None))]},
    {"orders": [("delete", order(2, "b", "3.00", 2))],
     "customers": [("update", C, ("c", "south"))]},
    {"orders": [("insert", order(5, "c", "20.00", 3)), ("insert", order(6, "a", "0.50", 7))]},
]


def spark_connect(spark: Any, path: Path) -> Any:
    return lambda: ivm.connect(path, spark=spark, partitions=SPARK_PARTITIONS)


@pytest.fixture(scope="module")
def states(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two closed states, made (and checked by the oracle) once for the module: the tables
    and VIEWS, empty; and the same after SCRIPT[0] (epoch 1). A test works on a copy:
    CREATE VIEW in Spark mode runs a Spark job per view, and a copy reopens in one."""
    root = tmp_path_factory.mktemp("spark-states")
    made = Harness([ORDERS, CUSTOMERS], connect=spark_connect(spark, root / "empty"))
    try:
        made.create_views(VIEWS)
    finally:
        made.close()
    shutil.copytree(root / "empty", root / "loaded")
    made = Harness([ORDERS, CUSTOMERS], connect=spark_connect(spark, root / "loaded"),
                   existing=True)
    try:
        made.adopt(VIEWS)
        made.apply(Epoch.of(SCRIPT[0]))
    finally:
        made.close()
    return {"empty": root / "empty", "loaded": root / "loaded"}


def copied(states: dict[str, Path], which: str, spark: Any, tmp_path: Path) -> Harness:
    """A harness over a copy (at ``tmp_path / "state"``) of state ``which``, checked."""
    shutil.copytree(states[which], tmp_path / "state")
    h = Harness([ORDERS, CUSTOMERS], connect=spark_connect(spark, tmp_path / "state"),
                existing=True)
    h.adopt(VIEWS, [Epoch.of(SCRIPT[0])] if which == "loaded" else [])
    return h


@pytest.fixture
def harness(states: dict[str, Path], spark: Any, tmp_path: Path) -> Any:
    """The tables and VIEWS, empty, at epoch 0."""
    h = copied(states, "empty", spark, tmp_path)
    yield h
    h.close()


@pytest.fixture
def loaded(states: dict[str, Path], spark: Any, tmp_path: Path) -> Any:
    """The tables and VIEWS after SCRIPT[0], at epoch 1."""
    h = copied(states, "loaded", spark, tmp_path)
    yield h
    h.close()



# --- the same results as embedded mode ---------------------------------------------------


def test_spark_mode_equals_embedded_mode(spark: Any, tmp_path: Path) -> None:
    # Same script, both modes: every delta and every read equal, types included.
    sessions = [ivm.connect(), ivm.connect(tmp_path / "s", spark=spark,
                                           partitions=SPARK_PARTITIONS)]
    try:
        for db in sessions:
            db.execute(f"{ORDERS}; {CUSTOMERS}")
            db.execute("; ".join(f"CREATE VIEW {n} AS {q}" for n, q in VIEWS.items()))
        specs = Harness([ORDERS, CUSTOMERS])
        try:
            for ops in SCRIPT:
                epoch = Epoch.of(ops, fmt="weighted")
                batches = {c.table: c.render(specs.specs[c.table], specs.schemas[c.table])
                           for c in epoch.changes}
                embedded, on_spark = (db.ingest(batches) for db in sessions)
                for name in VIEWS:
                    assert on_spark[name].schema == embedded[name].schema, name
                    assert _bag(on_spark[name]) == _bag(embedded[name]), name
                for name in [*VIEWS, "orders", "customers"]:
                    a, b = (db.read(name) for db in sessions)
                    assert a.schema == b.schema and _bag(a) == _bag(b), name
        finally:
            specs.close()
    finally:
        for db in sessions:
            db.close()


# --- exactly once ---------------------------------------------------------------------------


def test_tasks_retried_after_writing_apply_their_epoch_once(loaded: Any, tmp_path: Path) -> None:
    # Every task of every stage fails once, after it committed its epoch; Spark
    # retries it, and the retry must re-emit the stored change, not apply it again.
    # (The second epoch: deletes and updates of both tables, after a first load.)
    markers = tmp_path / "failures"
    markers.mkdir()
    loaded.db._failure = FailurePoint(stage="", attempts=(0,), marker=str(markers))
    loaded.apply(Epoch.of(SCRIPT[2], fmt="debezium"))
    # A stage's directory: .../t<n>-orders/table or .../v<n>-revenue/s4-join.
    stages = {re.sub(r"^([tv])\d+-", r"\1-", f.read_text().rsplit("/", 2)[-2])
              for f in markers.iterdir()}
    # Both tables and all four views had a task fail (each stage of a view fails too,
    # but a view's stages share one directory prefix).
    assert stages >= {"t-orders", "t-customers", "v-revenue", "v-big_orders", "v-order_count",
                      "v-busy"}, stages


def test_tasks_retried_before_writing(harness: Any, tmp_path: Path) -> None:
    markers = tmp_path / "failures"
    markers.mkdir()
    harness.db._failure = FailurePoint(stage="-revenue/", after_write=False, attempts=(0, 1),
                                      marker=str(markers))
    harness.apply(Epoch.of(SCRIPT[0]))
    assert len(list(markers.iterdir())) >= 2  # two attempts of a task failed, the third ran


def test_failed_ingest_applies_nothing_anywhere(loaded: Any, tmp_path: Path) -> None:
    db = loaded.db
    # The view stages fail on every attempt: the table stages have applied the epoch
    # by then, and must be rolled back.
    db._failure = FailurePoint(stage="-revenue/", attempts=None)
    with pytest.raises(ivm.IvmError, match="injected failure"):
        db.ingest({"orders": [{"id": 9, "customer": "a", "amount": Decimal("1.00"), "qty": 1}],
                   "customers": [{"name": "d", "region": "east"}]})
    assert db.epoch == 1
    assert max(partition_epochs(tmp_path / "state")) == 1
    db._failure = None
    loaded.apply(Epoch.of(SCRIPT[2]))  # the oracle never saw the failed batch


def test_epoch_left_ahead_by_a_dead_driver_is_rolled_back_when_reopened(
    loaded: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = loaded.db
    # Every stage succeeds, then the driver fails to commit the epoch and dies
    # before rolling the partitions back.
    monkeypatch.setattr(db._catalog, "advance_sql", lambda: "UPDATE no_such_table SET x = 1")
    monkeypatch.setattr(db._engine, "recover", lambda: None)
    with pytest.raises(ivm.IvmError):
        db.ingest("orders", [{"id": 9, "customer": "a", "amount": Decimal("8.00"), "qty": 1}])
    monkeypatch.undo()
    ahead = partition_epochs(tmp_path / "state")
    assert ahead[2] > 0, f"no partition applied the failed epoch: {ahead}"
    loaded.reopen()  # recovery rolls those partitions back; reopen checks every relation
    assert max(partition_epochs(tmp_path / "state")) == 1
    for ops in SCRIPT[1:3]:
        loaded.apply(Epoch.of(ops))


# --- the Spark SQL catalog -----------------------------------------------------------------


def _bag(table: pa.Table) -> Counter:
    return Counter(rows_of(table))


def test_views_and_tables_are_read_through_spark_sql(loaded: Any, spark: Any) -> None:
    db = loaded.db
    loaded.apply(Epoch.of(SCRIPT[1]))
    for name in [*VIEWS, "orders", "customers"]:
        read = db.read(name)
        through_sql = spark.sql(f"SELECT * FROM {name}").toArrow()
        frame = db.dataframe(name).toArrow()
        assert through_sql.column_names == read.column_names == frame.column_names
        assert _bag(through_sql) == _bag(read) == _bag(frame), name
    # A query over a view sees the current contents after every epoch.
    loaded.apply(Epoch.of(SCRIPT[2]))
    total = spark.sql("SELECT SUM(n) AS n FROM revenue").toArrow().column("n")[0].as_py()
    assert total == sum(db.read("revenue").column("n").to_pylist())
    assert _bag(spark.sql("SELECT * FROM busy").toArrow()) == _bag(db.read("busy"))


def test_dropped_views_leave_the_spark_catalog(harness: Any, spark: Any) -> None:
    harness.db.execute("DROP VIEW busy")
    assert not spark.catalog.tableExists("busy")
    assert spark.catalog.tableExists("revenue")


def test_odd_names_in_spark_sql(spark: Any, tmp_path: Path) -> None:
    db = ivm.connect(tmp_path / "odd", spark=spark, partitions=SPARK_PARTITIONS)
    try:
        db.execute('CREATE TABLE "my table" ("a b" INTEGER, "c.d" VARCHAR); '
                   'CREATE VIEW "sum view" AS SELECT "c.d", SUM("a b") AS "s""q" '
                   'FROM "my table" GROUP BY "c.d"')
        db.ingest("my table", [{"a b": 1, "c.d": "x"}, {"a b": 2, "c.d": "x"}])
        got = spark.sql("SELECT * FROM `sum view`").toArrow()
        assert got.column_names == ["c.d", 's"q']
        assert _bag(got) == _bag(db.read("sum view")) == Counter({("x", Decimal(3)): 1})
    finally:
        db.close()


# --- Spark DataFrames as batches ---------------------------------------------------------


def test_spark_dataframes_are_batches(loaded: Any, spark: Any) -> None:
    db = loaded.db
    schema = "id BIGINT, customer STRING, amount DECIMAL(12,2), qty INT"
    rows = [(7, "a", Decimal("6.00"), 2), (8, "b", Decimal("4.00"), None)]
    db.ingest("orders", spark.createDataFrame(rows, schema))
    loaded._apply_to_oracle(Epoch.of({"orders": [("insert", r) for r in rows]}).changes[0])
    loaded.check_tables("after a Spark DataFrame of inserts")
    loaded.check_views("after a Spark DataFrame of inserts")
    # A weighted DataFrame: delete one row, update another (its columns in another order).
    weighted = spark.createDataFrame(
        [(-1, 7, "a", Decimal("6.00"), 2), (-1, 8, "b", Decimal("4.00"), None),
         (1, 8, "c", Decimal("40.00"), 5)],
        f"__w BIGINT, {schema}",
    )
    db.ingest("orders", weighted)
    ops = [("delete", rows[0]), ("update", rows[1], (8, "c", Decimal("40.00"), 5))]
    loaded._apply_to_oracle(Epoch.of({"orders": ops}).changes[0])
    loaded.check_tables("after a weighted Spark DataFrame")
    loaded.check_views("after a weighted Spark DataFrame")
    assert db.epoch == 3


def test_bad_spark_dataframes_are_rejected_whole(loaded: Any, spark: Any) -> None:
    db = loaded.db
    before = {n: _bag(db.read(n)) for n in [*VIEWS, "orders"]}
    missing = spark.createDataFrame([(10, "a")], "id BIGINT, customer STRING")
    with pytest.raises(ivm.SchemaError, match="amount"):
        db.ingest("orders", missing)
    lossy = spark.createDataFrame([(10.5, "a", Decimal("1.00"), 1)],
                                  "id DOUBLE, customer STRING, amount DECIMAL(12,2), qty INT")
    with pytest.raises(ivm.SchemaError):
        db.ingest("orders", lossy)
    duplicate = spark.createDataFrame([(1, "a", Decimal("1.00"), 1)],
                                      "id BIGINT, customer STRING, amount DECIMAL(12,2), qty INT")
    with pytest.raises(ivm.ConstraintError, match="duplicate primary key"):
        db.ingest("orders", duplicate)
    assert db.epoch == 1
    assert {n: _bag(db.read(n)) for n in [*VIEWS, "orders"]} == before


# --- constraints, DDL and state --------------------------------------------------------------


def test_constraint_errors_change_nothing(loaded: Any) -> None:
    db = loaded.db
    with pytest.raises(ivm.ConstraintError, match="not there"):
        db.ingest("orders", [{"id": 42, "customer": "a", "amount": Decimal("1.00"), "qty": 1,
                              "__w": -1}])
    with pytest.raises(ivm.ConstraintError, match="duplicate primary key"):
        db.ingest({"orders": [{"id": 1, "customer": "z", "amount": Decimal("1.00"), "qty": 1}],
                   "customers": [{"name": "z", "region": "west"}]})
    assert db.epoch == 1
    loaded.check_tables("after rejected batches")
    loaded.check_views("after rejected batches")
    # Upsert replaces the row with the same key.
    db.ingest("orders", [{"id": 1, "customer": "c", "amount": Decimal("2.00"), "qty": 9}],
              mode="upsert")
    loaded._apply_to_oracle(Epoch.of({"orders": [
        ("update", order(1), order(1, "c", "2.00", 9))]}).changes[0])
    loaded.check_tables("after an upsert")
    loaded.check_views("after an upsert")


def test_ddl_scripts_are_atomic(loaded: Any, spark: Any) -> None:
    db = loaded.db
    with pytest.raises(ivm.IvmError):
        db.execute("CREATE VIEW extra AS SELECT id FROM orders; DROP VIEW busy; "
                   "CREATE VIEW broken AS SELECT nope FROM orders")
    assert "extra" not in db.views and not spark.catalog.tableExists("extra")
    loaded.check_views("after a failed script")  # busy is still there, files included
    db.execute("CREATE VIEW passing AS SELECT id FROM orders; DROP VIEW passing")
    assert not spark.catalog.tableExists("passing")
    db.execute("CREATE OR REPLACE VIEW big_orders AS SELECT id, amount FROM orders "
               "WHERE amount > 8")
    loaded.views["big_orders"] = "SELECT id, amount FROM orders WHERE amount > 8"
    loaded.oracle_sql["big_orders"] = loaded.views["big_orders"]
    loaded.oracle.execute("CREATE OR REPLACE VIEW big_orders AS "
                           "SELECT id, amount FROM orders WHERE amount > 8")
    loaded.applied["big_orders"] = Counter(rows_of(db.read("big_orders")))
    loaded.apply(Epoch.of(SCRIPT[1]))


def test_explain_lists_the_spark_stages(harness: Any) -> None:
    text = harness.db.explain("revenue")
    assert f"spark stages ({SPARK_PARTITIONS} partitions)" in text
    # stages are named by their operator's kind and fingerprint, as their directories are
    assert re.search(r"join-[0-9a-f]{12}: in0 by \[o.customer\]; in1 by \[c.name\]", text)
    assert re.search(r"aggregate_running-[0-9a-f]{12}: in0 by \[__k0\]", text)  # MAX: running
    assert "stores the view" in text
    assert "no epoch has run" in harness.db.explain("revenue", analyze=True)
    harness.apply(Epoch.of(SCRIPT[0]))
    analyzed = harness.db.explain("revenue", analyze=True)
    assert re.match(r"last epoch \d+: [\d.]+ ms \(batches [\d.]+, spark jobs [\d.]+", analyzed)
    assert "in the view's Spark job" in analyzed or "[no change]" in analyzed


def test_state_is_reopened_with_its_partitions(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "state"
    with pytest.raises(ivm.StateError, match="path"):
        ivm.connect(spark=spark)
    with pytest.raises(ivm.IvmError, match="Spark mode only"):
        ivm.connect(path, partitions=4)
    db = ivm.connect(path, spark=spark, partitions=2)
    db.execute(ORDERS)
    db.ingest("orders", [{"id": 1, "customer": "a", "amount": Decimal("1.00"), "qty": 1}])
    db.close()
    with pytest.raises(ivm.StateError, match="2 partitions"):
        ivm.connect(path, spark=spark, partitions=3)
    with pytest.raises(ivm.StateError, match="Spark mode"):
        ivm.connect(path)
    # What a driver that died mid-DDL leaves: a directory the catalog does not know.
    stray = path / "views" / "v99-ghost" / "output"
    stray.mkdir(parents=True)
    db = ivm.connect(path, spark=spark)  # the stored partition count
    try:
        assert db.partitions == 2 and db.epoch == 1
        assert db.read("orders").num_rows == 1
        assert not stray.parent.exists()
    finally:
        db.close()
    embedded = tmp_path / "embedded"
    ivm.connect(embedded).close()
    with ivm.connect(embedded) as e:
        e.execute(ORDERS)
    with pytest.raises(ivm.StateError, match="embedded mode"):
        ivm.connect(embedded, spark=spark)


def test_types_spark_cannot_carry_are_refused(spark: Any, tmp_path: Path) -> None:
    db = ivm.connect(tmp_path / "state", spark=spark, partitions=SPARK_PARTITIONS)
    try:
        with pytest.raises(ivm.UnsupportedSQL, match="INTERVAL"):
            db.execute("CREATE TABLE t (id INTEGER, gap INTERVAL)")
        assert "t" not in db.tables
        db.execute("CREATE TABLE t (id INTEGER, ts TIMESTAMP, u UBIGINT, h HUGEINT)")
        with pytest.raises(ivm.UnsupportedSQL, match="STRUCT"):
            db.execute("CREATE VIEW v AS SELECT id, {'a': id} AS pair FROM t")
        db.execute("CREATE VIEW w AS SELECT id % 2 AS k, SUM(u) AS su, SUM(h) AS sh, "
                   "MAX(ts) AS latest FROM t GROUP BY id % 2")
        big = 2**64 - 1
        db.ingest("t", pa.table({
            "id": pa.array([1], pa.int32()), "ts": [datetime.datetime(2024, 1, 1)],
            "u": pa.array([big], pa.uint64()), "h": pa.array([10**37], pa.decimal128(38, 0)),
        }))
        last = datetime.datetime(2024, 1, 1)
        assert db.read("w").to_pylist() == [
            {"k": 1, "su": Decimal(big), "sh": Decimal(10**37), "latest": last}
        ]
    finally:
        db.close()


# --- the front door and reopened state ------------------------------------------------------


def test_workers_that_cannot_import_ivm_fail_connect_with_the_fix(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ivm.views.spark.workers.PROBE_MODULE", "ivm_is_not_installed_here")
    with pytest.raises(ivm.IvmError, match="cannot import ivm.*PYSPARK_PYTHON") as caught:
        ivm.connect(tmp_path / "state", spark=spark, partitions=SPARK_PARTITIONS)
    assert "ivm_is_not_installed_here" in str(caught.value)
    assert not (tmp_path / "state").exists()  # refused before anything was written


def test_a_changed_plan_rebuilds_the_view_on_spark(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state"
    harness = Harness([ORDERS, CUSTOMERS], connect=spark_connect(spark, path))
    try:
        harness.create_views({"count_by_region": "SELECT c.region, COUNT(*) AS n, "
                              "SUM(o.qty) AS q FROM orders o JOIN customers c "
                              "ON o.customer = c.name GROUP BY c.region"})
        harness.apply(Epoch.of(SCRIPT[0]))
        (view_dir,) = (path / "views").iterdir()
        before = {d.name for d in view_dir.iterdir()}
        assert any(name.startswith("aggregate-") for name in before)
        # a planner change: the aggregate becomes a per-key recompute
        monkeypatch.setattr("ivm.operators.aggregate.Aggregate.invertible_forms",
                            lambda self: None)
        monkeypatch.setattr("ivm.operators.running_aggregate.RunningAggregate.forms_for",
                            staticmethod(lambda node: None))
        with pytest.warns(ivm.IvmWarning, match="count_by_region"):
            harness.reopen()
        after = {d.name for d in view_dir.iterdir()}
        assert any(name.startswith("aggregate_per_key-") for name in after)
        assert not any(name.startswith("aggregate-") for name in after)  # no stale stage
        harness.apply(Epoch.of(SCRIPT[1]))
    finally:
        harness.close()


def test_replacing_the_newest_view_keeps_its_state_on_spark(loaded: Any) -> None:
    # A creation number is never reused, so the replacement's files are its own: the old
    # files go at commit, and a script that fails leaves the old view's files in place.
    db = loaded.db
    newest = "SELECT customer, SUM(qty) AS q FROM orders GROUP BY customer"
    db.execute(f"CREATE VIEW newest AS {newest}")
    loaded.oracle.execute(f"CREATE VIEW newest AS {newest}")
    loaded.views["newest"] = loaded.oracle_sql["newest"] = newest
    loaded.applied["newest"] = Counter(rows_of(db.read("newest")))
    with pytest.raises(ivm.SqlError):
        db.execute("CREATE OR REPLACE VIEW newest AS SELECT customer FROM orders; "
                   "CREATE VIEW broken AS SELECT nope FROM orders")
    loaded.check_views("after a failed replacement")
    replaced = "SELECT customer, MAX(qty) AS q FROM orders GROUP BY customer"
    db.execute(f"CREATE OR REPLACE VIEW newest AS {replaced}")
    loaded.oracle.execute(f"CREATE OR REPLACE VIEW newest AS {replaced}")
    loaded.views["newest"] = loaded.oracle_sql["newest"] = replaced
    loaded.applied["newest"] = Counter(rows_of(db.read("newest")))
    loaded.check_views("after the replacement")
    loaded.apply(Epoch.of(SCRIPT[1]))
    # DROP … CASCADE: revenue and busy (which reads it) go, files and catalog entries too
    db.execute("DROP VIEW revenue CASCADE")
    loaded.oracle.execute("DROP VIEW busy; DROP VIEW revenue")
    for name in ("revenue", "busy"):
        loaded.views.pop(name), loaded.oracle_sql.pop(name), loaded.applied.pop(name)
        assert name not in db.views
    assert not [d for d in (loaded.db.path / "views").iterdir() if "revenue" in d.name]
    loaded.apply(Epoch.of(SCRIPT[2]))
    loaded.reopen()
