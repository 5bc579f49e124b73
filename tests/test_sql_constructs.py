"""Every supported SQL construct under random CDC, checked against DuckDB after every epoch.

Each case is a set of views over a few of the tables below; ``run_workload``
(tests/oracle/harness.py) drives random epochs through ``ivm`` and compares each
view with DuckDB's recomputation, the deltas with the contents, and the epoch
counter. A case gets EXAMPLES random workloads of EPOCHS epochs (hypothesis' simplest
example, every draw its least, is rejected), derandomized so CI sees the same workloads
every run; ``make test`` runs one, each of its first epochs (``oracle/settings.py``).
Failures are not shrunk unless IVM_SHRINK=1.
"""

from __future__ import annotations

import datetime
import os
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from oracle.harness import FUSED_MODES, MODES, Epoch, Harness, run_workload
from oracle.settings import DEEP, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

ORDERS = (
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DECIMAL(12,2), "
    "qty INTEGER, ts TIMESTAMP)"
)
CUSTOMERS = "CREATE TABLE customers (name VARCHAR PRIMARY KEY, region VARCHAR)"
EVENTS = "CREATE TABLE events (k INTEGER, v DOUBLE, tag VARCHAR)"

EXAMPLES = examples(2)
EPOCHS = 15

# Shrinking a failing 70-epoch workload can take hypothesis minutes per test; the
# suite skips it (a failure still prints every epoch drawn). IVM_SHRINK=1 shrinks.
PHASES = tuple(Phase) if os.environ.get("IVM_SHRINK") else (Phase.generate,)

