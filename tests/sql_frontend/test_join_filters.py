"""A WHERE over inner joins becomes the join's condition and its inputs' filters
(planner/join_filters.py), and EXISTS (SELECT * …) reads no column (exists_select.py):
the plans say so, and every view equals DuckDB after every epoch of random CDC (NULLs in
every column, few key values), embedded and in Spark mode."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.harness import run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

TABLES = [
    "CREATE TABLE l (k INTEGER, x INTEGER, s VARCHAR)",
    "CREATE TABLE r (k INTEGER, y INTEGER, s VARCHAR)",
    "CREATE TABLE m (k INTEGER, z INTEGER)",
]
DOMAINS = {"l.k": (1, 2, 3), "r.k": (1, 2, 3), "m.k": (1, 2, 3), "l.s": ("a", "b"),
           "r.s": ("a", "b"), "l.x": (0, 1, 2), "r.y": (0, 1, 2, 5), "m.z": (0, 1, 2)}
VIEWS = {
    "chain": "SELECT l.x, r.y, m.z FROM l, r, m WHERE l.k = r.k AND r.k = m.k AND m.z > 0",
    "two_keys": "SELECT l.x, r.y FROM l, r WHERE l.k = r.k AND l.s = r.s",
    "residual": "SELECT l.k, r.y FROM l, r WHERE l.k = r.k AND l.x < r.y AND 1 = 1",
    "null_safe": "SELECT l.x, r.y FROM l, r WHERE l.s IS NOT DISTINCT FROM r.s AND r.y <> 2",
    "grouped": "SELECT m.k, COUNT(*) AS n, SUM(r.y) AS t FROM r, m "
               "WHERE r.k = m.k AND r.s = 'a' GROUP BY m.k",
    "exists_star": "SELECT l.k, l.x FROM l WHERE EXISTS (SELECT * FROM r WHERE r.k = l.k "
                   "AND r.y <> l.x)",
    "exists_count": "SELECT l.k FROM l WHERE EXISTS (SELECT count(*) FROM r WHERE r.k = 9)",
    "not_exists": "SELECT l.k, m.z FROM l, m WHERE l.k = m.k AND NOT EXISTS "
                  "(SELECT * FROM r WHERE r.k = l.k AND r.y > m.z)",
}


@RANDOM_CDC
@given(data=st.data())
def test_where_over_inner_joins_random_cdc(data: st.DataObject) -> None:
    run_workload(TABLES, VIEWS, data, epochs=8, domains=DOMAINS)


def test_the_plan_joins_on_the_where_and_filters_below() -> None:
    db = ivm.connect()
    db.execute(";".join(TABLES))
    db.execute(f"CREATE VIEW chain AS {VIEWS['chain']}")
    text = db.explain("chain")
    assert "nested loop" not in text
    assert 'equi-keys: l.k = r.k, r.k = m.k' in text
    join, below = text.index("DeltaJoin"), text.index('Filter "m.z" > 0')
    assert below > join  # the filter is an input of the join, not above it


def test_exists_star_keeps_only_the_columns_named() -> None:
    db = ivm.connect()
    db.execute(";".join(TABLES))
    db.execute(f"CREATE VIEW v AS {VIEWS['exists_star']}")
    sources = [line for line in db.explain("v").splitlines() if "Project r." in line]
    assert sources and all("r.s" not in line for line in sources)


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_where_over_inner_joins_on_spark(data: st.DataObject, spark: Any,
                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("spark-join-filters")
    run_workload(TABLES, {"chain": VIEWS["chain"], "not_exists": VIEWS["not_exists"]}, data,
                 epochs=2, domains=DOMAINS,
                 connect=lambda: ivm.connect(directory, spark=spark,
                                             partitions=SPARK_PARTITIONS))
