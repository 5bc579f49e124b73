"""What a query may read: ``sql()`` runs one read-only query; a query served to other
processes (``db.serve``) reads only the state's tables and views, never the server's
files or environment (issue #28, item 6)."""

from __future__ import annotations

import pytest

import ivm
from ivm.views.read_queries import check_read_query, check_served_query

NAMES = ("orders", "Revenue")

SERVED = [
    "SELECT * FROM orders",
    "FROM ORDERS",
    "SELECT * FROM main.revenue",
    'SELECT * FROM "Revenue" r JOIN orders o ON r.customer = o.customer',
    "WITH a AS (SELECT * FROM orders) SELECT * FROM a",
    "SELECT * FROM range(3) AS r(x)",
    "SELECT * FROM orders, unnest([1, 2]) AS u(x)",
    "SELECT x FROM generate_series(1, 3) AS g(x) UNION SELECT id FROM orders",
    "SELECT length('read_csv') AS n FROM orders",
]

HOST_READS = [
    ("SELECT * FROM read_csv('/etc/passwd')", "table function read_csv"),
    ("SELECT * FROM read_text('/etc/hostname')", "table function read_text"),
    ("SELECT * FROM '/etc/passwd'", "/etc/passwd"),
    ('SELECT * FROM "data.parquet"', "data.parquet"),
    ("SELECT * FROM (FROM '/etc/passwd')", "/etc/passwd"),
    ("SELECT * FROM orders WHERE id IN (SELECT id FROM read_parquet('x'))", "read_parquet"),
    ("SELECT * FROM parquet_scan('x')", "parquet_scan"),
    ("SELECT * FROM glob('/*')", "glob"),
    ("SELECT * FROM query('SELECT 1')", "query"),
    ("SELECT getenv('HOME') AS h", "getenv"),
    ("SELECT current_setting('temp_directory') AS t", "current_setting"),
    ("SELECT * FROM duckdb_settings()", "duckdb_settings"),
    ("SELECT * FROM __ivm_meta", "__ivm_meta"),
    ("SELECT * FROM information_schema.tables", "information_schema.tables"),
    ("SELECT * FROM other.orders", "other.orders"),
    ("SELECT * FROM nope", "nope"),
]


@pytest.mark.parametrize("query", SERVED)
def test_a_served_query_reads_the_state(query: str) -> None:
    check_served_query(query, NAMES)


@pytest.mark.parametrize(("query", "named"), HOST_READS)
def test_a_served_query_never_reads_the_host(query: str, named: str) -> None:
    check_read_query(query)  # db.sql, the session's own process, runs each of them
    with pytest.raises(ivm.SqlError, match="served query") as raised:
        check_served_query(query, NAMES)
    assert named in str(raised.value)


@pytest.mark.parametrize("query", ["DELETE FROM orders", "COPY orders TO 'x.csv'",
                                   "ATTACH 'x.duckdb'", "SELECT 1; SELECT 2"])
def test_only_one_read_only_query(query: str) -> None:
    with pytest.raises(ivm.SqlError, match="read-only query"):
        check_served_query(query, NAMES)
