"""``ivm.InternalError``: ivm's own failures, never blamed on the data, never anything but an
``IvmError`` out of the public API, and nothing applied.

Two sources: SQL ivm generated that DuckDB cannot parse or bind (simulated here by an
operator made to emit broken SQL), classified where the SQL runs
(``ivm.execution.failures``); and any unexpected exception anywhere (an internal
function made to raise ``AssertionError`` / ``KeyError``), turned into an
``InternalError`` by the guard at the public API (``ivm.guard``). Each case checks the
error (class, message, chained cause), that nothing was applied, and that the epochs
after it are exact (the oracle harness checks every view against DuckDB).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from oracle.harness import Epoch, Harness, rows_of
from oracle.spark import SPARK_PARTITIONS
from pyspark.errors import PythonException
from state_files import partition_epochs

import ivm
from ivm.circuit.incrementalize import incrementalize
from ivm.execution.embedded import describe, run_sql
from ivm.execution.spark.executor import translate_error
from ivm.execution.spark.stage_task import Ticket, apply_partition
from ivm.execution.spark.stages import view_stages
from ivm.passes import optimize
from ivm.sql_frontend.planner import plan_query
from ivm.views.diagnose import named

ORDERS = "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount INTEGER)"
VIEWS = {
    "totals": "SELECT customer, SUM(amount) AS s, COUNT(*) AS n FROM orders GROUP BY customer",
    "customers": "SELECT customer FROM orders GROUP BY customer",
    "big": "SELECT id, amount FROM orders WHERE amount > 1",
}
FIRST = Epoch.of({"orders": [("insert", (1, "a", 2)), ("insert", (2, "b", 1)),
                             ("insert", (3, "a", 5))]})
SECOND = Epoch.of({"orders": [("delete", (1, "a", 2)), ("insert", (4, "c", 7)),
                              ("delete", (2, "b", 1)), ("insert", (2, "b", 9))]})
THIRD = Epoch.of({"orders": [("insert", (5, "a", 1)), ("delete", (3, "a", 5))]})


def boom(error: type[BaseException] = AssertionError) -> Callable[..., Any]:
    def raise_(*args: Any, **kwargs: Any) -> Any:
        raise error("injected")

    return raise_


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness([ORDERS])
    h.apply(FIRST)
    h.create_views(VIEWS)
    yield h
    h.close()


def state(db: Any) -> tuple[Any, ...]:
    """Everything a failed call must leave as it was: epoch, catalog, contents, DuckDB's
    tables."""
    relations = sorted([*db.tables, *db.views])
    contents = {n: Counter(rows_of(db.read(n))) for n in relations}
    tables = db._con.execute("SELECT table_name FROM duckdb_tables() ORDER BY ALL").fetchall()
    return db.epoch, relations, contents, tables


def assert_internal(raised: pytest.ExceptionInfo[ivm.InternalError], cause: type) -> str:
    error = raised.value
    assert type(error) is ivm.InternalError and isinstance(error, ivm.IvmError)
    assert not isinstance(error, ivm.ExecutionError)
    assert isinstance(error.__cause__, cause), repr(error.__cause__)
    message = str(error)
    assert "bug in ivm" in message and "report" in message, message
    return message


# -- classification of DuckDB's errors ----------------------------------------------------


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT ,", ivm.InternalError),                          # ParserException
    ("SELECT nope", ivm.InternalError),                       # BinderException
    ("SELECT * FROM __ivm_nowhere", ivm.InternalError),       # CatalogException
    ("SELECT CAST('x' AS INTEGER)", ivm.ExecutionError),      # ConversionException
    ("SELECT 2147483647::INTEGER + 1", ivm.ExecutionError),   # OutOfRangeException
    ("SELECT 1 % 0", ivm.ExecutionError),                     # InvalidInputException
    ("SELECT error('boom')", ivm.ExecutionError),             # InvalidInputException
    ("SELECT strptime('x', '%Y')", ivm.ExecutionError),       # InvalidInputException
])
def test_duckdb_errors_are_classified(sql: str, expected: type) -> None:
    con = duckdb.connect()
    with pytest.raises(ivm.IvmError) as raised:
        run_sql(con, sql, "v")
    assert type(raised.value) is expected
    assert isinstance(raised.value.__cause__, duckdb.Error)
    if expected is ivm.InternalError:
        message = str(raised.value)
        assert message.startswith("view 'v': ") and "report" in message
        assert "LINE 1" not in message and sql not in message, message


# -- generated SQL DuckDB cannot parse or bind ---------------------------------------------


@pytest.mark.parametrize("broken", ["SELECT ,", "SELECT nope FROM (SELECT 1 AS x) AS t"])
def test_broken_generated_sql_at_create_view_is_internal(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    db = harness.db
    before = state(db)
    monkeypatch.setattr("ivm.operators.distinct.distinct_step_sql", lambda *a: broken)
    with pytest.raises(ivm.InternalError) as raised:
        db.execute("CREATE VIEW keys AS SELECT customer, amount FROM orders "
                   "GROUP BY customer, amount")
    message = assert_internal(raised, duckdb.Error)
    # the view, the construct, no generated SQL, and not the data's fault
    assert message.startswith("view 'keys': ivm's own SQL for its DISTINCT"), message
    assert "IncrementalDistinct" in message and "LINE" not in message and broken not in message
    assert "rows already there" not in message
    assert state(db) == before
    monkeypatch.undo()
    harness.create_views({"keys": "SELECT customer, amount FROM orders GROUP BY customer, amount"})
    harness.apply(SECOND)
    harness.apply(THIRD)


def test_broken_generated_sql_at_ingest_is_internal(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = harness.db
    before = state(db)
    monkeypatch.setattr("ivm.operators.distinct.distinct_step_sql", lambda *a: "SELECT ,")
    with pytest.raises(ivm.InternalError) as raised:
        harness.apply(SECOND)
    message = assert_internal(raised, duckdb.ParserException)
    assert message.startswith("view 'customers': ivm's own SQL for its DISTINCT"), message
    assert "on this batch" not in message
    assert state(db) == before
    monkeypatch.undo()
    harness.apply(SECOND)
    harness.apply(THIRD)


def test_broken_output_statement_names_the_view(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A view's output statement (its linear operators composed) fails: the view is named.
    db = harness.db
    before = state(db)
    monkeypatch.setattr("ivm.views.embedded.consolidate_sql",
                        lambda *a: "SELECT * FROM __ivm_nowhere")
    with pytest.raises(ivm.InternalError) as raised:
        db.execute("CREATE VIEW small AS SELECT id FROM orders WHERE amount < 3")
    message = assert_internal(raised, duckdb.CatalogException)
    assert message.startswith("view 'small': ivm's own SQL failed"), message
    assert state(db) == before
    monkeypatch.undo()
    harness.create_views({"small": "SELECT id FROM orders WHERE amount < 3"})
    harness.apply(SECOND)


def test_the_construct_of_broken_composed_sql_is_found(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A SELECT list's SQL runs composed into the statement filling the view: the replay
    # (views.diagnose.explain_internal) binds each operator's SQL and names the one at fault.
    db = harness.db
    before = state(db)
    monkeypatch.setattr("ivm.operators.project.ProjectOperator.change",
                        lambda self, run: "SELECT nope FROM (SELECT 1 AS x) AS t")
    with pytest.raises(ivm.InternalError) as raised:
        db.execute("CREATE VIEW small AS SELECT id + 1 AS j FROM orders")
    message = assert_internal(raised, duckdb.BinderException)
    assert message.startswith("view 'small': ivm's own SQL for its SELECT list"), message
    assert state(db) == before
    monkeypatch.undo()
    harness.create_views({"small": "SELECT id + 1 AS j FROM orders"})
    harness.apply(SECOND)


def test_a_value_the_data_cannot_take_is_still_execution_error() -> None:
    with ivm.connect() as db:
        db.execute(ORDERS)
        db.execute("CREATE VIEW c AS SELECT CAST(customer AS INTEGER) AS n FROM orders")
        with pytest.raises(ivm.ExecutionError) as raised:
            db.ingest("orders", [{"id": 1, "customer": "x", "amount": 1}])
        assert not isinstance(raised.value, ivm.InternalError)
        assert "evaluating CAST(orders.customer AS INT) failed on this batch" in str(raised.value)
        assert db.epoch == 0


# -- unexpected exceptions, anywhere: the guard --------------------------------------------


@pytest.mark.parametrize(("target", "error"), [
    ("ivm.views.session.plan_query", AssertionError),                   # planning
    ("ivm.views.embedded.EpochRunner.run", KeyError),                   # backfill
    ("ivm.views.embedded.EmbeddedEngine.manifest", AssertionError),     # after the backfill
])
def test_unexpected_exception_in_ddl(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, target: str, error: type
) -> None:
    db = harness.db
    before = state(db)
    monkeypatch.setattr(target, boom(error))
    script = ("CREATE TABLE extra (x INTEGER); "
              "CREATE VIEW keys AS SELECT customer FROM orders GROUP BY customer")
    with pytest.raises(ivm.InternalError) as raised:
        db.execute(script)
    message = assert_internal(raised, error)
    assert "execute('CREATE TABLE extra" in message and f"{error.__name__}: " in message
    assert state(db) == before  # the whole script, the table too, was rolled back
    monkeypatch.undo()
    db.execute("CREATE TABLE extra (x INTEGER)")
    harness.create_views({"keys": "SELECT customer FROM orders GROUP BY customer"})
    harness.apply(SECOND)


def test_unexpected_exception_in_drop(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    db = harness.db
    before = state(db)
    monkeypatch.setattr("ivm.storage.catalog.Catalog.remove", boom(KeyError))
    with pytest.raises(ivm.InternalError):
        db.execute("DROP VIEW big")
    assert state(db) == before
    monkeypatch.undo()
    harness.apply(SECOND)


@pytest.mark.parametrize(("target", "error"), [
    ("ivm.views.embedded.normalize_batch", KeyError),                  # before anything
    ("ivm.views.ingest.EpochRunner.forget_unmaintained", AssertionError),  # views computed
    ("ivm.views.ingest.Ingest._advance_epoch", KeyError),               # state appended
])
def test_unexpected_exception_in_ingest(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, target: str, error: type
) -> None:
    db = harness.db
    harness.apply(SECOND)  # row indexes and operator memory are warm
    before = state(db)
    monkeypatch.setattr(target, boom(error))
    with pytest.raises(ivm.InternalError) as raised:
        harness.apply(THIRD)
    message = assert_internal(raised, error)
    assert "ingest({'orders': …})" in message
    assert state(db) == before
    monkeypatch.undo()
    harness.apply(THIRD)
    harness.apply(Epoch.of({"orders": [("delete", (4, "c", 7)), ("insert", (6, "c", 3))]}))


def test_unexpected_exception_in_reads(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    db = harness.db
    before = state(db)
    calls: list[tuple[Callable[[], Any], str, type]] = [
        (lambda: db.read("totals"), "ivm.views.session.Session._readable", KeyError),
        (lambda: db.sql("SELECT * FROM totals"), "ivm.views.session.check_read_query",
         AssertionError),
        (lambda: db.explain("totals"), "ivm.circuit.circuit.Circuit.explain", AssertionError),
        (lambda: db.plain_sql("totals"), "ivm.views.explaining.plain_sql", KeyError),
        (lambda: db.views, "ivm.views.session.view_info", KeyError),
        (lambda: db.tables, "ivm.views.session.table_info", AssertionError),
    ]
    for call, target, error in calls:
        with monkeypatch.context() as patch:
            patch.setattr(target, boom(error))
            with pytest.raises(ivm.InternalError) as raised:
                call()
            assert_internal(raised, error)
    assert state(db) == before
    harness.apply(SECOND)


def test_what_is_not_ivms_passes_untouched(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = harness.db
    for interrupt in (KeyboardInterrupt, SystemExit):
        with monkeypatch.context() as patch:
            patch.setattr("ivm.views.session.Session._readable", boom(interrupt))
            with pytest.raises(interrupt) as raised:
                db.read("totals")
            assert type(raised.value) is interrupt
    # A call with arguments the method does not take is the caller's, as in Python.
    with pytest.raises(TypeError):
        db.read()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ivm.connect(colour="red")  # type: ignore[call-arg]
    # An IvmError is itself, not wrapped.
    with pytest.raises(ivm.SqlError) as raised:
        db.read("nope")
    assert type(raised.value) is ivm.SqlError
    harness.apply(SECOND)


def test_connect_is_guarded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("ivm.views.session.Catalog", boom(KeyError))
    with pytest.raises(ivm.InternalError) as raised:
        ivm.connect(tmp_path / "s")
    assert_internal(raised, KeyError)
    monkeypatch.undo()
    with ivm.connect(tmp_path / "s") as db:  # the state directory was released
        db.execute(ORDERS)


def test_every_public_method_is_guarded() -> None:
    from ivm.views.session import Session

    public = [n for n in dir(Session) if not n.startswith("_")]
    assert {"execute", "ingest", "read", "sql", "explain", "close", "epoch", "views"} <= set(
        public)
    for name in public:
        attribute = next(b.__dict__[name] for b in Session.__mro__ if name in b.__dict__)
        if callable(attribute) or isinstance(attribute, property):
            assert getattr(attribute, "__ivm_guarded__", False), name


# -- Spark mode ----------------------------------------------------------------------------


def test_spark_task_failures_are_classified() -> None:
    def worker(last: str) -> PythonException:
        return PythonException(message=(
            "An exception was thrown from the Python worker.\nTraceback (most recent call "
            f"last):\n  File \"task.py\", line 1, in apply\n{last}\n"))

    internal = translate_error(worker("AssertionError"))
    assert type(internal) is ivm.InternalError and "AssertionError" in str(internal)
    binder = translate_error(worker("_duckdb.BinderException: Binder Error: x\n\nLINE 1: SELECT"))
    assert type(binder) is ivm.InternalError and "LINE" not in str(binder)
    value = translate_error(worker("_duckdb.ConversionException: Conversion Error: 'x'"))
    assert type(value) is ivm.ExecutionError
    raised = translate_error(worker(
        "ivm.errors.InternalError: view 'stage-aggregate': ivm's own SQL failed: y. Report."))
    assert type(raised) is ivm.InternalError
    renamed = named(raised, "totals")
    assert type(renamed) is ivm.InternalError
    assert str(renamed).startswith("view 'totals': ivm's own SQL failed: y"), str(renamed)


def test_broken_generated_sql_in_a_stage_task_is_internal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # What a Spark task runs, in this process (a worker process would not see the patch).
    con = duckdb.connect()
    con.execute("CREATE TABLE t (g VARCHAR, v INTEGER)")
    relations = {"t": describe(con, "SELECT * FROM t")}
    plan = plan_query("SELECT g FROM t GROUP BY g", relations, lambda q: describe(con, q))
    circuit = optimize(incrementalize(plan, "v", lambda q: describe(con, q)), partitioned=True)
    (stage,) = [s for s in view_stages(circuit) if s.circuit is not None]
    monkeypatch.setattr("ivm.operators.distinct.distinct_step_sql", lambda *a: "SELECT ,")
    ticket = Ticket(epoch=0, committed=0, token="create", backfill=True)
    empty = pa.table({"__i": pa.array([], pa.int32()), "__p": pa.array([], pa.int32())})
    with pytest.raises(ivm.InternalError) as raised:
        apply_partition(stage, tmp_path, 0, ticket, empty)
    message = assert_internal(raised, duckdb.ParserException)
    assert "ivm's own SQL for its DISTINCT" in message and "LINE" not in message, message
    # The driver reads it from the task's traceback and names the view.
    text = f"Traceback (most recent call last):\nivm.errors.InternalError: {message}\n"
    translated = translate_error(PythonException(message=text))
    assert type(translated) is ivm.InternalError
    assert str(named(translated, "v")).startswith("view 'v': ivm's own SQL for its DISTINCT")



def test_unexpected_exception_on_spark(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "state"
    harness = Harness([ORDERS], connect=lambda: ivm.connect(
        root, spark=spark, partitions=SPARK_PARTITIONS))
    try:
        harness.apply(FIRST)
        harness.create_views({"totals": VIEWS["totals"], "customers": VIEWS["customers"]})
        db = harness.db
        # Every stage ran on Spark and applied the epoch in its partitions; then the driver
        # fails: the partitions are rolled back.
        monkeypatch.setattr("ivm.views.spark.engine.SparkEngine._collect",
                            boom(AssertionError))
        with pytest.raises(ivm.InternalError) as raised:
            harness.apply(SECOND)
        assert_internal(raised, AssertionError)
        assert db.epoch == 1 and max(partition_epochs(root)) == 1
        monkeypatch.undo()
        # A view whose stages were filled on Spark, then the driver fails: no view, no files.
        monkeypatch.setattr("ivm.views.spark.engine.SparkEngine.manifest", boom(KeyError))
        with pytest.raises(ivm.InternalError):
            db.execute("CREATE VIEW big AS " + VIEWS["big"])
        assert "big" not in db.views
        monkeypatch.undo()
        harness.create_views({"big": VIEWS["big"]})
        harness.apply(SECOND)
        harness.apply(THIRD)
    finally:
        harness.close()
