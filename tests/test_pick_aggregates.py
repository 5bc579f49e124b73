"""FIRST, LAST and ANY_VALUE (and DuckDB's ARBITRARY): maintained where every candidate of
a group is equal, so DuckDB's pick is determined: a constant argument, or an argument of
the GROUP BY key columns; anywhere else refused by name (DuckDB picks a row as it happens
to scan them, which no maintenance can reproduce)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle.harness import run_workload
from oracle.settings import RANDOM_CDC

import ivm

T = "CREATE TABLE t (k INTEGER, g VARCHAR, x INTEGER)"
DOMAINS: dict[str, tuple[Any, ...]] = {
    "t.k": (None, 1, 2), "t.g": (None, "a", "b"), "t.x": (None, 0, 1, 2),
}

VIEWS = {
    "by_key": "SELECT k, g, ANY_VALUE(k * 10) AS a, FIRST(g || '!') AS f, "
              "LAST(7) AS c, COUNT(*) AS n FROM t GROUP BY k, g",
    "filtered": "SELECT k, LAST(k) FILTER (WHERE x > 0) AS l, "
                "ANY_VALUE('x') FILTER (WHERE x IS NULL) AS c FROM t GROUP BY k",
    "global": "SELECT FIRST(1) AS one, ANY_VALUE(NULL::INTEGER) AS nothing, "
              "LAST('z') FILTER (WHERE x = 2) AS z, COUNT(*) AS n FROM t",
    "having": "SELECT g, SUM(x) AS s FROM t GROUP BY g HAVING ANY_VALUE(g) IS NOT NULL",
}


@RANDOM_CDC
@given(data=st.data())
def test_determined_picks_under_random_cdc(data: st.DataObject) -> None:
    run_workload([T], VIEWS, data, epochs=10, domains=DOMAINS)


@pytest.mark.parametrize(("sql", "name"), [
    ("SELECT k, ANY_VALUE(x) AS a FROM t GROUP BY k", "ANY_VALUE"),
    ("SELECT FIRST(x ORDER BY k) AS f FROM t", "FIRST"),
    ("SELECT k, LAST(k + x) AS l FROM t GROUP BY k", "LAST"),
    ("SELECT k, ARBITRARY(x) AS a FROM t GROUP BY k", "ARBITRARY"),
    ("SELECT k, ANY_VALUE(k) AS a FROM t GROUP BY ROLLUP (k)", "ANY_VALUE"),
])
def test_undetermined_picks_are_refused_by_name(sql: str, name: str) -> None:
    with ivm.connect() as db:
        db.execute(T)
        with pytest.raises(ivm.UnsupportedSQL, match=rf"^{name} \(at line 1.*candidate"):
            db.execute(f"CREATE VIEW v AS {sql}")
