"""LIMIT / OFFSET without ORDER BY where it cannot choose between rows.

A LIMIT k over a relation the plan proves holds at most k rows (an aggregate without
GROUP BY, a cross join of such, VALUES, SELECT without FROM, an inner ORDER BY … LIMIT,
UNION ALL of bounded parts) keeps them all, so the view is deterministic and the LIMIT
is dropped; LIMIT 0 and an OFFSET past the bound keep none. TPC-DS q28, q32, q38 and
q97 have these shapes. Everything else is refused by name, saying why. Random CDC
epochs against DuckDB's recomputation (both modes) and the refusals by hand.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.harness import MODES, run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

ITEMS = "CREATE TABLE items (id INTEGER PRIMARY KEY, code VARCHAR, qty INTEGER)"
EDGES = "CREATE TABLE edges (src INTEGER, dst INTEGER)"

VIEWS = {
    # q28: a cross join of ungrouped aggregates, COUNT(DISTINCT) among them.
    "cross_aggs": "SELECT * FROM (SELECT avg(qty) AS a, count(qty) AS n, "
                  "count(DISTINCT qty) AS d FROM items WHERE qty > 1) b1, "
                  "(SELECT max(src) AS m, count(*) AS c FROM edges WHERE dst <= 2) b2 LIMIT 100",
    # q32: an ungrouped aggregate under a correlated scalar subquery's filter.
    "correlated": "SELECT sum(i.qty) AS s FROM items i WHERE i.qty > (SELECT avg(i2.qty) "
                  "FROM items i2 WHERE i2.code = i.code) - 1 LIMIT 100",
    # q38: COUNT(*) over an INTERSECT of DISTINCTs.
    "count_intersect": "SELECT count(*) AS n FROM (SELECT DISTINCT qty FROM items INTERSECT "
                       "SELECT DISTINCT src FROM edges) hot LIMIT 100",
    # q97: sums over a FULL JOIN of two grouped CTEs.
    "full_join_sums": "WITH a AS (SELECT qty AS k FROM items GROUP BY qty), "
                      "b AS (SELECT src AS k FROM edges GROUP BY src) "
                      "SELECT sum(CASE WHEN b.k IS NULL THEN 1 ELSE 0 END) AS only_a, "
                      "sum(CASE WHEN a.k IS NULL THEN 1 ELSE 0 END) AS only_b "
                      "FROM a FULL OUTER JOIN b ON a.k = b.k LIMIT 100",
    "exact_bound": "SELECT count(*) AS n, sum(qty) AS s FROM items LIMIT 1",
    "having": "SELECT count(*) AS n FROM items HAVING count(*) > 1 LIMIT 1 OFFSET 0",
    "union_all": "SELECT count(*) AS n FROM items UNION ALL SELECT count(*) FROM edges LIMIT 2",
    "inner_top": "SELECT * FROM (SELECT id FROM items ORDER BY qty, id LIMIT 2) t LIMIT 3",
    "limit_zero": "SELECT id FROM items LIMIT 0",
    "offset_past": "SELECT count(*) AS n FROM items OFFSET 1",
    "scalar": "SELECT id, (SELECT count(*) FROM edges e WHERE e.src = items.id LIMIT 1) AS n "
              "FROM items",
    "lateral": "SELECT i.id, s.n FROM items i, LATERAL (SELECT count(*) AS n, max(e.dst) AS m "
               "FROM edges e WHERE e.src = i.id LIMIT 1) s",
    "constants": "SELECT * FROM (SELECT 1 AS x UNION ALL SELECT 2) c, "
                 "(VALUES ('a'), ('b')) v(y) LIMIT 4",
}


@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_deterministic_limits_under_random_cdc(data: st.DataObject) -> None:
    run_workload([ITEMS, EDGES], VIEWS, data, epochs=8, modes=(*MODES, "clear"))


def test_a_provable_limit_is_dropped() -> None:
    with ivm.connect() as db:
        db.execute(f"{ITEMS}; {EDGES}; CREATE VIEW q AS {VIEWS['cross_aggs']}")
        assert "TopK" not in db.explain("q")
        db.ingest("items", [{"id": 1, "code": "x", "qty": 2}, {"id": 2, "code": "y", "qty": 3}])
        assert db.read("q").num_rows == 1
        assert db.read("q").column("n").to_pylist() == [2]


REFUSED = {
    "SELECT id FROM items LIMIT 1": "any number of rows",
    "SELECT * FROM (VALUES (1), (2), (3)) v(x) LIMIT 2": "up to 3 rows",
    "SELECT qty, count(*) FROM items GROUP BY qty LIMIT 1": "any number of rows",
    "SELECT count(*) AS n FROM items UNION ALL SELECT 1 LIMIT 1": "up to 2 rows",
    "SELECT * FROM (SELECT 1 AS x UNION ALL SELECT 2) c OFFSET 1": "up to 2 rows",
    "SELECT i.id, s.dst FROM items i, LATERAL (SELECT e.dst FROM edges e "
    "WHERE e.src = i.id LIMIT 1) s": "any number of rows",
    "SELECT * FROM items, (SELECT count(*) AS n FROM edges) c LIMIT 5": "any number of rows",
}


@pytest.mark.parametrize("query", list(REFUSED))
def test_a_limit_that_chooses_rows_is_refused_by_name(query: str) -> None:
    with ivm.connect() as db:
        db.execute(f"{ITEMS}; {EDGES}")
        with pytest.raises(ivm.UnsupportedSQL) as error:
            db.execute(f"CREATE VIEW v AS {query}")
    message = str(error.value)
    assert "LIMIT / OFFSET without ORDER BY (at line 1, column" in message
    assert REFUSED[query] in message and "arbitrary rows" in message


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_deterministic_limits_on_spark(data: st.DataObject, spark: Any,
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("spark-limit")
    names = ("cross_aggs", "lateral")
    run_workload([ITEMS, EDGES], {n: VIEWS[n] for n in names}, data, epochs=3,
                 connect=lambda: ivm.connect(directory, spark=spark,
                                             partitions=SPARK_PARTITIONS))
