"""sql_frontend.statements.parse_script: the DDL statements ivm understands."""

from __future__ import annotations

import duckdb
import pytest

from ivm.errors import SqlError, UnsupportedSQL
from ivm.sql_frontend.statements import CreateTable, CreateView, Drop, parse_script


def duckdb_type(spelling: str) -> str:
    """DuckDB's own name for a type spelling (TEXT -> VARCHAR, INT -> INTEGER)."""
    return str(duckdb.sql(f"SELECT CAST(NULL AS {spelling}) AS x").types[0])


def one(sql: str):
    statements = parse_script(sql)
    assert len(statements) == 1
    return statements[0]


def test_create_table_column_level_primary_key_and_not_null():
    statement = one(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR NOT NULL, "
        "amount DECIMAL(12,2), ts TIMESTAMP)"
    )
    assert isinstance(statement, CreateTable)
    assert not statement.if_not_exists
    table = statement.table
    assert table.name == "orders"
    assert table.schema.names == ["id", "customer", "amount", "ts"]
    # Types are DuckDB type strings; any spelling DuckDB reads as the declared type will do.
    assert [duckdb_type(c.type) for c in table.schema.columns] == [
        "BIGINT", "VARCHAR", "DECIMAL(12,2)", "TIMESTAMP"
    ]
    assert table.primary_key == ("id",)
    assert table.not_null == frozenset({"customer"})
    assert table.required == frozenset({"id", "customer"})


def test_create_table_level_composite_primary_key():
    table = one(
        "CREATE TABLE lines (order_id BIGINT, line INTEGER, sku TEXT NOT NULL, qty INT, "
        "PRIMARY KEY (order_id, line))"
    ).table
    assert table.primary_key == ("order_id", "line")
    assert table.not_null == frozenset({"sku"})
    assert table.schema.names == ["order_id", "line", "sku", "qty"]
    assert duckdb_type(table.schema.type_of("order_id")) == "BIGINT"
    assert duckdb_type(table.schema.type_of("line")) == "INTEGER"
    assert duckdb_type(table.schema.type_of("sku")) == "VARCHAR"


def test_create_table_without_key():
    table = one("CREATE TABLE bag (v DOUBLE, b BOOLEAN, d DATE)").table
    assert table.primary_key == ()
    assert table.not_null == frozenset()
    assert [c.name for c in table.schema.columns] == ["v", "b", "d"]


def test_create_table_if_not_exists():
    statement = one("CREATE TABLE IF NOT EXISTS t (id BIGINT)")
    assert isinstance(statement, CreateTable)
    assert statement.if_not_exists


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT PRIMARY KEY)",
        "CREATE TABLE t (id BIGINT PRIMARY KEY, PRIMARY KEY (id))",
        "CREATE TABLE t (id BIGINT, PRIMARY KEY (nope))",
        "CREATE TABLE t (id BIGINT, ID VARCHAR)",
        "CREATE TABLE t (__w BIGINT)",
        "CREATE TABLE t (",
    ],
)
def test_invalid_create_table_is_sql_error(sql):
    with pytest.raises(SqlError):
        parse_script(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE t (id BIGINT UNIQUE)",
        "CREATE TABLE t (id BIGINT DEFAULT 1)",
        "CREATE TABLE t AS SELECT 1 AS x",
        "CREATE TABLE s.t (id BIGINT)",
        "CREATE INDEX i ON t (id)",
        "INSERT INTO t VALUES (1)",
        "DROP SCHEMA s",
    ],
)
def test_unsupported_statements(sql):
    with pytest.raises(UnsupportedSQL):
        parse_script(sql)


def test_create_view_and_materialized_view():
    view, mat = parse_script(
        "CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a;\n"
        "CREATE MATERIALIZED VIEW m AS SELECT DISTINCT a FROM t"
    )
    assert isinstance(view, CreateView) and isinstance(mat, CreateView)
    assert view.name == "v"
    assert mat.name == "m"
    assert "COUNT(*)" in view.sql.upper() and "GROUP BY" in view.sql.upper()
    assert view.sql.upper().startswith("SELECT")
    assert "DISTINCT" in mat.sql.upper()
    assert not view.or_replace and not view.if_not_exists


