"""The planner's second oracle: for aggregate queries over small random tables (NULLs,
duplicates, empty groups), the plan's plain SQL (``plain_sql``) gives the same bag of rows
as DuckDB running the query's own text.

Only where DuckDB's own answer is arbitrary would the two legitimately differ, so the data
leaves no such choice: MODE's column has a different frequency for every value of a group,
ARG_MIN/ARG_MAX order by a column without repeats, and lists are ordered by a unique key or
by the listed value itself. (ivm renders MODE, ARG_MIN and ARG_MAX deterministically: see
``AggregateCall.sql()``.)
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal

import duckdb
import pytest

from ivm.plan.node import plain_sql
from ivm.sql_frontend.planner import plan_query

SEEDS = range(6)

QUERIES = [
    "SELECT g, COUNT(*) AS n, COUNT(x) AS nx, COUNT(DISTINCT x) AS dx, SUM(x) AS sx, "
    "SUM(DISTINCT x) AS sdx, AVG(x) AS ax, MIN(s) AS mins, MAX(d) AS maxd FROM r GROUP BY g",
    "SELECT g, STDDEV(x) AS a, STDDEV_POP(d) AS b, VARIANCE(x) AS c, VAR_POP(y) AS e, "
    "VAR_SAMP(d) AS f, STDDEV_SAMP(y) AS h, BOOL_AND(b) AS i, BOOL_OR(b) AS j FROM r GROUP BY g",
    "SELECT g, MEDIAN(y) AS a, QUANTILE_CONT(x, 0.25) AS b, QUANTILE_DISC(d, [0.1, 0.9]) AS c, "
    "QUANTILE(x, 0.5) AS e, PERCENTILE_CONT(0.75) WITHIN GROUP (ORDER BY y) AS f, "
    "MEAN(d) AS h FROM r GROUP BY g",
    "SELECT g, ARG_MIN(s, u) AS a, ARG_MAX(x, u) AS b, MIN_BY(d, u) AS c, MAX_BY(s, u) AS e "
    "FROM r GROUP BY g",
    "SELECT g, STRING_AGG(s, '|' ORDER BY id) AS a, LIST(x ORDER BY id DESC) AS b, "
    "ARRAY_AGG(DISTINCT s ORDER BY s) AS c, LISTAGG(s ORDER BY s DESC NULLS FIRST) AS e, "
    "LIST(y ORDER BY id NULLS FIRST) AS f, GROUP_CONCAT(s, ', ' ORDER BY s) AS h "
    "FROM r GROUP BY g",
    "SELECT g, SUM(x) FILTER (WHERE b) AS a, COUNT(*) FILTER (WHERE x > 2) AS n, "
    "LIST(s ORDER BY id) FILTER (WHERE b IS NOT TRUE) AS l, "
    "AVG(y) FILTER (WHERE s IN ('a', 'b')) AS v, "
    "COUNT(DISTINCT s) FILTER (WHERE x IS NOT NULL) AS ds, "
    "ARG_MAX(s, u) FILTER (WHERE x < 3) AS am FROM r GROUP BY g",
    "SELECT COUNT(*) AS n, SUM(x) AS s, STRING_AGG(s, ',' ORDER BY id) AS l, MEDIAN(d) AS m, "
    "BOOL_OR(b) AS o FROM r",
    "SELECT COUNT(*) AS n, SUM(x) AS s, LIST(x ORDER BY id) AS l, ARG_MIN(s, u) AS a, "
    "COUNT(x) FILTER (WHERE b) AS f FROM r WHERE x > 1000",
    "SELECT g, SUM(x) * 2 + COUNT(*) AS e, MAX(s) || '!' AS t FROM r GROUP BY g "
    "HAVING COUNT(DISTINCT s) > 1 OR SUM(x) FILTER (WHERE b) > 3",
    "SELECT g % 2 AS p, b, SUM(x) AS s, MIN(y) AS mn FROM r GROUP BY ALL",
    "SELECT r.g, SUM(q.w) AS sw, COUNT(*) AS n, LIST(q.w ORDER BY q.id) AS ws, "
    "MAX_BY(q.w, q.id) AS last_w FROM r JOIN q ON r.g = q.g GROUP BY r.g",
    "SELECT x, COUNT(*) AS n, STRING_AGG(DISTINCT s, ',' ORDER BY s) AS ss, "
    "LIST(DISTINCT d ORDER BY d DESC) AS ds FROM r GROUP BY x",
]

MODE_QUERIES = [
    "SELECT g, MODE(mv) AS m, COUNT(*) AS n FROM r GROUP BY g",
    "SELECT MODE(mv) AS m FROM r",
]


def random_tables(seed: int) -> Iterator[str]:
    """INSERT statements filling ``r`` and ``q`` for ``seed`` (seed 0: empty tables)."""
    rng = random.Random(seed)
    rows = 0 if seed == 0 else rng.randint(1, 40)
    ids = rng.sample(range(1000), rows)
    us = rng.sample(range(1000), rows)
    groups = [rng.choice([0, 1, 2, 3, None]) for _ in range(rows)]

    def maybe(value: object, nulls: float = 0.2) -> object:
        return None if rng.random() < nulls else value

    mode_values = _distinct_frequencies(groups, rng)
    for i in range(rows):
        values = (
            ids[i],
            groups[i],
            maybe(rng.randint(-3, 5)),
            maybe(rng.randint(-8, 8) / 4),
            maybe(Decimal(rng.randint(-400, 400)) / 4),
            maybe(rng.choice("abcde")),
            maybe(rng.choice([True, False])),
            maybe(us[i]),
            mode_values[i],
        )
        yield f"INSERT INTO r VALUES ({', '.join(_literal(v) for v in values)})"
    for i in range(0 if seed == 0 else rng.randint(0, 15)):
        values = (i, rng.choice([0, 1, 2, None]), maybe(rng.randint(0, 9)))
        yield f"INSERT INTO q VALUES ({', '.join(_literal(v) for v in values)})"


def _distinct_frequencies(groups: list[object], rng: random.Random) -> list[object]:
    """MODE's column: within each group, value v appears v times (1, 2, 3…), rest NULL."""
    values: list[object] = [None] * len(groups)
    for group in set(groups):
        members = [i for i, g in enumerate(groups) if g == group]
        rng.shuffle(members)
        value, used = 1, 0
        while used + value <= len(members):
            for i in members[used : used + value]:
                values[i] = value * 10
            used += value
            value += 1
    return values


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return f"'{value}'"
    return str(value).upper() if isinstance(value, bool) else str(value)