RANDOM_CDC = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CASES: dict[str, tuple[list[str], dict[str, str]]] = {
    "arithmetic": ([ORDERS, EVENTS], {
        "order_math": "SELECT id, amount * qty AS total, qty + 1 AS next_qty, "
                      "qty * 2 - id AS mixed, amount / 4 AS quarter, -qty AS neg, "
                      "qty % 3 AS m, id // 3 AS third, abs(amount) AS mag, "
                      "round(amount * 1.5, 1) AS r FROM orders",
        "event_math": "SELECT k * 2 + 1 AS k2, v * 3 AS v3, v + k AS vk, tag FROM events",
    }),
    "case_cast_coalesce": ([ORDERS], {
        "order_kinds": "SELECT id, "
                       "CASE WHEN qty > 3 THEN 'big' WHEN qty IS NULL THEN 'none' "
                       "ELSE 'small' END AS size, "
                       "CASE customer WHEN 'a' THEN 1 WHEN 'b' THEN 2 ELSE 0 END AS code, "
                       "CAST(qty AS VARCHAR) AS qty_text, CAST(amount AS DOUBLE) AS amount_d, "
                       "CAST(ts AS DATE) AS day, COALESCE(customer, 'nobody') AS who, "
                       "COALESCE(qty, id, 0) AS q, NULLIF(qty, 0) AS nz, "
                       "qty IS NULL AS no_qty FROM orders",
    }),
    "string_functions": ([ORDERS, CUSTOMERS], {
        "order_strings": "SELECT id, upper(customer) AS up, lower(customer) AS low, "
                         "concat(customer, '-', qty) AS label, customer || '!' AS bang, "
                         "substr(customer, 1, 1) AS initial, length(customer) AS len, "
                         "replace(customer, 'a', 'x') AS rep, customer LIKE 'a%' AS starts_a, "
                         "trim(concat(' ', customer, ' ')) AS trimmed FROM orders",
        "customer_labels": "SELECT upper(name) || '/' || coalesce(region, '?') AS label "
                           "FROM customers",
    }),
    "date_functions": ([ORDERS], {
        "order_dates": "SELECT id, date_trunc('month', ts) AS month, "
                       "date_trunc('day', ts) AS day, date_trunc('hour', ts) AS hour, "
                       "extract(year FROM ts) AS y, extract(month FROM ts) AS mo, "
                       "extract(hour FROM ts) AS h, date_part('dow', ts) AS dow, "
                       "ts + INTERVAL 1 DAY AS tomorrow, strftime(ts, '%Y-%m') AS ym, "
                       "CAST(ts AS DATE) - DATE '2024-01-01' AS days FROM orders",
    }),
    "where": ([ORDERS, EVENTS], {
        "busy": "SELECT * FROM orders WHERE (qty > 2 AND customer IS NOT NULL) OR amount < 0",
        "ab": "SELECT id, customer FROM orders "
              "WHERE customer IN ('a', 'b') AND qty BETWEEN 1 AND 4",
        "positive": "SELECT * FROM events WHERE v > 0.4 AND tag <> 'a'",
        "tagged": "SELECT k, tag FROM events WHERE tag LIKE 'a%' OR k IS NULL OR NOT (k = 2)",
    }),
    "join_two": ([ORDERS, CUSTOMERS, EVENTS], {
        "with_region": "SELECT o.id, o.amount, c.name, c.region "
                       "FROM orders AS o JOIN customers AS c ON o.customer = c.name",
        "comma_join": "SELECT o.id, c.region FROM orders o, customers c "
                      "WHERE o.customer = c.name",
        "events_orders": "SELECT e.k, e.v, o.id FROM events e JOIN orders o ON e.k = o.qty",
    }),
    "join_non_equi": ([ORDERS, CUSTOMERS, EVENTS], {
        "on_and_where": "SELECT o.id, c.region FROM orders o JOIN customers c "
                        "ON o.customer = c.name AND o.qty > 1 WHERE c.region <> o.customer",
        "cheaper_events": "SELECT e.k, e.v, o.id, o.amount FROM events e JOIN orders o "
                          "ON e.k = o.qty AND e.v < o.amount",
    }),
    "join_three": ([ORDERS, CUSTOMERS, EVENTS], {
        "three": "SELECT o.id, c.region, e.v FROM orders o "
                 "JOIN customers c ON o.customer = c.name "
                 "JOIN events e ON e.k = o.qty AND e.tag = c.region",
        "three_where": "SELECT o.id, c.name, e.k, e.tag FROM orders o "
                       "JOIN customers c ON o.customer = c.name "
                       "JOIN events e ON e.k = o.qty WHERE e.v < o.amount AND c.region IS NOT NULL",
    }),
    "self_join": ([ORDERS, EVENTS], {
        "event_pairs": "SELECT a.k, a.v, b.v AS v2 FROM events a JOIN events b "
                       "ON a.k = b.k AND a.v < b.v",
        "tag_pairs": "SELECT a.tag, b.tag AS tag2 FROM events a JOIN events b ON a.k = b.k",
        "order_pairs": "SELECT o1.id, o2.id AS other FROM orders o1 JOIN orders o2 "
                       "ON o1.customer = o2.customer AND o1.id < o2.id",
    }),
    "group_by": ([ORDERS, EVENTS], {
        "per_customer": "SELECT customer, COUNT(*) AS n, COUNT(qty) AS nq, SUM(amount) AS total, "
                        "SUM(qty) AS sq, AVG(qty) AS aq, AVG(amount) AS aa, MIN(amount) AS lo, "
                        "MAX(ts) AS latest, MIN(customer) AS mc FROM orders GROUP BY customer",
        "per_k_tag": "SELECT k, tag, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, AVG(v) AS av, "
                     "MIN(v) AS lo, MAX(v) AS hi FROM events GROUP BY k, tag",
    }),
    "having": ([ORDERS, EVENTS], {
        "repeat_customers": "SELECT customer, COUNT(*) AS n, SUM(amount) AS total FROM orders "
                            "GROUP BY customer HAVING COUNT(*) > 1 AND SUM(qty) >= 3",
        "k_having": "SELECT k, COUNT(*) AS n FROM events GROUP BY k "
                    "HAVING MAX(tag) = 'c' OR COUNT(v) = 0",
        "hidden_aggregate": "SELECT k FROM events GROUP BY k HAVING SUM(k) > 4",
    }),
    "group_by_expression": ([ORDERS, EVENTS], {
        "month_parity": "SELECT date_trunc('month', ts) AS month, qty % 2 AS parity, "
                        "COUNT(*) AS n, SUM(amount) AS total FROM orders "
                        "GROUP BY date_trunc('month', ts), qty % 2",
        "upper_tag": "SELECT upper(tag) AS t, COUNT(*) AS n, SUM(v) AS sv FROM events "
                     "GROUP BY upper(tag)",
        "band": "SELECT CASE WHEN amount > 5 THEN 'high' ELSE 'low' END AS band, "
                "COUNT(*) AS n FROM orders GROUP BY 1",
        "over_aggregates": "SELECT customer, SUM(amount) / COUNT(*) AS mean, "
                           "MAX(qty) - MIN(qty) AS spread FROM orders GROUP BY customer",
    }),
    "distinct": ([ORDERS, CUSTOMERS, EVENTS], {
        "customer_qty": "SELECT DISTINCT customer, qty FROM orders",
        "k_tag": "SELECT DISTINCT k, tag FROM events",
        "positive_tags": "SELECT DISTINCT tag FROM events WHERE v > 0",
        "joined_regions": "SELECT DISTINCT c.region FROM orders o JOIN customers c "
                           "ON o.customer = c.name",
    }),
    "union_all": ([ORDERS, CUSTOMERS, EVENTS], {
        "labels": "SELECT k AS x, tag AS label FROM events "
                  "UNION ALL SELECT qty, customer FROM orders",
        "three_way": "SELECT id AS x FROM orders UNION ALL SELECT k FROM events "
                     "UNION ALL SELECT length(name) FROM customers",
        "numbers": "SELECT v FROM events UNION ALL SELECT amount FROM orders",
    }),
    "union": ([ORDERS, CUSTOMERS, EVENTS], {
        "labels": "SELECT k AS x, tag AS label FROM events UNION SELECT qty, customer FROM orders",
        "names": "SELECT tag FROM events UNION SELECT customer FROM orders "
                 "UNION SELECT region FROM customers",
    }),
    "cte": ([ORDERS, CUSTOMERS, EVENTS], {
        "big_per_customer": "WITH big AS (SELECT * FROM orders WHERE qty > 2) "
                            "SELECT customer, COUNT(*) AS n FROM big GROUP BY customer",
        "used_twice": "WITH e AS (SELECT k, v FROM events WHERE tag IS NOT NULL) "
                      "SELECT a.k, a.v, b.v AS v2 FROM e AS a JOIN e AS b ON a.k = b.k",
        "chained": "WITH t AS (SELECT customer, SUM(amount) AS total FROM orders "
                   "GROUP BY customer), u AS (SELECT * FROM t WHERE total > 0) "
                   "SELECT u.customer, u.total, c.region FROM u JOIN customers c "
                   "ON u.customer = c.name",
        "twice_in_union": "WITH x AS (SELECT k FROM events) "
                          "SELECT k FROM x UNION ALL SELECT k + 1 FROM x",
    }),
    "derived_table": ([ORDERS, CUSTOMERS, EVENTS], {
        "big_totals": "SELECT t.customer, t.total FROM (SELECT customer, SUM(amount) AS total "
                      "FROM orders GROUP BY customer) AS t WHERE t.total > 5",
        "region_counts": "SELECT s.region, COUNT(*) AS n FROM (SELECT c.region, o.id "
                         "FROM orders o JOIN customers c ON o.customer = c.name) s "
                         "GROUP BY s.region",
        "joined_derived": "SELECT e.k, m.top FROM events e JOIN (SELECT qty, MAX(amount) AS top "
                          "FROM orders GROUP BY qty) m ON e.k = m.qty",
    }),
    "order_by": ([ORDERS, EVENTS], {
        "by_amount": "SELECT id, customer, amount FROM orders ORDER BY amount DESC, id",
        "totals": "SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer "
                  "ORDER BY total DESC NULLS LAST",
        "events_by_v": "SELECT * FROM events ORDER BY v",
    }),
    "views_on_views": ([ORDERS, CUSTOMERS], {
        "enriched": "SELECT o.id, o.customer, o.amount, o.qty, c.region "
                    "FROM orders o JOIN customers c ON o.customer = c.name",
        "region_totals": "SELECT region, COUNT(*) AS n, SUM(amount) AS total, "
                         "MAX(qty) AS top_qty FROM enriched GROUP BY region",
        "busy_regions": "SELECT region FROM region_totals WHERE n > 1",
        "customer_totals": "SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer",
        "totals_by_band": "SELECT total > 10 AS big, COUNT(*) AS n FROM customer_totals "
                          "GROUP BY total > 10",
        "joined_views": "SELECT t.customer, t.total, r.n FROM customer_totals t "
                        "JOIN enriched e ON t.customer = e.customer "
                        "JOIN region_totals r ON e.region = r.region",
        "distinct_regions": "SELECT DISTINCT region FROM enriched",
    }),
    "join_shapes": ([ORDERS, CUSTOMERS, EVENTS], {
        "theta": "SELECT e.k, o.id FROM events e JOIN orders o ON e.k > o.qty",
        "crossed": "SELECT c.name, e.tag FROM customers c CROSS JOIN events e",
        "expression_key": "SELECT o.id, c.region FROM orders o JOIN customers c "
                          "ON upper(o.customer) = c.name",
        "or_condition": "SELECT o.id, c.name FROM orders o JOIN customers c "
                        "ON o.customer = c.name OR o.qty = 1",
        "null_safe": "SELECT c.name, e.k FROM customers c JOIN events e "
                     "ON e.tag IS NOT DISTINCT FROM c.region",
        "four_way": "SELECT o.id, c.region, e1.v, e2.tag FROM orders o "
                    "JOIN customers c ON o.customer = c.name JOIN events e1 ON e1.k = o.qty "
                    "JOIN events e2 ON e2.tag = c.region",
    }),
    "aggregate_shapes": ([ORDERS, CUSTOMERS, EVENTS], {
        "of_expressions": "SELECT customer, SUM(amount * qty) AS revenue, "
                          "MAX(CASE WHEN qty > 2 THEN amount END) AS big, COUNT(ts) AS nts "
                          "FROM orders GROUP BY customer",
        "global_over_join": "SELECT COUNT(*) AS n, SUM(o.amount) AS total, MIN(c.region) AS r "
                            "FROM orders o JOIN customers c ON o.customer = c.name",
        "distinct_counts": "SELECT DISTINCT COUNT(*) AS n FROM events GROUP BY k",
        "union_of_aggregates": "SELECT k, COUNT(*) AS n FROM events GROUP BY k "
                               "UNION ALL SELECT qty, COUNT(*) FROM orders GROUP BY qty",
        "over_distinct": "SELECT tag, COUNT(*) AS n FROM (SELECT DISTINCT k, tag FROM events) d "
                         "GROUP BY tag",
        "over_union": "SELECT x, COUNT(*) AS n, SUM(y) AS s FROM (SELECT k AS x, v AS y "
                      "FROM events UNION ALL SELECT qty, CAST(amount AS DOUBLE) FROM orders) u "
                      "GROUP BY x",
        "unaliased": "SELECT customer, count(*), sum(amount), avg(qty), min(ts), "
                     "upper(customer), qty + 1 FROM orders GROUP BY customer, qty",
        "by_double": "SELECT v, COUNT(*) AS n, SUM(k) AS sk FROM events GROUP BY v",
    }),
    "union_widening": ([ORDERS, EVENTS], {
        # The union's type is the common supertype of both sides, not the left side's.
        "int_then_decimal": "SELECT qty AS x FROM orders UNION ALL SELECT amount FROM orders",
        "three_way": "SELECT k FROM events UNION ALL SELECT id FROM orders "
                     "UNION ALL SELECT amount FROM orders",
        "distinct_widening": "SELECT k AS x FROM events UNION SELECT v FROM events",
    }),
    "min_max": ([ORDERS, EVENTS], {
        "order_extremes": "SELECT customer, MIN(amount) AS lo, MAX(amount) AS hi, "
                          "MIN(ts) AS first, MAX(qty) AS most FROM orders GROUP BY customer",
        "event_extremes": "SELECT k, MIN(v) AS lo, MAX(v) AS hi, MIN(tag) AS t FROM events "
                          "GROUP BY k",
        "global_extremes": "SELECT MIN(v) AS lo, MAX(v) AS hi, MAX(tag) AS t FROM events",
    }),
}


