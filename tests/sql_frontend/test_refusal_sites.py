"""Every construct ivm refuses names itself and where it is in the user's SQL.

One refused statement per refusal site of the front end that a user can reach (the
``UnsupportedSQL`` raises in ``sql_frontend/``), each run through a session as a user
would run it: the error is an ``UnsupportedSQL`` whose message carries the construct in
the user's terms and a ``line L, column C`` position.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

import ivm

SCHEMA = """
CREATE TABLE t (k INTEGER PRIMARY KEY, a INTEGER, b INTEGER, s VARCHAR, l INTEGER[],
                ts TIMESTAMP, d DOUBLE);
CREATE TABLE u (k INTEGER PRIMARY KEY, a INTEGER, ts TIMESTAMP, s VARCHAR);
"""

REFUSED: list[tuple[str, str]] = [
    # (statement or query, the construct its message must name)
    # planner/unsupported.py
    ("SELECT * FROM t POSITIONAL JOIN u", "POSITIONAL JOIN"),
    ("SELECT t.a FROM t RIGHT JOIN u ON t.k = u.k JOIN t AS t2 USING (k)",
     "USING after a RIGHT or FULL JOIN"),
    ("SELECT t.a FROM t FULL JOIN u ON t.k = u.k NATURAL JOIN t AS t2",
     "NATURAL JOIN after a RIGHT or FULL JOIN"),
    ("SELECT * FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '2020-01-01'", "FOR SYSTEM_TIME AS OF"),
    ("SELECT random() AS r FROM t", "non-deterministic function"),
    ("SELECT a, now() AS n FROM t", "non-deterministic function"),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
     "CYCLE n SET seen USING path SELECT * FROM r", "CYCLE clause"),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
     "SEARCH DEPTH FIRST BY n SET ord SELECT * FROM r", "SEARCH clause"),
    # planner/table_functions.py
    ("SELECT * FROM read_csv('x.csv')", "table function read_csv"),
    ("SELECT * FROM unknown_table_function(1)", "table function unknown_table_function"),
    ("SELECT * FROM duckdb_tables()", "table function duckdb_tables"),
    ("SELECT t.a, r.x FROM t, repeat(t.a, 2) AS r(x)", "table function repeat"),
    # planner/aggregate_calls.py
    ("SELECT approx_count_distinct(a) FROM t", "aggregate function"),
    ("SELECT quantile_cont(a, b / 10) FROM t", "QUANTILE_CONT with a non-constant argument"),
    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a DESC) FROM t", "WITHIN GROUP"),
    ("SELECT sum(a) WITHIN GROUP (ORDER BY a) FROM t", "WITHIN GROUP"),
    ("SELECT arg_min(DISTINCT a, b) FROM t", "(DISTINCT"),
    ("SELECT sum(a ORDER BY b) FROM t", "ORDER BY inside"),
    ("SELECT string_agg(s, ',') FROM t", "without ORDER BY"),
    ("SELECT any_value(a) FROM t GROUP BY b", "ANY_VALUE"),
    # planner/windows.py
    ("SELECT k FROM t ORDER BY rank() OVER (ORDER BY a)", "window function in ORDER BY"),
    ("SELECT mode(a) OVER (ORDER BY k) FROM t", "over a window"),
    ("SELECT fill(a) OVER (ORDER BY k) FROM t", "window function"),
    ("SELECT lag(a ORDER BY b) OVER (ORDER BY k) FROM t", "LAG with these arguments"),
    ("SELECT sum(a) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW "
     "EXCLUDE GROUP) FROM t", "ROWS frame with EXCLUDE GROUP"),
    # planner/top_k.py
    ("SELECT a FROM t LIMIT 2", "LIMIT / OFFSET without ORDER BY"),
    ("SELECT a FROM t ORDER BY a LIMIT 10 PERCENT", "PERCENT"),
    ("SELECT a FROM t ORDER BY a FETCH FIRST 2 ROWS WITH TIES", "WITH TIES"),
    ("SELECT a FROM t ORDER BY a LIMIT (SELECT 2)", "LIMIT / OFFSET count"),
    # planner/decorrelate.py
    ("SELECT k FROM t WHERE a IN (SELECT x.a FROM u x WHERE x.k = t.k "
     "UNION SELECT 1)", "correlated set operation"),
    ("SELECT k, (SELECT x.a FROM u x WHERE x.k = t.k ORDER BY x.a LIMIT 1) AS f FROM t",
     "correlated LIMIT / OFFSET"),
    ("SELECT k FROM t WHERE EXISTS (SELECT 1 FROM u x WHERE x.a = "
     "(SELECT max(y.a) FROM u y WHERE y.k = t.k))", "correlated"),
    ("SELECT k FROM t WHERE a > (SELECT x.a + t.b FROM u x WHERE x.k = t.k)",
     "correlated reference"),
    ("SELECT k FROM t WHERE EXISTS (SELECT x.k FROM u x WHERE x.k = t.k GROUP BY x.k)",
     "correlated subquery with GROUP BY or aggregates"),
    ("SELECT k, (SELECT max(x.a) FROM u x WHERE x.k = t.k GROUP BY x.s) AS n FROM t",
     "correlated subquery with GROUP BY"),
    ("SELECT k, (SELECT row_number() OVER () FROM u x WHERE x.k = t.k) AS n FROM t",
     "in a correlated subquery"),
    # planner/subqueries.py
    ("SELECT k, (a, b) IN (SELECT a, k FROM u) AS f FROM t", "multi-column IN as a value"),
    # planner/lateral.py, dependent_join.py
    ("SELECT t.k, x.n FROM t RIGHT JOIN LATERAL (SELECT t.a + 1 AS n) AS x ON true",
     "JOIN of a lateral item"),
    ("SELECT t.k, x.n FROM t, LATERAL (SELECT count(*) AS n, count(*) AS n FROM u "
     "WHERE u.a = t.a) AS x", "LATERAL subquery"),
    ("SELECT t.k, x.a FROM t, LATERAL (SELECT y.a FROM u y RIGHT JOIN u z ON y.k = z.k "
     "WHERE y.a = t.a) AS x", "inside a correlated LATERAL subquery"),
    ("SELECT t.k, x.a FROM t, LATERAL (SELECT y.a FROM (SELECT * FROM u WHERE u.a = t.a) y) "
     "AS x", "inside a derived table or CTE of a LATERAL subquery"),
    ("SELECT t.k, x.a FROM t, LATERAL (SELECT y.a, count(*) FROM u y WHERE y.a < t.a "
     "GROUP BY ROLLUP (y.a)) AS x", "ROLLUP"),
    ("SELECT t.k, x.n FROM t, LATERAL (SELECT count(*) AS n, row_number() OVER () AS r "
     "FROM u y WHERE y.a < t.a) AS x", "window function"),
    ("SELECT * FROM t, LATERAL generate_series(1, t.a) WITH ORDINALITY AS g(x, i)",
     "LATERAL generate_series WITH ORDINALITY"),
    ("SELECT * FROM generate_series(1, t.a) AS g(x), t", "correlated reference"),
    ("SELECT t.k, x.a FROM t, LATERAL (SELECT u.a FROM u WHERE u.a = t.a LIMIT 1) AS x",
     "LIMIT / OFFSET without ORDER BY"),
    # planner/unnest_select.py
    ("SELECT DISTINCT ON (k) k, unnest(l) AS x FROM t", "UNNEST with DISTINCT ON"),
    ("SELECT k, unnest({'p': a, 'q': b}) FROM t ORDER BY k LIMIT 2",
     "UNNEST of a STRUCT with ORDER BY"),
    ("SELECT k, unnest({'p': a, 'q': b}) + 1 AS x FROM t", "UNNEST of a STRUCT"),
    # planner/values.py
    ("SELECT * FROM (VALUES ((SELECT 1))) v(x)", "subquery in VALUES"),
    ("SELECT k FROM t WHERE a IN (VALUES (b))", "column reference in VALUES"),
    ("SELECT * FROM main.t", "schema-qualified table name"),
    # planner/temporal_joins.py, asof_joins.py
    ("SELECT t.k FROM t FULL JOIN u FOR SYSTEM_TIME AS OF PROCTIME() ON t.k = u.k",
     "temporal"),
    ("SELECT t.k FROM t ASOF RIGHT JOIN u ON t.ts >= u.ts", "ASOF RIGHT JOIN"),
    ("SELECT t.k FROM t ASOF JOIN u ON t.ts >= u.ts + INTERVAL 1 DAY", "ASOF JOIN"),
    ("SELECT t.k FROM t ASOF JOIN u ON t.ts >= u.ts AND t.a <> u.a", "ASOF JOIN"),
    ("SELECT t.k FROM t ASOF JOIN u ON t.ts >= u.ts AND t.a < u.a", "ASOF JOIN"),
    ("SELECT t.k FROM t ASOF JOIN u ON t.ts >= u.ts AND t.a IS NOT DISTINCT FROM u.a",
     "ASOF JOIN"),
    ("SELECT t.k FROM t LEFT SEMI JOIN u ON t.k = u.k", "LEFT SEMI JOIN"),
    ("SELECT arg_min(a) FROM t", "ARG_MIN with 1 argument"),
    ("SELECT sum(*) FROM t", "SUM(*)"),
    ("SELECT string_agg(s, ',' ORDER BY s LIMIT 1) FROM t", "LIMIT inside STRING_AGG"),
    # planner/recursive.py
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3 "
     "ORDER BY 1 LIMIT 2) SELECT * FROM r", "recursive CTE 'r'"),
    ("WITH RECURSIVE r(n) AS (SELECT 1 AS n UNION ALL BY NAME SELECT n + 1 AS n FROM r "
     "WHERE n < 3) SELECT * FROM r", "recursive CTE 'r'"),
    ("WITH RECURSIVE r(n) USING KEY (n) AS (SELECT 1 UNION SELECT n + 1 FROM r "
     "WHERE n < 3) SELECT * FROM r", "recursive CTE 'r'"),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3 "
     "QUALIFY row_number() OVER (ORDER BY n) = 1) SELECT * FROM r", "recursive CTE 'r'"),
    # planner/pivot.py
    ("PIVOT t ON s USING sum(a)", "PIVOT"),
    # statements.py
    ("CREATE TEMPORARY TABLE x (a INTEGER)", "CREATE TEMPORARY TABLE"),
    ("CREATE INDEX i ON t (a)", "CREATE INDEX"),
    ("DROP SCHEMA s", "DROP SCHEMA"),
    ("DROP TABLE t, u", "DROP of several objects"),
    ("ALTER TABLE t ADD COLUMN x INTEGER, ADD COLUMN y INTEGER", "ALTER TABLE with several"),
    ("ALTER TABLE t ADD COLUMN x INTEGER NOT NULL", "constraint of an added column"),
    ("ALTER TABLE t ALTER COLUMN a SET DEFAULT 1", "ALTER TABLE t"),
    ("CREATE TABLE main.x (a INTEGER)", "qualified name"),
    ("INSERT INTO t VALUES (1, 2, 3, 'a', [], NULL, 1.0)", "INSERT statement"),
    ("REFRESH TABLE t", "REFRESH"),
    ("CREATE VIEW w (x) AS SELECT a FROM t", "view column list"),
    ("CREATE TABLE x AS SELECT 1 AS a", "CREATE TABLE AS"),
    ("CREATE TABLE x (a INTEGER UNIQUE)", "column constraint"),
    ("CREATE TABLE x (a INTEGER, UNIQUE (a))", "table constraint"),
]


@pytest.fixture(scope="module")
def db() -> Iterator[ivm.Session]:
    """One session over SCHEMA for every case (a refused statement changes nothing)."""
    with ivm.connect() as session:
        session.execute(SCHEMA)
        yield session


@pytest.mark.parametrize(("statement", "construct"), REFUSED)
def test_a_refusal_names_the_construct_and_where_it_is(
    db: ivm.Session, statement: str, construct: str
) -> None:
    first = statement.lstrip().split(None, 1)[0].upper()
    script = statement if first in ("CREATE", "DROP", "ALTER", "INSERT", "REFRESH") else (
        f"CREATE VIEW v AS {statement}")
    with pytest.raises(ivm.UnsupportedSQL) as error:
        db.execute(script)
    message = str(error.value)
    assert construct.lower() in message.lower(), message
    assert re.search(r"line \d+, column \d+", message), message
