"""Golden files for ``explain``: the exact circuit text of a few representative views.

Regenerate after an intended change with ``IVM_REGOLD=1 make test`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ivm

GOLDEN = Path(__file__).parent / "golden"
SCHEMA = """
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DECIMAL(12,2));
    CREATE TABLE customers (name VARCHAR PRIMARY KEY, region VARCHAR);
"""
VIEWS = {
    "revenue_by_region": "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n "
    "FROM orders o JOIN customers c ON o.customer = c.name GROUP BY c.region",
    "extremes": "SELECT customer, MIN(amount) AS lo, MAX(amount) AS hi FROM orders "
    "GROUP BY customer HAVING COUNT(*) > 1",
    "regions": "SELECT DISTINCT region FROM customers WHERE region IS NOT NULL",
}


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_explain_matches_golden_file(view: str) -> None:
    db = ivm.connect()
    db.execute(SCHEMA)
    db.execute(f"CREATE VIEW {view} AS {VIEWS[view]}")
    text = db.explain(view) + "\n"
    path = GOLDEN / f"explain_{view}.txt"
    if os.environ.get("IVM_REGOLD"):
        path.write_text(text)
    assert text == path.read_text()
