"""A correlated aggregate subquery keeps only the groups its enclosing query reads."""

from __future__ import annotations

import ivm

QUERY = (
    "SELECT SUM(l_price) AS total FROM li, part WHERE p_partkey = l_partkey AND "
    "p_brand = 'b1' AND l_qty < (SELECT AVG(l_qty) FROM li WHERE l_partkey = p_partkey)"
)


def versions(db: ivm.Session, view: str) -> int:
    """Groups live in the view's keyed aggregate state (its group versions' traces)."""
    names = db._con.execute(
        "SELECT DISTINCT table_name FROM duckdb_columns() WHERE starts_with(table_name, ?) "
        "AND column_name = '__k0'", [f"__ivm_op_{view}#versions-"],
    ).fetchall()
    return sum(db._con.execute(
        f'SELECT count(*) FROM (SELECT "__k0" FROM "{name}" GROUP BY "__k0" '
        'HAVING SUM("__w") > 0)').fetchall()[0][0] for (name,) in names)


def test_the_subquerys_groups_are_the_outer_keys_only() -> None:
    db = ivm.connect()
    db.execute("CREATE TABLE part (p_partkey INT PRIMARY KEY, p_brand VARCHAR); "
               "CREATE TABLE li (l_partkey INT, l_qty INT, l_price INT)")
    db.ingest({"part": [{"p_partkey": i, "p_brand": f"b{i % 10}"} for i in range(100)],
               "li": [{"l_partkey": i % 100, "l_qty": i % 7, "l_price": i} for i in range(1000)]})
    db.execute(f"CREATE VIEW v AS {QUERY}")
    assert versions(db, "v") == 10  # parts 1, 11, …, 91: not the 100 parts lineitem holds
    # the outer keys are one Distinct, read by the join back and by the restriction
    assert db.explain("v").count("Distinct") == 1
    # a part joins the brand: its group enters; lineitems of other parts change nothing kept
    db.ingest({"part": [{"p_partkey": 2, "p_brand": "b2", "__w": -1},
                        {"p_partkey": 2, "p_brand": "b1", "__w": 1}],
               "li": [{"l_partkey": 3, "l_qty": 0, "l_price": 5, "__w": 1},
                      {"l_partkey": 2, "l_qty": 0, "l_price": 7, "__w": 1}]})
    assert versions(db, "v") == 11
    assert db.read("v").to_pylist() == db.sql(QUERY).to_pylist()