@pytest.mark.parametrize("case", list(CASES))
@RANDOM_CDC
@given(data=st.data())
def test_construct(case: str, data: st.DataObject) -> None:
    tables, views = CASES[case]
    run_workload(tables, views, data, epochs=EPOCHS)


GLOBAL_VIEWS = {
    "order_summary": "SELECT COUNT(*) AS n, COUNT(qty) AS nq, SUM(amount) AS total, "
                     "AVG(qty) AS aq, MIN(ts) AS first, MAX(amount) AS top FROM orders",
    "event_summary": "SELECT COUNT(*) AS n, SUM(v) AS sv, MIN(tag) AS lo, MAX(k) AS hi "
                     "FROM events",
    "filtered_count": "SELECT COUNT(*) AS n FROM orders WHERE qty > 2",
    "count_having": "SELECT COUNT(*) AS n FROM orders HAVING COUNT(*) > 2",
    "summary_math": "SELECT COUNT(*) + 1 AS n1, COALESCE(SUM(v), 0) AS sv0 FROM events",
}


@RANDOM_CDC
@given(data=st.data())
def test_global_aggregate(data: st.DataObject) -> None:
    # Tables are emptied often ("clear" without refill half the time), so the
    # one-row-over-an-empty-table case comes and goes.
    run_workload([ORDERS, EVENTS], GLOBAL_VIEWS, data, epochs=EPOCHS,
                 modes=(*MODES, "clear", "clear"))