def test_create_or_replace_and_if_not_exists_view():
    replace, keep = parse_script(
        "CREATE OR REPLACE VIEW v AS SELECT 1 AS x FROM t; "
        "CREATE VIEW IF NOT EXISTS w AS SELECT 1 AS x FROM t"
    )
    assert replace.or_replace and not replace.if_not_exists
    assert keep.if_not_exists and not keep.or_replace


def test_view_with_column_list_is_unsupported():
    with pytest.raises(UnsupportedSQL):
        parse_script("CREATE VIEW v (a, b) AS SELECT x, y FROM t")


def test_drop_statements():
    statements = parse_script(
        "DROP VIEW v; DROP TABLE t; DROP VIEW IF EXISTS w; DROP TABLE IF EXISTS u"
    )
    assert statements == [
        Drop("VIEW", "v", False),
        Drop("TABLE", "t", False),
        Drop("VIEW", "w", True),
        Drop("TABLE", "u", True),
    ]


def test_drop_several_objects_is_unsupported():
    with pytest.raises(UnsupportedSQL):
        parse_script("DROP TABLE a, b")


def test_script_order_is_kept_and_empty_script_is_empty():
    kinds = [type(s).__name__ for s in parse_script(
        "CREATE TABLE t (id BIGINT); CREATE VIEW v AS SELECT id FROM t; DROP VIEW v; DROP TABLE t;"
    )]
    assert kinds == ["CreateTable", "CreateView", "Drop", "Drop"]
    assert parse_script("") == []
    assert parse_script("  ;  ") == []


def test_unparseable_view_query_is_sql_error():
    with pytest.raises(SqlError):
        parse_script("CREATE VIEW v AS SELEC * FROM t")


def test_create_view_records_where_its_query_starts_in_the_script():
    script = (
        "CREATE TABLE t (a INTEGER);\n"
        "CREATE VIEW v AS SELECT a FROM t;\n"
        "  create materialized view w as\n"
        "    -- a comment\n"
        "    SELECT a + 1 AS b FROM t\n"
    )
    _, v, w = parse_script(script)
    assert v.sql == "SELECT a FROM t"
    assert (v.origin.line, v.origin.column) == (2, 18)
    assert script[v.origin.offset :].startswith(v.sql)
    assert w.sql == "SELECT a + 1 AS b FROM t"
    assert (w.origin.line, w.origin.column) == (5, 5)
    assert script[w.origin.offset :].startswith(w.sql)


def test_view_text_is_the_users_own():
    (view,) = parse_script("CREATE VIEW v AS SELECT substr(s, 1) , COUNT( * ) FROM t GROUP BY 1")
    assert view.sql == "SELECT substr(s, 1) , COUNT( * ) FROM t GROUP BY 1"


@pytest.mark.parametrize(
    ("script", "error", "at"),
    [
        ("CREATE TABLE a (x INT);\nCREATE INDEX i ON t (id)", UnsupportedSQL, "CREATE INDEX"),
        ("CREATE TABLE t (\n  id BIGINT UNIQUE)", UnsupportedSQL, "UNIQUE"),
        ("CREATE TABLE t (\n  id BIGINT DEFAULT 1)", UnsupportedSQL, "DEFAULT 1"),
        ("CREATE TABLE t (id BIGINT, CHECK (id > 0))", UnsupportedSQL, "CHECK"),
        ("CREATE TABLE t (\n  a INT,\n  A INT)", SqlError, "A INT"),
        ("CREATE TABLE t (a INT, PRIMARY KEY (nope))", SqlError, "PRIMARY KEY (nope)"),
        ("DROP VIEW v;\nCREATE TABLE __ivm_x (a INT)", SqlError, "__ivm_x"),
        ("DROP VIEW v;\n  INSERT INTO t VALUES (1)", UnsupportedSQL, "INSERT"),
        ("CREATE VIEW v (a, b) AS SELECT x, y FROM t", UnsupportedSQL, "v (a, b)"),
        ("DROP TABLE a;\nDROP TABLE s.t", UnsupportedSQL, "s.t"),
    ],
)
def test_statement_errors_point_into_the_script(pointed_at, script, error, at):
    with pytest.raises(error) as info:
        parse_script(script)
    assert pointed_at(str(info.value), script).startswith(at), str(info.value)