def normalized(value: object) -> object:
    """Floats rounded (the same functions over the same rows may still sum in another
    order); lists element by element."""
    if isinstance(value, float):
        return value if math.isnan(value) else round(value, 9)
    if isinstance(value, list):
        return tuple(normalized(v) for v in value)
    return value


def bag(con: duckdb.DuckDBPyConnection, sql: str) -> Counter:
    return Counter(tuple(normalized(v) for v in row) for row in con.execute(sql).fetchall())


@pytest.fixture(params=SEEDS, ids=lambda s: f"seed{s}")
def random_db(request, describer):
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE r (id INTEGER, g INTEGER, x INTEGER, y DOUBLE, d DECIMAL(8,2), "
        "s VARCHAR, b BOOLEAN, u INTEGER, mv INTEGER)"
    )
    con.execute("CREATE TABLE q (id INTEGER, g INTEGER, w INTEGER)")
    for statement in random_tables(request.param):
        con.execute(statement)
    describe = describer(con)
    tables = {name: describe(f"SELECT * FROM {name}") for name in ("r", "q")}
    yield con, tables, describe
    con.close()


@pytest.mark.parametrize("query", QUERIES)
def test_plain_sql_of_the_plan_equals_duckdb(random_db, query):
    con, tables, describe = random_db
    root = plan_query(query, tables, describe)
    assert root.schema.names == [c[0] for c in con.execute(query).description]
    assert bag(con, plain_sql(root)) == bag(con, query)


@pytest.mark.parametrize("query", MODE_QUERIES)
def test_mode_equals_duckdb_when_there_is_no_tie(random_db, query):
    con, tables, describe = random_db
    root = plan_query(query, tables, describe)
    assert bag(con, plain_sql(root)) == bag(con, query)


def test_the_oracle_can_tell_a_wrong_plan(random_db):
    """A sabotaged plan (ORDER BY reversed inside a list) must not pass for a right one."""
    con, tables, describe = random_db
    query = "SELECT g, LIST(x ORDER BY id) AS l FROM r GROUP BY g"
    flipped = query.replace("ORDER BY id", "ORDER BY id DESC")
    rows = con.execute("SELECT COUNT(x) FROM r GROUP BY g HAVING COUNT(x) > 1").fetchall()
    if not rows:
        pytest.skip("no group with two values to order")
    root = plan_query(flipped, tables, describe)
    assert bag(con, plain_sql(root)) != bag(con, query)