# --- MIN/MAX when the current extreme goes: scripted, every step checked --------------------

T1 = datetime.datetime(2024, 1, 1, 9, 0)
T2 = datetime.datetime(2024, 1, 2, 9, 0)


def test_min_max_when_the_extreme_is_deleted() -> None:
    harness = Harness([ORDERS, EVENTS])
    try:
        harness.create_views({
            "event_extremes": "SELECT k, MIN(v) AS lo, MAX(v) AS hi, COUNT(*) AS n "
                              "FROM events GROUP BY k",
            "global_extremes": "SELECT MIN(v) AS lo, MAX(v) AS hi, MIN(tag) AS t FROM events",
            "order_extremes": "SELECT customer, MIN(amount) AS lo, MAX(amount) AS hi, "
                              "MAX(ts) AS latest FROM orders GROUP BY customer",
        })
        x, y, z, w = (1, 5.0, "x"), (1, 3.0, "y"), (1, 9.0, "z"), (2, 7.0, "w")
        script = [
            {"events": [("insert", x), ("insert", x), ("insert", y), ("insert", z),
                        ("insert", w)]},
            {"events": [("delete", z)]},                   # the max goes: 5.0 (two copies)
            {"events": [("delete", x)]},                   # one copy of the max goes: still 5.0
            {"events": [("delete", x)]},                   # the last copy: max is 3.0
            {"events": [("delete", y), ("insert", z)]},    # min and max replaced at once
            {"events": [("update", z, (1, 1.0, "a"))]},    # the only row changes value
            {"events": [("delete", (1, 1.0, "a")), ("delete", w)]},   # all gone
            {"orders": [("insert", (1, "a", Decimal("1.00"), 1, T1)),
                        ("insert", (2, "a", Decimal("9.00"), 2, T2)),
                        ("insert", (3, "a", Decimal("9.00"), 3, T1))]},
            {"orders": [("update", (2, "a", Decimal("9.00"), 2, T2),
                         (2, "a", Decimal("0.50"), 2, T1))]},     # max ties, latest moves
            {"orders": [("delete", (3, "a", Decimal("9.00"), 3, T1))]},
            {"orders": [("update", (1, "a", Decimal("1.00"), 1, T1),
                         (1, "b", Decimal("1.00"), 1, T2))]},     # moves to another group
        ]
        formats = ("weighted", "debezium", "delta", "rows")
        for i, ops in enumerate(script):
            harness.apply(Epoch.of(ops, fmt=formats[i % len(formats)], variant=i))
    finally:
        harness.close()


