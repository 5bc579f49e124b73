"""API hygiene (issue #27, item 13): internals private, documented public methods, keyword
names, ambiguous columns, plain error text, REFRESH, quiet Spark task failures."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

import ivm
from ivm.views.session import Session
from ivm.views.spark.quiet import LOGGERS, quiet_tasks

INTERNALS = ("con", "catalog", "snapshot", "restore", "names", "compactor", "arrow_schemas",
             "row_indexes", "operator_memory", "arrangements", "on_commit", "on_rollback",
             "failure", "commit_actions_failed", "root")
MODES = ("Both modes", "Spark mode", "Embedded mode", "embedded", "(Spark; None embedded)")


def test_internals_are_private_and_public_methods_documented() -> None:
    db = ivm.connect()
    try:
        for name in INTERNALS:
            assert not hasattr(db, name), name
        public = [n for n, _ in inspect.getmembers(Session) if not n.startswith("_")]
        assert {"ingest", "subscribe", "sink", "check", "stats", "changes"} <= set(public)
        for name in public:
            doc = inspect.getdoc(getattr(Session, name))
            assert doc and len(doc) > 30, f"Session.{name} has no real docstring"
            assert "accessors are guarded" not in doc, f"Session.{name} lost its docstring"
            words = " ".join(doc.split())
            assert any(m in words for m in MODES), f"Session.{name} does not say its modes"
    finally:
        db.close()


def test_keyword_names_are_refused_unless_quoted() -> None:
    db = ivm.connect()
    with pytest.raises(ivm.SqlError, match="'semi' is a keyword of DuckDB's SQL"):
        db.execute("CREATE TABLE semi (a INT)")
    with pytest.raises(ivm.SqlError, match="Expected table name but got 'distinct'"):
        db.execute("CREATE TABLE t (a INT); CREATE VIEW distinct AS SELECT a FROM t")
    db.execute('CREATE TABLE "distinct" (a INT); CREATE VIEW "semi" AS SELECT a FROM "distinct"')
    db.ingest("distinct", [{"a": 1}])
    assert db.read("semi").num_rows == db.sql('SELECT * FROM "semi"').num_rows == 1


def test_an_ambiguous_column_is_called_ambiguous() -> None:
    db = ivm.connect()
    db.execute("CREATE TABLE t1 (a INT, b INT); CREATE TABLE t2 (a INT)")
    with pytest.raises(ivm.SqlError, match=r"column 'a' .* is ambiguous: t1 and t2 both have it"):
        db.execute("CREATE VIEW v AS SELECT a FROM t1 JOIN t2 ON t1.b = t2.a")
    with pytest.raises(ivm.SqlError, match="cannot resolve Column 'zz'"):
        db.execute("CREATE VIEW v AS SELECT zz FROM t1")


def test_sql_errors_carry_no_terminal_escapes() -> None:
    db = ivm.connect()
    with pytest.raises(ivm.SqlError) as raised:
        db.sql("SELEC 1")
    assert "\x1b" not in str(raised.value) and "line 1, column 7" in str(raised.value)


@pytest.mark.parametrize("mode", ["embedded", "spark"])
def test_refresh_is_a_noop_with_a_note(spark: Any, tmp_path: Path, mode: str) -> None:
    options = {"spark": spark, "partitions": 2} if mode == "spark" else {}
    with ivm.connect(tmp_path / "s", **options) as db:
        db.execute("CREATE TABLE t (a INT); CREATE VIEW v AS SELECT a FROM t")
        db.ingest("t", [{"a": 1}])
        with pytest.warns(ivm.IvmWarning, match="does nothing: ivm keeps every view fresh"):
            db.execute("REFRESH MATERIALIZED VIEW v")
        assert db.epoch == 1 and db.read("v").to_pylist() == [{"a": 1}]  # nothing ran
        with pytest.raises(ivm.SqlError, match="no view named 'nope'"):
            db.execute("REFRESH MATERIALIZED VIEW nope")


def test_spark_task_loggers_are_quiet_during_an_epoch(spark: Any, tmp_path: Path) -> None:
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    before = [str(log4j.LogManager.getLogger(n).getLevel()) for n in LOGGERS]
    with quiet_tasks(spark):
        assert {str(log4j.LogManager.getLogger(n).getLevel()) for n in LOGGERS} == {"OFF"}
    assert [str(log4j.LogManager.getLogger(n).getLevel()) for n in LOGGERS] == before
    db = ivm.connect(tmp_path / "s", spark=spark, partitions=2)
    try:
        assert type(db) is Session and db.spark is spark and db.partitions == 2  # one class
        db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR NOT NULL)")
        frame = spark.createDataFrame([(1, "a"), (2, None)], "id long, v string")
        with pytest.raises(ivm.ConstraintError, match="NOT NULL"):
            db.ingest("t", frame)
        assert [str(log4j.LogManager.getLogger(n).getLevel()) for n in LOGGERS] == before
    finally:
        db.close()
