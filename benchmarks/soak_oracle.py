"""The soak's oracle: plain DuckDB tables holding what the workload sent, every view of
``soak_workload.VIEWS`` as a DuckDB view over them, and the comparison of a session's
tables and views with the oracle's.

DuckDB recomputes every view but one from the tables. The processing-time temporal join
(``charged``) depends on when rows arrived, which no query over the tables can tell, so
the oracle keeps what each live order was charged: after each epoch's batches are
applied, every order the epoch inserted is stamped with its product's category and
price as of the end of the epoch (``charged_at_arrival``); a deleted order's stamp goes
with it. The view is then an ordinary join of ``orders`` with those stamps
(``ORACLE_SQL``). The workload never deletes and re-inserts an identical order in one
epoch, so every insert is an arrival.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import duckdb
import pyarrow as pa
from soak_workload import COLUMNS, KEYS, TYPES, VIEWS

ORACLE_SQL: dict[str, str] = {
    "charged": "SELECT a.category, COUNT(*) AS n, SUM(o.amount) AS total, "
    "SUM(a.price) AS list_total FROM orders o JOIN charged_at_arrival a ON o.id = a.id "
    "GROUP BY a.category",
}
"""The oracle's own SQL for views DuckDB cannot recompute from the tables."""
FLOAT_TOLERANCE = 1e-9


class Oracle:
    """Plain DuckDB tables holding what the workload sent, and the views over them."""

    def __init__(self) -> None:
        self.con = duckdb.connect()
        for name, schema in TYPES.items():
            empty = schema.empty_table()  # noqa: F841 - read by DuckDB's replacement scan
            self.con.execute(f"CREATE TABLE {name} AS SELECT * FROM empty")
        self.con.execute("CREATE TABLE charged_at_arrival "
                         "(id BIGINT, category VARCHAR, price DECIMAL(10,2))")
        for name, sql in VIEWS.items():
            self.con.execute(f"CREATE VIEW {name} AS {ORACLE_SQL.get(name, sql)}")

    def apply(self, batches: dict[str, pa.Table]) -> None:
        """Apply one epoch's batches (deletes by key, then inserts), then stamp the orders
        it inserted with their products as the epoch left them."""
        for name, batch in batches.items():  # noqa: B007 - batch read by DuckDB's scan
            keys = ", ".join(KEYS[name])
            columns = ", ".join(COLUMNS[name])
            self.con.execute(
                f"DELETE FROM {name} WHERE ({keys}) IN "
                f"(SELECT ({keys}) FROM batch WHERE __w < 0)"
            )
            self.con.execute(f"INSERT INTO {name} SELECT {columns} FROM batch WHERE __w > 0")
        if "orders" in batches:
            changed = batches["orders"]  # noqa: F841 - read by DuckDB's scan
            self.con.execute("DELETE FROM charged_at_arrival WHERE id IN "
                             "(SELECT id FROM changed WHERE __w < 0)")
            self.con.execute("INSERT INTO charged_at_arrival SELECT o.id, p.category, p.price "
                             "FROM changed o JOIN products p ON o.product = p.id "
                             "WHERE o.__w > 0")

    def view(self, name: str, sql: str | None = None) -> pa.Table:
        """View ``name`` as the oracle holds it (or the query ``sql`` over its tables)."""
        return self.con.sql(sql or f"SELECT * FROM {name}").to_arrow_table()

    def table(self, name: str) -> pa.Table:
        """Table ``name``'s rows."""
        return self.con.sql(f"SELECT * FROM {name}").to_arrow_table()


def _hashable(value: Any) -> Any:
    return tuple(map(_hashable, value)) if isinstance(value, list) else value


def _exact_part(row: tuple) -> tuple:
    return tuple(None if isinstance(v, float) else _hashable(v) for v in row)


def mismatch(expected: pa.Table, actual: pa.Table) -> str | None:
    """None when the tables hold the same rows (a multiset; floats within 1e-9 relative);
    else a short description of the difference."""
    want = [tuple(r.values()) for r in expected.to_pylist()]
    got = [tuple(r.values()) for r in actual.to_pylist()]
    want_exact, got_exact = Counter(map(_exact_part, want)), Counter(map(_exact_part, got))
    if want_exact != got_exact:
        missing = list((want_exact - got_exact).elements())[:5]
        extra = list((got_exact - want_exact).elements())[:5]
        return f"{len(want)} rows expected, {len(got)} held; missing {missing}, extra {extra}"
    order = sorted(range(len(want)), key=lambda i: repr(_exact_part(want[i])))
    held = sorted(range(len(got)), key=lambda i: repr(_exact_part(got[i])))
    for i, j in zip(order, held, strict=True):
        for a, b in zip(want[i], got[j], strict=True):
            if isinstance(a, float) and not (
                isinstance(b, float)
                and math.isclose(a, b, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE)
            ):
                return f"row {want[i]} held as {got[j]}"
    return None


def check_exact(db: Any, oracle: Oracle, where: str, views: dict[str, str] | None = None) -> None:
    """Every table and view (``views``: name to SQL, by default all of ``VIEWS``) of ``db``
    equals the oracle's (AssertionError naming the first that does not). A view whose SQL
    is the workload's own is read from the oracle's view of that name (so a temporal
    join gets its stamped oracle); any other SQL is run over the oracle's tables."""
    for name in COLUMNS:
        found = mismatch(oracle.table(name), db.read(name))
        assert found is None, f"{where}: table {name}: {found}"
    for name, sql in (VIEWS if views is None else views).items():
        expected = oracle.view(name) if VIEWS.get(name) == sql else oracle.view(name, sql)
        found = mismatch(expected, db.read(name))
        assert found is None, f"{where}: view {name}: {found}"