# --- unsupported SQL ---------------------------------------------------------------------

UNSUPPORTED = {
    "asof_right_join": ("SELECT o.id, c.region FROM orders o ASOF RIGHT JOIN customers c "
                        "ON o.customer = c.name AND o.amount >= c.region", "ASOF RIGHT JOIN"),
    "limit_without_order": ("SELECT * FROM orders LIMIT 3", "LIMIT"),
    "window_in_order_by": ("SELECT id FROM orders ORDER BY row_number() OVER (ORDER BY id)",
                           "window function in ORDER BY"),
    "recursive_using_key": ("WITH RECURSIVE r(n) USING KEY (n) AS (SELECT id FROM orders "
                            "UNION SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r",
                            "USING KEY"),
    "unordered_list": ("SELECT customer, STRING_AGG(qty::VARCHAR, ',') AS l FROM orders "
                       "GROUP BY customer", "ORDER BY"),
}


@pytest.mark.parametrize("case", list(UNSUPPORTED))
def test_unsupported_sql_is_rejected(case: str) -> None:
    sql, construct = UNSUPPORTED[case]
    db = ivm.connect()
    try:
        db.execute(f"{ORDERS}; {CUSTOMERS}")
        with pytest.raises(ivm.UnsupportedSQL) as caught:
            db.execute(f"CREATE VIEW v AS {sql}")
        assert construct.lower() in str(caught.value).lower(), (
            f"the error should name {construct!r}: {caught.value}")
        # Nothing was created: the name is free and the session still works.
        db.execute("CREATE VIEW v AS SELECT id FROM orders")
        db.ingest("orders", [{"id": 1, "customer": "a", "amount": Decimal("1.00"), "qty": 1,
                              "ts": T1}])
        assert db.read("v").to_pylist() == [{"id": 1}]
        assert db.epoch == 1
    finally:
        db.close()


# --- column names: a view's columns are named as DuckDB names the same SQL -----------------

ORDER_ROWS = [
    ("insert", (1, "a", Decimal("1.25"), 2, T1)),
    ("insert", (2, None, Decimal("-3.50"), None, T2)),
    ("insert", (3, "b", None, 0, None)),
]

UNALIASED = [
    "count(*)", "sum(amount)", "avg(qty)", "qty + 1", "-qty", "upper(customer)",
    "customer || '!'", "CASE WHEN qty > 1 THEN 1 END", "coalesce(qty, 0)",
    "extract(year FROM ts)", "CAST(qty AS VARCHAR)", "qty::VARCHAR", "substr(customer, 1, 1)",
    "date_trunc('month', ts)", "ts + INTERVAL 1 DAY", "len(customer)", "NULL",
]


@pytest.mark.parametrize("expression", UNALIASED)
def test_unaliased_column_is_named_as_duckdb_names_it(expression: str) -> None:
    harness = Harness([ORDERS])
    try:
        harness.create_views({"v": f"SELECT {expression} FROM orders"})
        harness.apply(Epoch.of({"orders": ORDER_ROWS}))
    finally:
        harness.close()


# --- valid DuckDB SQL is maintained, or refused as UnsupportedSQL (never another error) -----

VALID_SQL = {
    "group_by_all": "SELECT customer, qty, COUNT(*) AS n FROM orders GROUP BY ALL",
    "duplicate_names": "SELECT qty, qty FROM orders",
    "star_self_join": "SELECT * FROM orders a JOIN orders b ON a.customer = b.customer",
    "same_name_twice": "SELECT a.id, b.id FROM orders a JOIN orders b ON a.customer = b.customer",
    "null_literal": "SELECT id, NULL AS nothing FROM orders",
    "group_by_alias": "SELECT qty + 1 AS x, COUNT(*) AS n FROM orders GROUP BY x",
    "having_alias": "SELECT customer, COUNT(*) AS n FROM orders GROUP BY customer HAVING n > 1",
    "order_by_ordinal": "SELECT id, amount FROM orders ORDER BY 2 DESC",
    "order_by_limit": "SELECT id, amount FROM orders ORDER BY id DESC LIMIT 3 OFFSET 1",
    "count_distinct": "SELECT customer, COUNT(DISTINCT qty) AS n FROM orders GROUP BY customer",
    "filtered": "SELECT customer, SUM(amount) FILTER (WHERE qty > 1) AS s FROM orders "
                "GROUP BY customer",
    "natural_join": "SELECT * FROM orders NATURAL JOIN (SELECT id, customer AS c2 FROM orders) x",
    "values": "SELECT o.id, t.v FROM orders o JOIN (VALUES ('a', 1), ('b', NULL), ('b', NULL)) "
              "AS t(k, v) ON o.customer = t.k",
    # ids are unique: no ties, so DuckDB's own answer is the only one (tests/test_windows.py
    # has the rest, ties included)
    "window": "SELECT id, customer, row_number() OVER w AS rn, SUM(qty) OVER (PARTITION BY "
              "customer) AS total, rank() OVER (ORDER BY amount DESC) AS r FROM orders "
              "WINDOW w AS (PARTITION BY customer ORDER BY id)",
    "qualify": "SELECT id, customer, amount FROM orders "
               "QUALIFY row_number() OVER (PARTITION BY customer ORDER BY amount DESC, id) = 1",
    "distinct_on": "SELECT DISTINCT ON (customer) customer, id, qty FROM orders "
                   "ORDER BY customer, qty DESC, id",
    "lateral_values": "SELECT o.id, t.x FROM orders o, (VALUES (o.id), (o.qty)) AS t(x)",
}
"""Valid SQL ivm must maintain: each case runs a random workload and must not be refused."""

REFUSED_SQL = {
    "pivot_without_in": ("PIVOT orders ON customer USING sum(qty)",
                         "PIVOT without an IN list"),
}
"""Valid SQL ivm refuses (for now), with the construct its UnsupportedSQL must name."""


@pytest.mark.parametrize("case", list(VALID_SQL))
@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_valid_sql_is_maintained(case: str, data: st.DataObject) -> None:
    run_workload([ORDERS], {"v": VALID_SQL[case]}, data, epochs=10)


@pytest.mark.parametrize("case", list(REFUSED_SQL))
def test_valid_sql_outside_the_supported_set_is_refused_by_name(case: str) -> None:
    sql, construct = REFUSED_SQL[case]
    with ivm.connect() as db:
        db.execute(ORDERS)
        with pytest.raises(ivm.UnsupportedSQL, match=construct):
            db.execute(f"CREATE VIEW v AS {sql}")
        assert not db.views


# --- SUM/AVG over DOUBLE once a non-finite or huge value is deleted ---------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e17], ids=["nan", "inf", "1e17"])
def test_double_sum_after_deleting_an_extreme_value(value: float) -> None:
    # Recomputation gives SUM = 1.0 once the value is gone; an incremental
    # sum that subtracts it gets NaN (nan, inf - inf) or 0.0 (1e17 + 1 - 1e17).
    harness = Harness([EVENTS])
    try:
        harness.create_views({
            "per_k": "SELECT k, SUM(v) AS s, AVG(v) AS a FROM events GROUP BY k",
            "total": "SELECT SUM(v) AS s FROM events",
        })
        harness.apply(Epoch.of({"events": [("insert", (1, value, "x")),
                                           ("insert", (1, 1.0, "y"))]}))
        harness.apply(Epoch.of({"events": [("delete", (1, value, "x"))]}))
    finally:
        harness.close()


# --- the same constructs in Spark mode ----------------------------------------------------

SPARK_VIEWS: dict[str, list[str]] = {
    # A representative of every construct above (views_on_views in full), all in one
    # Spark-mode session (a Spark epoch's cost is mostly per session and per stage, so
    # one session of every view checks each at the cost of one), checked against DuckDB
    # after every epoch like the rest.
    "arithmetic": ["order_math"],
    "case_cast_coalesce": ["order_kinds"],
    "string_functions": ["order_strings"],
    "date_functions": ["order_dates"],
    "where": ["busy"],
    "join_two": ["with_region"],
    "join_non_equi": ["cheaper_events"],
    "join_three": ["three"],
    "self_join": ["order_pairs"],
    "group_by": ["per_k_tag"],
    "having": ["repeat_customers"],
    "group_by_expression": ["month_parity"],
    "distinct": ["joined_regions"],
    "union_all": ["labels"],
    "union": ["names"],
    "cte": ["chained"],
    "derived_table": ["joined_derived"],
    "order_by": ["totals"],
    "views_on_views": ["enriched", "region_totals", "busy_regions", "customer_totals",
                       "joined_views"],
    "join_shapes": ["theta", "crossed", "four_way", "null_safe"],
    "aggregate_shapes": ["global_over_join", "over_union", "by_double"],
    "union_widening": ["three_way"],
    "min_max": ["order_extremes"],
}
SPARK_EPOCHS = 2 if DEEP else 1
"""Epochs after the views exist, each changing every table (``FUSED_MODES``), so every
view can change in it; the deep profile runs two."""


def _spark_views() -> dict[str, str]:
    """Every case's Spark views, the global aggregates too, by unique names."""
    views = {}
    for case, names in SPARK_VIEWS.items():
        for name in names:
            # views_on_views reads its own views by name; the others get unique names.
            views[name if case == "views_on_views" else f"{case}__{name}"] = CASES[case][1][name]
    return {**views, **{f"global__{name}": sql for name, sql in GLOBAL_VIEWS.items()}}


def test_spark_cases_cover_every_construct() -> None:
    assert set(SPARK_VIEWS) == set(CASES)


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_constructs_on_spark(data: st.DataObject, spark: Any,
                             tmp_path_factory: pytest.TempPathFactory) -> None:
    # Hypothesis tries the simplest workload first (one tiny insert per epoch); Spark
    # epochs cost seconds, so only random workloads are run, each epoch changing every
    # table (FUSED_MODES). A table emptied now and then (without refill half the time)
    # makes the global aggregates' one row over an empty table come and go.
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-constructs")
    run_workload([ORDERS, CUSTOMERS, EVENTS], _spark_views(), data, epochs=SPARK_EPOCHS,
                 shorten=False,
                 modes=FUSED_MODES,
                 connect=lambda: ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS))
